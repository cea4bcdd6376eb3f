"""The release matrix: every runner class's signed evidence for one revision, verified.

For each runner class (the required ones, and any other that left evidence):

1. find the newest complete run of the class stored under the revision; none
   there but some under another revision is *stale*, none at all is *missing*;
2. fetch it, every file checked against the run's index (a mismatch: *tampered*);
3. verify the signed manifest (``gate.verify``): the DSSE signature with the
   release key and the evidence digests it signs (a failure: *tampered*; no
   envelope at all: *unsigned*); the artifacts and the machine are not in
   front of us here, so those steps are left to ``cuda-gate verify`` on a runner;
4. the signed record must be of this revision, from a clean tree, and of the
   class the index names (another revision or a dirty tree: *stale*; another
   class: *tampered*);
5. the signed verdict: accepted is *passed*, otherwise *failed*.

The matrix passes only when every required class passed on this revision.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gate.attest.manifest import ENVELOPE_FILE
from gate.attest.predicate import GatePredicate
from gate.attest.signing import PublicKey, parse_envelope
from gate.attest.verify import Outcome, verify
from gate.errors import BadInputError, EvidenceChangedError, SignatureError
from gate.store import EvidenceStore, RunIndex, fetch_run, list_runs, read_index
from gate.store.records import INDEX_NAME

ACCEPTED_STATEMENT = (
    "Passed on every required runner class with the current driver, current artifacts, "
    "and tested entry points."
)


class Status(enum.Enum):
    """What one runner class's evidence for the revision amounts to."""

    PASSED = "passed"
    FAILED = "failed"
    MISSING = "missing"
    STALE = "stale"
    TAMPERED = "tampered"
    UNSIGNED = "unsigned"


@dataclass(frozen=True)
class ExecutionRow:
    """One entry point on one path, as the signed manifest records it."""

    entry_point: str
    path: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class ClassResult:
    """The verdict on one runner class for the revision, and the evidence behind it."""

    runner_class: str
    required: bool
    status: Status
    detail: str
    runner: str | None = None
    run_id: str | None = None
    location: str | None = None
    envelope_sha256: str | None = None
    statement_sha256: str | None = None
    keyid: str | None = None
    executions: tuple[ExecutionRow, ...] = ()


@dataclass(frozen=True)
class MatrixReport:
    """Every class's result for one revision; ``passed`` when every required class passed."""

    repository: str
    revision: str
    results: tuple[ClassResult, ...]

    @property
    def passed(self) -> bool:
        """Every required class passed (and at least one class is required)."""
        required = [r for r in self.results if r.required]
        return bool(required) and all(r.status is Status.PASSED for r in required)

    @property
    def statement(self) -> str:
        """The verdict statement, or why there is none."""
        if self.passed:
            return ACCEPTED_STATEMENT
        bad = [f"{r.runner_class} {r.status.value}" for r in self.results if r.required]
        bad = [b for b in bad if not b.endswith(" passed")] or ["no required runner class"]
        return f"Not accepted for release: {', '.join(bad)}."


def evaluate(
    store: EvidenceStore,
    repository: str,
    revision: str,
    required: Iterable[str],
    *,
    key: PublicKey,
    workdir: Path,
) -> MatrixReport:
    """Read, fetch and verify every class's newest evidence for ``revision``."""
    required = tuple(dict.fromkeys(required))
    newest: dict[str, RunIndex] = {}
    incomplete: dict[str, int] = {}
    for run in list_runs(store, repository, revision):
        if run.index is None:
            incomplete[run.runner] = incomplete.get(run.runner, 0) + 1
            continue
        name = run.index.meta.runner_class or run.index.meta.runner
        if name not in newest or run.index.order() > newest[name].order():
            newest[name] = run.index
    classes = list(required) + sorted(set(newest) - set(required))
    results: list[ClassResult] = []
    for name in classes:
        index = newest.get(name)
        if index is None:
            results.append(_absent(store, repository, revision, name, name in required))
            continue
        results.append(
            _check(store, index, key, workdir / f"{len(results):03d}-{name}", name in required)
        )
    if incomplete:
        runners = ", ".join(f"{r} ({n})" for r, n in sorted(incomplete.items()))
        for i, r in enumerate(results):
            if r.status is Status.MISSING:
                detail = f"{r.detail}; incomplete uploads from runner {runners}"
                results[i] = ClassResult(r.runner_class, r.required, r.status, detail)
    return MatrixReport(repository, revision, tuple(results))


