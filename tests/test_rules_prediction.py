"""What a run says about its path's prediction, and a pair's diagnosis (gate.rules.prediction).

Each table is written from the rule's sentences, every condition a row where it alone
changes the answer, so that a flipped comparison or a dropped condition fails one.
"""

from __future__ import annotations

import pytest

from gate.rules.prediction import (
    Diagnosis,
    JitGap,
    Reading,
    diagnosis,
    excused,
    jit_gap,
    reading,
)
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit

# (can_run, firm, passed, code_failure, compilers, the reading)
READING_ROWS = [
    # A pass where the project's own code could not run contradicts inspection ...
    (False, True, True, False, False, Reading.RAN_ANYWAY),
    (None, True, True, False, False, Reading.RAN_ANYWAY),  # unknown reads as "cannot"
    (False, True, True, False, True, Reading.RAN_ANYWAY),  # compilers excuse no pass
    # ... a pass where only a library lacked code does not: its kernels never ran.
    (False, False, True, False, False, Reading.NOT_NEEDED),
    (None, False, True, False, False, Reading.NOT_NEEDED),
    # A failure for want of code where it could run contradicts it, unless code was
    # compiled at run time.
    (True, True, False, True, False, Reading.UNEXPECTED_FAILURE),
    (True, False, False, True, False, Reading.UNEXPECTED_FAILURE),
    (True, True, False, True, True, Reading.AS_PREDICTED),
    (True, True, False, False, False, Reading.AS_PREDICTED),  # another failure: not code's
    (True, True, True, False, False, Reading.AS_PREDICTED),  # it could run, and it did
    # A failure where it could not run was predicted, whatever the cause.
    (False, True, False, True, False, Reading.AS_PREDICTED),
    (False, False, False, True, False, Reading.AS_PREDICTED),
    (None, True, False, True, False, Reading.AS_PREDICTED),
]


@pytest.mark.parametrize(
    ("can_run", "firm", "passed", "code_failure", "compilers", "expected"), READING_ROWS
)
def test_one_run_against_its_path_s_prediction(  # noqa: PLR0917  (one row's columns)
    can_run: bool | None,
    firm: bool,
    passed: bool,
    code_failure: bool,
    compilers: bool,
    expected: Reading,
) -> None:
    got = reading(
        can_run=can_run, firm=firm, passed=passed, code_failure=code_failure, compilers=compilers
    )
    assert got is expected


EXCUSED = {
    "jit": True,
    "passed": False,
    "code_failure": True,
    "blocked_by_library": True,
    "own_proved": True,
}


def test_a_forced_jit_run_failed_as_predicted_is_excused() -> None:
    assert excused(**EXCUSED) is True


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("jit", False),  # the native path is never excused
        ("passed", True),  # nothing to excuse
        ("code_failure", False),  # it failed for some other reason
        ("blocked_by_library", False),  # nothing outside the project blocks it
        ("own_proved", False),  # the project's own PTX was not proved to load
    ],
)
def test_a_run_is_excused_only_when_every_condition_holds(field: str, value: bool) -> None:
    assert excused(**{**EXCUSED, field: value}) is False


# (native passed, JIT passed, JIT blocked by a library, native and JIT for want of code)
DIAGNOSIS_ROWS = [
    (True, True, False, False, False, None),
    (True, True, True, True, True, None),  # both passed: nothing to diagnose
    (False, True, False, False, False, Diagnosis.NATIVE_FAILS),
    (False, True, True, True, True, Diagnosis.NATIVE_FAILS),
    (True, False, True, False, False, Diagnosis.JIT_BLOCKED),
    (True, False, False, False, True, Diagnosis.JIT_FAILS),
    (False, False, True, True, True, Diagnosis.BOTH_FOR_WANT_OF_CODE),
    (False, False, False, True, True, Diagnosis.BOTH_FOR_WANT_OF_CODE),
    (False, False, False, True, False, Diagnosis.BOTH_FAIL),
    (False, False, False, False, True, Diagnosis.BOTH_FAIL),
    (False, False, True, False, False, Diagnosis.BOTH_FAIL),  # blocked: JIT only, not both
]


