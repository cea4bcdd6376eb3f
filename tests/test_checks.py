"""Checks, verdict and diagnosis: what a release engineer relies on the gate to say."""

from __future__ import annotations

import pytest

from gate.proc import Result
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.reader.targets import Capability, Target, Version
from gate.stages import checks
from gate.stages.execute import EntryPoint, ExecPath, Execution, RuntimeFailure, classify

pytestmark = pytest.mark.unit

H200 = Capability(9, 0)
KERNEL = "_Z11write_valuePi"


def listing(
    *, sass: tuple[str, ...] = ("sm_90",), ptx: tuple[str, ...] = ("compute_90",)
) -> Listing:
    entries = [DeviceEntry(Kind.SASS, Target.parse(s), ()) for s in sass]  # dlink stubs
    entries += [DeviceEntry(Kind.SASS, Target.parse(s), (KERNEL,)) for s in sass]
    entries += [
        DeviceEntry(Kind.PTX, Target.parse(p), (KERNEL,), ptx_isa=Version(9, 0)) for p in ptx
    ]
    return Listing(tuple(entries))


def execution(path: ExecPath, rc: int, output: str) -> Execution:
    entry = EntryPoint("check", ("./check",))
    result = Result(("./check",), rc, output, "", 0.1)
    return Execution(
        entry,
        path,
        result,
        path.log_name,
        "PASS" in output,
        True,
        None if rc == 0 else classify(output),
    )


def ok(path: ExecPath) -> Execution:
    return execution(path, 0, "PASS\n")


NO_IMAGE = "no kernel image is available for execution on the device\n"
JIT_OFF = "PTX JIT compilation was disabled\n"


def failing(checks_: list[checks.Check]) -> list[str]:
    return [c.name for c in checks_ if not c.passed]


def test_full_build_passes_every_listing_check() -> None:
    result = checks.listing_checks("check", listing(), Target.parse("sm_90"), ("write_value",))
    assert len(result) == 4
    assert failing(result) == []


def test_ptx_only_build_fails_the_sass_checks_and_names_what_is_there() -> None:
    result = checks.listing_checks(
        "check", listing(sass=()), Target.parse("sm_90"), ("write_value",)
    )
    assert failing(result) == ["check: SASS for sm_90", "check: kernel write_value in sm_90 SASS"]
    assert "SASS targets: none" in result[0].message


def test_foreign_target_is_missing_not_substituted() -> None:
    result = checks.listing_checks(
        "check",
        listing(sass=("sm_80",), ptx=("compute_80",)),
        Target.parse("sm_90"),
        ("write_value",),
    )
    assert "no SASS for sm_90; SASS targets: sm_80" in result[0].message
    assert len(failing(result)) == 4


def test_missing_kernel_is_reported_per_target() -> None:
    lst = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), ("_Z5otherv",)),
            DeviceEntry(Kind.PTX, Target.parse("compute_90"), (KERNEL,)),
        )
    )
    result = checks.listing_checks("lib", lst, Target.parse("sm_90"), ("write_value",))
    assert failing(result) == ["lib: kernel write_value in sm_90 SASS"]


def test_kernel_matching_is_exact_or_itanium_mangled() -> None:
    assert checks.kernel_matches(KERNEL, "write_value")
    assert checks.kernel_matches("write_value", "write_value")
    assert not checks.kernel_matches("_Z12write_valuesPi", "write_value")


def test_verdict_needs_execution_evidence() -> None:
    passing = [checks.Check("a", "gate.inspect", True, "ok")]
    v = checks.verdict(passing, executed=False)
    assert not v.accepted
    assert v.statement == "not accepted: execution not verified"


def test_verdict_accepts_only_with_all_checks_and_execution() -> None:
    v = checks.verdict([checks.Check("a", "gate.inspect", True, "ok")], executed=True)
    assert v.accepted
    assert (
        v.statement == "Passed with the current driver, current artifacts, and tested entry points."
    )
    bad = checks.verdict([checks.Check("a", "gate.inspect", False, "broken")], executed=True)
    assert bad.statement == "not accepted: a: broken"


def test_verdict_headline_is_the_blocking_error() -> None:
    v = checks.verdict([], executed=False, blocked="nvcc not found on PATH")
    assert v.statement == "not accepted: nvcc not found on PATH"
    assert "execution not verified" in v.reasons


@pytest.mark.parametrize(
    ("native", "jit", "expected"),
    [
        ((1, JIT_OFF), (0, "PASS\n"), "revisit the native target and the final link step"),
        ((0, "PASS\n"), (1, NO_IMAGE), "check that PTX is present and that the driver supports"),
        ((1, NO_IMAGE), (1, NO_IMAGE), "investigate the toolchain, runtime libraries and device"),
    ],
)
def test_diagnosis_for_each_failure_combination(
    native: tuple[int, str], jit: tuple[int, str], expected: str
) -> None:
    runs = [execution(ExecPath.NATIVE, *native), execution(ExecPath.JIT, *jit)]
    found = checks.diagnose(runs, listing(), H200, Version(13, 0))
    assert len(found) == 1
    assert expected in found[0]
    assert "_90" in found[0]  # the evidence: what the artifact holds (sm_90 or compute_90)


def test_no_diagnosis_when_both_pass() -> None:
    assert checks.diagnose([ok(ExecPath.NATIVE), ok(ExecPath.JIT)], listing(), H200, None) == []


def test_unsupported_ptx_diagnosis_names_the_driver() -> None:
    runs = [
        ok(ExecPath.NATIVE),
        execution(ExecPath.JIT, 1, "the provided PTX was compiled with an unsupported toolchain\n"),
    ]
    found = checks.diagnose(runs, listing(), H200, Version(12, 4))
    assert "older than the PTX ISA needs" in found[0]
    assert "driver >= 13.0" in found[0]


def test_prediction_mismatch_when_native_passes_without_sass() -> None:
    # The JIT-cache pitfall: a PTX-only build must not pass natively.
    check = checks.prediction_check(
        "check", listing(sass=()), H200, Version(13, 0), [ok(ExecPath.NATIVE), ok(ExecPath.JIT)]
    )
    assert not check.passed
    assert "native passed but inspection predicted it would fail" in check.message
    assert "JIT cache" in check.message


def test_prediction_matches_for_sass_only_build() -> None:
    runs = [ok(ExecPath.NATIVE), execution(ExecPath.JIT, 1, NO_IMAGE)]
    check = checks.prediction_check("check", listing(ptx=()), H200, Version(13, 0), runs)
    assert check.passed, check.message


def test_prediction_for_foreign_target_expects_both_to_fail() -> None:
    lst = listing(sass=("sm_120",), ptx=("compute_120",))
    runs = [execution(ExecPath.NATIVE, 1, NO_IMAGE), execution(ExecPath.JIT, 1, NO_IMAGE)]
    assert checks.prediction_check("check", lst, H200, Version(13, 0), runs).passed


@pytest.mark.parametrize("failure", list(RuntimeFailure))
def test_runtime_failures_are_classified_from_their_text(failure: RuntimeFailure) -> None:
    assert classify(f"some prefix: {failure.text}\n") is failure
