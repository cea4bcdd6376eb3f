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
"""

from __future__ import annotations

import enum


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