@pytest.mark.parametrize(
    ("native", "jit", "blocked", "native_want", "jit_want", "expected"), DIAGNOSIS_ROWS
)
def test_the_diagnosis_of_a_pair_of_runs(  # noqa: PLR0917  (one row's columns)
    native: bool,
    jit: bool,
    blocked: bool,
    native_want: bool,
    jit_want: bool,
    expected: Diagnosis | None,
) -> None:
    got = diagnosis(
        native_passed=native,
        jit_passed=jit,
        jit_blocked_by_library=blocked,
        native_want_of_code=native_want,
        jit_want_of_code=jit_want,
    )
    assert got is expected


# --- Forced JIT for the project's own code, per kernel -----------------------------------
H200 = Capability(9, 0)
CUDA13 = Version(13, 0)  # JITs ISA 9.0, not 9.1 (13.1) or 9.2 (13.2)


def _ptx(
    target: str, isa: str | None, *kernels: str
) -> tuple[Target, Version | None, tuple[str, ...]]:
    return (Target.parse(target), Version.parse(isa) if isa else None, kernels)


# (expected kernels, PTX entries, driver, the gap)
JIT_ROWS = [
    (("a", "b"), [_ptx("compute_90", "9.0", "a", "b")], CUDA13, None),
    (("a", "b"), [_ptx("compute_80", "8.0", "a", "b")], CUDA13, None),  # older PTX JITs
    (("a", "b"), [], CUDA13, JitGap(("a", "b"), ())),
    (("b", "a"), [_ptx("compute_90", "9.0", "a")], CUDA13, JitGap(("b",), ())),
    # PTX for a newer device does not JIT for this one.
    (("a",), [_ptx("compute_100", "9.0", "a")], CUDA13, JitGap(("a",), ())),
    (("a",), [_ptx("compute_100", "9.0", "a"), _ptx("compute_90", "9.0", "a")], CUDA13, None),
    # PTX too new for the driver: named with its ISA and the driver it needs.
    (
        ("a", "b"),
        [_ptx("compute_90", "9.2", "a", "b")],
        CUDA13,
        JitGap(("a", "b"), ("a", "b"), Version(9, 2), Version(13, 2)),
    ),
    # Too new only where no other PTX of the kernel JITs, in the expected order.
    (
        ("c", "b", "a"),
        [_ptx("compute_90", "9.2", "a", "b"), _ptx("compute_90", "9.0", "a")],
        CUDA13,
        JitGap(("c", "b"), ("b",), Version(9, 2), Version(13, 2)),
    ),
    (
        ("b", "a"),
        [_ptx("compute_90", "9.1", "a"), _ptx("compute_90", "9.2", "b")],
        CUDA13,
        JitGap(("b", "a"), ("b", "a"), Version(9, 2), Version(13, 2)),
    ),
    # The entry seen last names the ISA of a kernel in two too-new entries.
    (
        ("a",),
        [_ptx("compute_90", "9.1", "a"), _ptx("compute_90", "9.2", "a")],
        CUDA13,
        JitGap(("a",), ("a",), Version(9, 2), Version(13, 2)),
    ),
    # A driver not known, or an ISA not known, refuses nothing.
    (("a",), [_ptx("compute_90", "9.2", "a")], None, None),
    (("a",), [_ptx("compute_90", None, "a")], CUDA13, None),
    ((), [_ptx("compute_90", "9.2", "a")], CUDA13, None),  # nothing expected
]


@pytest.mark.parametrize(("expected", "ptx", "driver", "gap"), JIT_ROWS)
def test_which_kernels_forced_jit_cannot_run(
    expected: tuple[str, ...],
    ptx: list[tuple[Target, Version | None, tuple[str, ...]]],
    driver: Version | None,
    gap: JitGap | None,
) -> None:
    assert jit_gap(expected, ptx, H200, driver) == gap
