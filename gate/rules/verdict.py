"""The checks' one state, the verdict over them, and how both read in an attestation.

* :class:`CheckState`: a check *passed*, *warned* (ran, and what it found is accepted
  with a caveat: an explained failure, a run with nothing to compare it with),
  *failed*, or *did not run*. One meaning in result.json, JUnit, the manifest and the
  test-result Statement; a check that did not run is never counted as passed.
* :func:`decide`: accepted only when every stage ran, no check failed or was left
  unrun, and both paths ran for every entry point. The headline is what stopped the
  pipeline, else the failing check whose cause ranks first, and beside it the first
  failure on the other execution path when the two paths fail for different reasons.
* :func:`attestation_list` / :func:`attestation_result`: the in-toto test-result
  predicate's lists and result, which agree with the verdict.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from gate.errors import ExitCode
from gate.rules.causes import Cause, ExecPath, path_of, rank

ACCEPTED_STATEMENT = "Passed with the current driver, current artifacts, and tested entry points."
NOT_EXECUTED = "execution not verified"


class CheckState(enum.Enum):
    """How one check ended."""

    PASSED = "passed"
    WARNED = "warned"
    FAILED = "failed"
    NOT_RUN = "not-run"

    @classmethod
    def of(cls, ok: bool) -> CheckState:
        """PASSED or FAILED."""
        return cls.PASSED if ok else cls.FAILED

    @property
    def label(self) -> str:
        """The console's word: PASS, WARN, FAIL, SKIP."""
        return _LABELS[self]


_LABELS = {
    CheckState.PASSED: "PASS",
    CheckState.WARNED: "WARN",
    CheckState.FAILED: "FAIL",
    CheckState.NOT_RUN: "SKIP",
}


@dataclass(frozen=True)
class Check:
    """One check of the run: one JUnit test case.

    ``cause`` says why a failed check failed (None otherwise); ``path`` is the execution
    path it stands for, where it stands for one; ``output`` is the log shown in JUnit's
    system-out, not part of result.json; ``remedy`` is what to do about a failure where
    the check knows more than the run does (:mod:`gate.rules.remedies`), said on the
    console and in the summary, not part of result.json.
    """

    name: str
    classname: str
    state: CheckState
    message: str
    duration: float = 0.0
    output: str = ""
    cause: Cause | None = None
    path: ExecPath | None = None
    remedy: str | None = None

    @property
    def failed(self) -> bool:
        """The check ran and failed."""
        return self.state is CheckState.FAILED

    @property
    def ok(self) -> bool:
        """The check ran and what it found is accepted (passed, or passed with a warning)."""
        return self.state in (CheckState.PASSED, CheckState.WARNED)

    @property
    def status(self) -> str:
        """``PASS``, ``WARN``, ``FAIL`` or ``SKIP``."""
        return self.state.label


