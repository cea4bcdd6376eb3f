"""What a run says about inspection's prediction for its path, and the diagnosis of a pair.

The inspection stage predicts, per entry point and path, whether its code can run
(:mod:`gate.stages.predict` reads the code for it); these decide what the runs then say:

1. One run against its path's prediction (:func:`reading`): a pass where the project's
   own code could not run, or a failure for want of code where it could (and nothing
   compiled code at run time), contradicts it; a pass where only a library outside the
   project lacked code does not (it launched none of that library's kernels).
2. A failed forced-JIT run is excused (:func:`excused`) only as predicted: it failed for
   want of code, a library outside the project blocks forced JIT, and the project's own
   PTX was proved to load.
3. The diagnosis of a pair of runs (:func:`diagnosis`), by which path failed and why.
4. Forced JIT for the project's own code, per kernel (:func:`jit_gap`): each kernel built
   for the device needs PTX that JIT-compiles for it and that this driver can JIT.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gate.rules.compat import ptx_jits_for
from gate.rules.routes import jit_support, min_driver
from gate.rules.targets import Capability, Target, Version


class Reading(enum.Enum):
    """How one run reads against its path's prediction (step 1)."""

    AS_PREDICTED = "as predicted"
    NOT_NEEDED = "missing code not needed"  # a library lacked code; its kernels never ran
    RAN_ANYWAY = "passed where nothing could run"
    UNEXPECTED_FAILURE = "failed for want of code where it could run"


def reading(
    *, can_run: bool | None, firm: bool, passed: bool, code_failure: bool, compilers: bool
) -> Reading:
    """One run against the prediction for its path (step 1). ``can_run``: the prediction
    (None: unknown); ``firm``: "cannot run" is the project's own code's, not a library's;
    ``code_failure``: the run failed for want of code; ``compilers``: the entry point
    compiled code at run time (so its failure may be that code's)."""
    if not can_run and passed:
        return Reading.RAN_ANYWAY if firm else Reading.NOT_NEEDED
    if can_run and code_failure and not compilers:
        return Reading.UNEXPECTED_FAILURE
    return Reading.AS_PREDICTED


def excused(
    *, jit: bool, passed: bool, code_failure: bool, blocked_by_library: bool, own_proved: bool
) -> bool:
    """Whether a run does not count against the project (step 2): a forced-JIT run that
    failed for want of code, where a library outside the project blocks forced JIT and the
    project's own PTX (every artifact of it) loaded under forced JIT."""
    return jit and not passed and code_failure and blocked_by_library and own_proved


class Diagnosis(enum.Enum):
    """What a pair of runs, one per path, says went wrong (step 3)."""

    NATIVE_FAILS = "native fails, PTX JIT passes"
    JIT_BLOCKED = "forced JIT blocked by a library outside the project"
    JIT_FAILS = "native passes, PTX JIT fails"
    BOTH_FOR_WANT_OF_CODE = "both fail for want of code, as predicted for each"
    BOTH_FAIL = "both fail"


def diagnosis(
    *,
    native_passed: bool,
    jit_passed: bool,
    jit_blocked_by_library: bool,
    native_want_of_code: bool,
    jit_want_of_code: bool,
) -> Diagnosis | None:
    """The diagnosis of an entry point's two runs (step 3); None when both passed. A
    path's ``want_of_code``: its run failed for want of code and inspection said it
    could not run."""
    if native_passed and jit_passed:
        return None
    if not native_passed and jit_passed:
        return Diagnosis.NATIVE_FAILS
    if native_passed and jit_blocked_by_library:
        return Diagnosis.JIT_BLOCKED
    if native_passed:
        return Diagnosis.JIT_FAILS
    if native_want_of_code and jit_want_of_code:
        return Diagnosis.BOTH_FOR_WANT_OF_CODE
    return Diagnosis.BOTH_FAIL


@dataclass(frozen=True)
class JitGap:
    """Kernels built for a device that forced JIT cannot run there (step 4)."""

    missing: tuple[str, ...]  # without PTX this driver JITs for the device, in order
    too_new: tuple[str, ...]  # of them, those whose PTX for the device is too new for it
    isa: Version | None = None  # the first of those's PTX ISA ...
    need: Version | None = None  # ... and the driver it needs (None: newer than the rules know)


def jit_gap(
    expected: Sequence[str],
    ptx: Iterable[tuple[Target, Version | None, Sequence[str]]],
    cap: Capability,
    driver: Version | None,
) -> JitGap | None:
    """Which of the ``expected`` kernels (built for ``cap``) forced JIT cannot run with
    ``driver``, from the ``ptx`` entries (target, ISA, kernels); None when every one can.
    A kernel is JIT-able where some entry's PTX JIT-compiles for ``cap`` and its ISA is
    one the driver can JIT; where its only such PTX is too new, the entry seen last names
    the ISA and the driver it needs."""
    jittable: set[str] = set()
    too_new: dict[str, tuple[Version, Version | None]] = {}  # kernel -> (ISA, its minimum)
    for target, isa, kernels in ptx:
        if not ptx_jits_for(target, cap):
            continue
        if jit_support(isa, driver) is False:
            assert isa is not None  # noqa: S101 - an unknown ISA is never refused
            too_new.update(dict.fromkeys(kernels, (isa, min_driver(isa))))
        else:
            jittable.update(kernels)
    missing = tuple(k for k in expected if k not in jittable)
    if not missing:
        return None
    blocked = tuple(k for k in missing if k in too_new)
    if not blocked:
        return JitGap(missing, ())
    isa, need = too_new[blocked[0]]
    return JitGap(missing, blocked, isa, need)
