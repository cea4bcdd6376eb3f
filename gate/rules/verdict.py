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
    error: int | None = None  # the CUDA error code its failure quotes (a run's, a load's)

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
class Clause:
    """One clause of the headline or of a diagnosis, and the record it comes from.

    ``source`` is a JSON pointer into result.json (``/checks/4``, ``/executions/1``,
    ``/artifacts/0/listing/entries/2``); ``path``, ``state``, ``error`` and ``kernel`` are
    what the clause says of that record: the execution path it names, the outcome, the
    CUDA error code it quotes and the kernel it names, each None where it says none.
    """

    text: str
    source: str
    path: ExecPath | None = None
    state: CheckState | None = None
    error: int | None = None
    kernel: str | None = None


@dataclass(frozen=True)
class Diagnosed:
    """One diagnosis as the run record keeps it: its words, and each clause's record."""

    text: str
    clauses: tuple[Clause, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """Accepted or not, the statement, the reasons ranked by cause; the statement's
    clauses, each naming the record it comes from (none for an accepted run)."""

    accepted: bool
    statement: str
    reasons: tuple[str, ...]
    cause: Cause | None = None
    exit_code: ExitCode = ExitCode.OK
    clauses: tuple[Clause, ...] = ()

    @property
    def headline(self) -> str:
        """The statement without its ``not accepted:`` prefix."""
        return self.statement.removeprefix("not accepted: ")


Ran = tuple[str, ExecPath]  # an entry point's name and the path it ran on


def decide(stages: Sequence[Stage], checks: Sequence[Check], executions: Sequence[Ran]) -> Verdict:
    """The verdict over the stages, the checks and the runs (see the module docstring).

    The exit status follows the headline: a failed stage's own status, 1 for a failed
    or unrun check, 4 when only the missing device kept an otherwise clean run from
    being accepted. ``stages``, ``checks`` and ``executions`` are the run record's, in its
    order: each clause of the statement points at the record it says (:class:`Clause`).
    """
    failing = sorted((i for i, c in enumerate(checks) if c.failed), key=lambda i: _rank(checks[i]))
    reasons = [_reason(checks[i]) for i in failing]
    execute = next((i for i, s in enumerate(stages) if s.name == "execute"), None)
    skipped = execute is not None and stages[execute].status is StageStatus.SKIPPED
    unverified = None
    if skipped or not executed(executions):
        why = stages[execute].detail if execute is not None and skipped else ""
        said = f"{NOT_EXECUTED} ({why})" if why else NOT_EXECUTED
        # It stands for every run and check left unrun: the execute stage, else the runs.
        where = pointer("stages", execute) if execute is not None and skipped else "/executions"
        unverified = Clause(said, where, state=CheckState.NOT_RUN)
        reasons.append(said)
    unrun = [i for i, c in enumerate(checks) if c.state is CheckState.NOT_RUN]
    if unverified is None:
        reasons += [f"{_reason(checks[i])} (did not run)" for i in unrun]
    failed = next((i for i, s in enumerate(stages) if s.status is StageStatus.FAILED), None)
    if failed is not None:
        stage = stages[failed]
        detail = stage.detail or f"the {stage.name} stage failed"
        own = [checks[i] for i in failing if checks[i].classname.startswith(f"gate.{stage.name}")]
        code = ExitCode(stage.exit_code or ExitCode.NOT_ACCEPTED)
        rest = tuple(r for r in reasons if not r.endswith(detail))
        cause = own[0].cause if own else None
        clause = Clause(detail, pointer("stages", failed), state=CheckState.FAILED)
        return Verdict(False, f"not accepted: {detail}", (detail, *rest), cause, code, (clause,))
    if failing:
        clauses = _two_paths(checks, failing)
        statement = "not accepted: " + "; ".join(c.text for c in clauses)
        cause = checks[failing[0]].cause
        return Verdict(False, statement, tuple(reasons), cause, ExitCode.NOT_ACCEPTED, clauses)
    if unverified is not None:
        no_device = (
            skipped and execute is not None and stages[execute].exit_code == ExitCode.NO_DEVICE
        )
        code = ExitCode.NO_DEVICE if no_device else ExitCode.NOT_ACCEPTED
        statement = f"not accepted: {unverified.text}"
        return Verdict(False, statement, tuple(reasons), None, code, (unverified,))
    if unrun:
        clause = _clause(checks, unrun[0], suffix=" (did not run)")
        statement = f"not accepted: {clause.text}"
        return Verdict(False, statement, tuple(reasons), None, ExitCode.NOT_ACCEPTED, (clause,))
    return Verdict(True, ACCEPTED_STATEMENT, ())


def pointer(*parts: str | int) -> str:
    """The JSON pointer (RFC 6901) to ``parts`` in result.json: ``pointer("checks", 3)`` is
    ``/checks/3``; ``~`` and ``/`` in a part are escaped."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _reason(check: Check) -> str:
    return f"{check.name}: {check.message}"


def _rank(check: Check) -> int:
    return rank(check.cause)


def _clause(checks: Sequence[Check], i: int, *, prefix: str = "", suffix: str = "") -> Clause:
    """Check ``i``'s clause: its reason, the path it stands against, its state and error."""
    check = checks[i]
    text = prefix + _reason(check) + suffix
    return Clause(text, pointer("checks", i), side(check), check.state, check.error)


def side(check: Check) -> ExecPath | None:
    """The execution path a check stands against: its own, else its cause's."""
    return check.path or path_of(check.cause)


def _two_paths(checks: Sequence[Check], failing: Sequence[int]) -> tuple[Clause, ...]:
    """The first-ranked failure, and the first failure on the other path when it has one."""
    first = checks[failing[0]]
    one = side(first)
    if one is not None:
        other = next((i for i in failing[1:] if side(checks[i]) not in (None, one)), None)
        if other is not None:
            title = side_title(checks[other])
            return (
                _clause(checks, failing[0]),
                _clause(checks, other, prefix=f"and for {title}: "),
            )
    return (_clause(checks, failing[0]),)


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