class StageStatus(enum.Enum):
    """How a stage ended."""

    RAN = "ran"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: whether it ran, and why not or what stopped it."""

    name: str
    status: StageStatus
    detail: str = ""
    duration: float = 0.0
    exit_code: int | None = None  # a failed stage's exit status (gate.errors.ExitCode)


@dataclass(frozen=True)
class Verdict:
    """Accepted or not, the statement, the reasons ranked by cause."""

    accepted: bool
    statement: str
    reasons: tuple[str, ...]
    cause: Cause | None = None
    exit_code: ExitCode = ExitCode.OK

    @property
    def headline(self) -> str:
        """The statement without its ``not accepted:`` prefix."""
        return self.statement.removeprefix("not accepted: ")


Ran = tuple[str, ExecPath]  # an entry point's name and the path it ran on


def decide(stages: Sequence[Stage], checks: Sequence[Check], executions: Sequence[Ran]) -> Verdict:
    """The verdict over the stages, the checks and the runs (see the module docstring).

    The exit status follows the headline: a failed stage's own status, 1 for a failed
    or unrun check, 4 when only the missing device kept an otherwise clean run from
    being accepted.
    """
    failing = sorted((c for c in checks if c.failed), key=_check_rank)
    reasons = [_reason(c) for c in failing]
    execute = next((s for s in stages if s.name == "execute"), None)
    skipped = execute is not None and execute.status is StageStatus.SKIPPED
    unverified = None
    if skipped or not executed(executions):
        why = execute.detail if execute is not None and skipped else ""
        unverified = f"{NOT_EXECUTED} ({why})" if why else NOT_EXECUTED
        reasons.append(unverified)  # it stands for every run and check left unrun
    else:
        reasons += [f"{_reason(c)} (did not run)" for c in checks if c.state is CheckState.NOT_RUN]
    failed_stage = next((s for s in stages if s.status is StageStatus.FAILED), None)
    if failed_stage is not None:
        detail = failed_stage.detail or f"the {failed_stage.name} stage failed"
        own = [c for c in failing if c.classname.startswith(f"gate.{failed_stage.name}")]
        code = ExitCode(failed_stage.exit_code or ExitCode.NOT_ACCEPTED)
        rest = tuple(r for r in reasons if not r.endswith(detail))
        cause = own[0].cause if own else None
        return Verdict(False, f"not accepted: {detail}", (detail, *rest), cause, code)
    if failing:
        statement = f"not accepted: {_two_paths(failing)}"
        return Verdict(False, statement, tuple(reasons), failing[0].cause, ExitCode.NOT_ACCEPTED)
    if unverified is not None:
        no_device = skipped and execute is not None and execute.exit_code == ExitCode.NO_DEVICE
        code = ExitCode.NO_DEVICE if no_device else ExitCode.NOT_ACCEPTED
        return Verdict(False, f"not accepted: {unverified}", tuple(reasons), None, code)
    if reasons:
        return Verdict(
            False, f"not accepted: {reasons[0]}", tuple(reasons), None, ExitCode.NOT_ACCEPTED
        )
    return Verdict(True, ACCEPTED_STATEMENT, ())


def _reason(check: Check) -> str:
    return f"{check.name}: {check.message}"


def _check_rank(check: Check) -> int:
    return rank(check.cause)


def side(check: Check) -> ExecPath | None:
    """The execution path a check stands against: its own, else its cause's."""
    return check.path or path_of(check.cause)


def _two_paths(failing: Sequence[Check]) -> str:
    """The first-ranked failure, and the first failure on the other path when it has one."""
    first = failing[0]
    one = side(first)
    if one is not None:
        other = next((c for c in failing[1:] if side(c) not in (None, one)), None)
        if other is not None:
            return f"{_reason(first)}; and for {side_title(other)}: {_reason(other)}"
    return _reason(first)


def side_title(check: Check) -> str:
    """``the native path`` / ``forced JIT`` for the check's side."""
    found = side(check)
    return "forced JIT" if found is ExecPath.JIT else "the native path"


def executed(executions: Sequence[Ran]) -> bool:
    """Both paths ran for every entry point that ran at all (and at least one did)."""
    paths: dict[str, set[ExecPath]] = {}
    for entry, path in executions:
        paths.setdefault(entry, set()).add(path)
    return bool(paths) and all(p == set(ExecPath) for p in paths.values())


# The in-toto test-result predicate (https://in-toto.io/attestation/test-result/v0.1):
# passedTests "passed with no errors or warnings", warnedTests "passed with warnings",
# failedTests "failed with errors". A check that did not run is not a pass: it is failed.
PASSED_TESTS, WARNED_TESTS, FAILED_TESTS = "passedTests", "warnedTests", "failedTests"
_LISTS = {
    CheckState.PASSED: PASSED_TESTS,
    CheckState.WARNED: WARNED_TESTS,
    CheckState.FAILED: FAILED_TESTS,
    CheckState.NOT_RUN: FAILED_TESTS,
}


def attestation_list(state: CheckState) -> str:
    """The one test-result list a check of ``state`` belongs in."""
    return _LISTS[state]


def attestation_result(verdict: Verdict, states: Sequence[CheckState]) -> str:
    """``PASSED``, ``WARNED`` (accepted with a warned check) or ``FAILED`` (not accepted)."""
    if not verdict.accepted:
        return "FAILED"
    return "WARNED" if CheckState.WARNED in states else "PASSED"