def _absent(
    store: EvidenceStore, repository: str, revision: str, name: str, required: bool
) -> ClassResult:
    """Step 1: missing, or stale when the class left evidence for other revisions only."""
    others: list[RunIndex] = []
    for key in store.list_keys(repository):
        # Relative to the repository: an owner of nested groups has more than one segment.
        parts = key.removeprefix(f"{repository}/").split("/")
        if len(parts) == 4 and parts[3] == INDEX_NAME and parts[0] != revision:
            index = read_index(store, "/".join((repository, *parts[:3])))
            if index is not None and (index.meta.runner_class or index.meta.runner) == name:
                others.append(index)
    if not others:
        return ClassResult(name, required, Status.MISSING, "no evidence stored for this revision")
    latest = max(others, key=RunIndex.order)
    return ClassResult(
        name,
        required,
        Status.STALE,
        f"no evidence for this revision; the newest is for revision {latest.meta.revision[:12]} "
        f"(run {latest.meta.run_id})",
        runner=latest.meta.runner,
        run_id=latest.meta.run_id,
    )


class _Finding(Exception):  # noqa: N818 - a control-flow signal, not an error
    """A step decided the class's status; raised to end the procedure early."""

    def __init__(self, status: Status, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class _Signed:
    """What steps 2 and 3 established: the verified Statement and its digests."""

    predicate: GatePredicate
    keyid: str
    envelope_sha256: str
    statement_sha256: str


def _check(
    store: EvidenceStore, index: RunIndex, key: PublicKey, dest: Path, required: bool
) -> ClassResult:
    """Steps 2 to 5 on one class's newest run."""
    meta = index.meta
    name = meta.runner_class or meta.runner
    where = store.location(meta.run_key())
    envelope_sha256: str | None = None
    signed: _Signed | None = None
    try:
        envelope_sha256 = _fetch(store, index, dest)
        signed = _verified(dest / ENVELOPE_FILE, key, envelope_sha256)
        status, detail = _judge(signed.predicate, name, meta.revision)
    except _Finding as finding:
        status, detail = finding.status, finding.detail
    return ClassResult(
        runner_class=name,
        required=required,
        status=status,
        detail=detail,
        runner=meta.runner,
        run_id=meta.run_id,
        location=where,
        envelope_sha256=envelope_sha256,
        statement_sha256=signed.statement_sha256 if signed else None,
        keyid=signed.keyid if signed else None,
        executions=_executions(signed.predicate) if signed else (),
    )


def _fetch(store: EvidenceStore, index: RunIndex, dest: Path) -> str:
    """Step 2: every file as the run's index records it; the envelope's sha256."""
    meta = index.meta
    try:
        fetch_run(
            store, meta.repository, meta.revision, runner=meta.runner, run_id=meta.run_id, dest=dest
        )
    except (EvidenceChangedError, BadInputError) as e:
        raise _Finding(Status.TAMPERED, e.message) from e
    envelope = dest / ENVELOPE_FILE
    if not envelope.is_file():
        raise _Finding(Status.UNSIGNED, f"no {ENVELOPE_FILE}: the run was not signed")
    return hashlib.sha256(envelope.read_bytes()).hexdigest()


def _verified(envelope: Path, key: PublicKey, envelope_sha256: str) -> _Signed:
    """Step 3: the signature, then the evidence digests it covers (gate.verify steps 1, 3)."""
    try:
        verification = verify(envelope, key, check_environment=False)
    except SignatureError as e:
        raise _Finding(Status.TAMPERED, e.message) from e
    except BadInputError as e:
        raise _Finding(Status.TAMPERED, f"signed manifest unusable: {e.message}") from e
    evidence = next(s for s in verification.steps if s.title == "evidence")
    if evidence.outcome is not Outcome.PASSED:
        raise _Finding(Status.TAMPERED, f"evidence: {evidence.detail}")
    payload = parse_envelope(envelope.read_bytes(), str(envelope)).payload
    return _Signed(
        predicate=verification.predicate,
        keyid=verification.keyid,
        envelope_sha256=envelope_sha256,
        statement_sha256=hashlib.sha256(payload).hexdigest(),
    )


def _judge(predicate: GatePredicate, name: str, revision: str) -> tuple[Status, str]:
    """Steps 4 and 5: this revision's record, from a clean tree, of this class; its verdict."""
    signed_class = predicate.signed_class
    if signed_class != name:
        return Status.TAMPERED, f"the index says class {name}, the signed run {signed_class}"
    if predicate.revision != revision:
        recorded = str(predicate.revision)[:12]
        return Status.STALE, f"stored under this revision but recorded for {recorded}"
    if predicate.dirty:
        return Status.STALE, "built from a work tree with uncommitted changes"
    verdict = predicate.verdict
    return Status.PASSED if verdict.accepted else Status.FAILED, verdict.statement


def _executions(predicate: GatePredicate) -> tuple[ExecutionRow, ...]:
    """The signed runs, each passed or not, and why, by the gate's own rule (gate.rules.causes)."""
    return tuple(
        ExecutionRow(e.entry_point, e.path.value, e.passed, "ok" if e.passed else e.reason())
        for e in predicate.executions
    )
