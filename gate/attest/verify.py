"""Verify a signed manifest against the artifacts, the evidence, and this machine.

Reads like the procedure (after sigstore-python's ``verify/verifier.py``):

1. signature: the DSSE envelope's signature over PAE(payloadType, payload)
   verifies with the given Ed25519 key, and the payload is a cuda-gate in-toto
   Statement v1 whose predicate matches the schema;
2. artifacts: every subject's SHA-256 equals the file in front of us (a relinked
   artifact is a different artifact: the seed's "any subsequent relinking
   requires a new acceptance test"); the delivery image's subject equals what the
   container runtime here holds under its reference, and the artifacts recorded in
   it are hashed from its layers (:mod:`gate.attest.image_step`);
3. evidence: every evidence file the predicate records is next to the envelope
   with the recorded SHA-256: a missing file fails like a changed one. Only an
   envelope checked on its own, asked for explicitly (``envelope_only``), skips it;
4. environment: on a GPU machine, host arch, driver, toolkit and compute
   capability equal the recorded ones (evidence from another driver is stale);
5. verdict: the recorded verdict accepted the run;
6. freshness: the recorded source revision and finish time, stated always and
   checked when asked (:mod:`gate.attest.freshness`): a signature does not prove
   that the run is recent, and a replayed older envelope verifies otherwise.

A failed signature stops at once (nothing in the payload can be trusted); the
other steps all run and are all reported, then the first failure decides the
exit status. Steps that could not run say so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gate import jsonutil, proc
from gate.attest import freshness as fresh
from gate.attest import image_step
from gate.attest.evidence_step import step_evidence
from gate.attest.freshness import Freshness
from gate.attest.manifest import (
    ENVELOPE_FILE,
    MANIFEST_FILE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
)
from gate.attest.predicate import GatePredicate
from gate.attest.predicate import read as read_predicate
from gate.attest.signing import PAYLOAD_TYPE, PublicKey, parse_envelope, verify_envelope
from gate.attest.steps import Outcome, StepResult, failed
from gate.errors import (
    ArtifactChangedError,
    BadInputError,
    EvidenceChangedError,
    GateError,
    NoDeviceError,
    SignatureError,
    StaleEnvironmentError,
    StaleEvidenceError,
    ToolError,
)
from gate.fsutil import sha256_file
from gate.rules.targets import Capability
from gate.system import machine as environment

__all__ = [
    "Freshness",
    "MachineFacts",
    "Outcome",
    "StepResult",
    "Verification",
    "compare_environment",
    "gather_machine_facts",
    "verify",
]

_SMI_TIMEOUT = 60.0
# The most of an envelope verify reads: ours hold a manifest listing file digests, a few
# hundred kB at most; an envelope of any size would be read, parsed and decoded whole.
MAX_ENVELOPE_BYTES = 64 * jsonutil.MIB


@dataclass(frozen=True)
class MachineFacts:
    """What verify compares with the manifest: the machine in front of us."""

    host_arch: str
    driver_version: str | None
    driver_cuda_version: str | None
    toolkit_version: str | None
    capability: str | None
    toolkit_release: str | None = None


@dataclass(frozen=True)
class Verification:
    """Every step's result and the verified Statement; ``ok`` when nothing failed."""

    steps: tuple[StepResult, ...]
    statement: dict[str, Any]
    keyid: str
    predicate: GatePredicate

    @property
    def ok(self) -> bool:
        """Whether no step failed (steps not checked do not fail)."""
        return all(s.outcome is not Outcome.FAILED for s in self.steps)

    @property
    def not_checked(self) -> tuple[str, ...]:
        """Titles of the steps that could not be performed."""
        return tuple(s.title for s in self.steps if s.outcome is Outcome.NOT_CHECKED)

    def first_error(self) -> GateError | None:
        """The error of the first failed step, which decides the exit status."""
        return next((s.error for s in self.steps if s.error is not None), None)


def verify(
    envelope_path: Path,
    key: PublicKey,
    *,
    artifacts_dir: Path | None = None,
    check_environment: bool = True,
    envelope_only: bool = False,
    freshness: Freshness | None = None,
    now: datetime | None = None,
    machine: MachineFacts | Callable[[], MachineFacts] | None = None,
    emit: Callable[[StepResult], None] | None = None,
) -> Verification:
    """Run the steps on ``envelope_path``; raise SignatureError if step 1 fails.

    ``machine`` is the current machine's facts, or a function gathering them
    (default :func:`gather_machine_facts`); a NoDeviceError from it means step 4
    is "not checked". ``envelope_only`` skips step 3 (the envelope checked on its
    own, away from its evidence); ``freshness`` is what step 6 requires, judged at
    ``now`` (default: the current time). ``emit`` sees each step as soon as it is
    decided.
    """
    report = emit or (lambda _step: None)
    try:
        data = jsonutil.read_bounded(envelope_path, MAX_ENVELOPE_BYTES)
    except FileNotFoundError as e:
        unsigned = envelope_path.parent / MANIFEST_FILE
        if envelope_path.name == ENVELOPE_FILE and unsigned.is_file():
            raise _unsigned(
                f"{envelope_path}: not found; the run wrote an unsigned {MANIFEST_FILE} only",
                envelope_path.parent,
            ) from e
        raise BadInputError(f"{envelope_path}: cannot read: {e.strerror or e}") from e
    except OSError as e:
        raise BadInputError(f"{envelope_path}: cannot read: {e.strerror or e}") from e
    _refuse_unsigned_manifest(data, envelope_path)
    try:
        payload, keyid, step1 = _step_signature(data, str(envelope_path), key)
    except SignatureError as e:
        # Printed like every other step, then fatal: nothing in the payload can be trusted.
        detail = e.message.removeprefix("1. signature: ")
        report(StepResult(1, "signature", Outcome.FAILED, detail, e))
        raise
    report(step1)
    statement, predicate = _parse_statement(payload, str(envelope_path))
    steps = [step1]

    def record(step: StepResult) -> None:
        report(step)
        steps.append(step)

    record(_step_artifacts(statement, predicate, artifacts_dir))
    record(
        step_evidence(
            envelope_path.parent, predicate.evidence, payload, envelope_only=envelope_only
        )
    )
    record(_step_environment(predicate, check_environment, machine))
    record(_step_verdict(predicate))
    record(_step_freshness(predicate, freshness or Freshness(), now or datetime.now(UTC)))
    return Verification(tuple(steps), statement, keyid, predicate)


def _unsigned(message: str, evidence_dir: Path) -> EvidenceChangedError:
    """An unsigned run: its signed manifest is missing evidence (13), not a bad signature."""
    return EvidenceChangedError(
        message,
        hint=f"sign it with `cuda-gate sign {evidence_dir}`, then verify {ENVELOPE_FILE}",
    )


def _refuse_unsigned_manifest(data: bytes, path: Path) -> None:
    """A manifest.json given where its envelope belongs: say so before step 1."""
    try:
        doc = jsonutil.loads(data, str(path))
    except BadInputError:
        return  # step 1 reports what the file is not
    if isinstance(doc, dict) and doc.get("_type") == STATEMENT_TYPE and "payload" not in doc:
        raise _unsigned(
            f"{path}: an unsigned manifest (an in-toto Statement), not its signed envelope",
            path.parent,
        )


def _step_signature(data: bytes, source: str, key: PublicKey) -> tuple[bytes, str, StepResult]:
    """Step 1 (DSSE protocol): the signature over PAE(payloadType, payload) verifies."""
    try:
        # Bounded first: parse_envelope's plain json.loads would recurse on hostile nesting.
        jsonutil.loads(data, source)
        envelope = parse_envelope(data, source)
    except BadInputError as e:
        raise SignatureError(f"1. signature: {e.message}") from e
    # The payload type is covered by the signature (PAE), but only in-toto is accepted.
    if envelope.payload_type != PAYLOAD_TYPE:
        raise SignatureError(
            f"1. signature: {source}: payloadType is {envelope.payload_type!r}, not {PAYLOAD_TYPE}"
        )
    try:
        verify_envelope(envelope, key)
    except SignatureError as e:
        raise SignatureError(f"1. signature: {source}: {e.message}") from e
    # Name the key that verified: the envelope's key id is only a hint (DSSE).
    detail = f"signed by key {key.keyid} ({PAYLOAD_TYPE})"
    return envelope.payload, key.keyid, StepResult(1, "signature", Outcome.PASSED, detail)


def _parse_statement(payload: bytes, source: str) -> tuple[dict[str, Any], GatePredicate]:
    """The signed payload as a cuda-gate Statement v1; BadInputError when it is not one.

    Signed but malformed is bad input, not a bad signature: the key holder wrote it.
    """
    statement = jsonutil.loads(payload, f"{source}: the signed payload")
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise BadInputError(f"{source}: the signed payload is not an in-toto Statement v1")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise BadInputError(
            f"{source}: predicateType {statement.get('predicateType')!r} is not {PREDICATE_TYPE}"
        )
    predicate = read_predicate(statement.get("predicate"), source)
    subjects = statement.get("subject")
    recorded = {a.name: a.sha256 for a in predicate.artifacts}
    image = predicate.image
    if image is not None and image.subject is not None and image.digest is not None:
        recorded[image.subject] = image.digest.removeprefix("sha256:")
    if (
        not isinstance(subjects, list)
        or not all(
            isinstance(s, dict)
            and isinstance(s.get("digest"), dict)
            and s.get("name") in recorded
            and s["digest"].get("sha256") == recorded[s["name"]]
            for s in subjects
        )
        or len(subjects) != len(recorded)
    ):
        raise BadInputError(f"{source}: the subjects do not match the predicate's artifacts")
    return statement, predicate


def _step_artifacts(
    statement: dict[str, Any], predicate: GatePredicate, artifacts_dir: Path | None
) -> StepResult:
    """Step 2 (in-toto ResourceDescriptor: the digest is over the artifact's bytes)."""
    paths = {a.name: a.path for a in predicate.artifacts}
    # The image's subject, and the artifacts read from it, by the runtime here.
    looked = image_step.look(predicate.image, paths, artifacts_dir)
    changed = list(looked.problems)
    for subject in statement["subject"]:
        name, expected = subject["name"], subject["digest"]["sha256"]
        if name in looked.covered:
            problem = looked.compare(name, expected)
            if problem:
                changed.append(problem)
            continue
        path = _artifact_path(name, paths.get(name), artifacts_dir)
        if path is None:
            changed.append(f"{name}: not found{f' in {artifacts_dir}' if artifacts_dir else ''}")
            continue
        try:
            actual = sha256_file(path)
        except OSError as e:
            changed.append(f"{path}: cannot read: {e.strerror or e}")
            continue
        if actual != expected:
            changed.append(f"{path}: sha256 {actual[:16]}..., manifest records {expected[:16]}...")
    count = len(statement["subject"])
    if changed:
        return failed(2, "artifacts", changed, ArtifactChangedError)
    if count == 0:
        return StepResult(2, "artifacts", Outcome.NOT_CHECKED, "the manifest names no artifacts")
    checked = count - (len(looked.covered) if looked.unchecked else 0)
    if checked == 0:
        return StepResult(2, "artifacts", Outcome.NOT_CHECKED, "; ".join(looked.unchecked))
    names = ", ".join(s["name"] for s in statement["subject"])
    detail = f"{checked} of {count} match ({names})"
    if looked.unchecked:
        detail += f"; {'; '.join(looked.unchecked)}"
    return StepResult(2, "artifacts", Outcome.PASSED, detail)


def _artifact_path(name: str, recorded: str | None, artifacts_dir: Path | None) -> Path | None:
    """Where the artifact is now: DIR/name or DIR/<recorded file name>, else the recorded path."""
    if artifacts_dir is not None:
        candidates = [artifacts_dir / name]
        if recorded:
            candidates.append(artifacts_dir / Path(recorded).name)
    else:
        candidates = [Path(recorded)] if recorded else []
    return next((p for p in candidates if p.is_file()), None)


def _step_environment(
    predicate: GatePredicate,
    check_environment: bool,
    machine: MachineFacts | Callable[[], MachineFacts] | None,
) -> StepResult:
    """Step 4: the recorded machine against this one (the seed: evidence goes stale)."""
    if not check_environment:
        return StepResult(4, "environment", Outcome.NOT_CHECKED, "skipped (--offline)")
    try:
        facts = (
            machine if isinstance(machine, MachineFacts) else (machine or gather_machine_facts)()
        )
    except NoDeviceError as e:
        return StepResult(4, "environment", Outcome.NOT_CHECKED, f"no CUDA device: {e.message}")
    mismatches, unchecked = compare_environment(predicate, facts)
    if mismatches:
        return failed(4, "environment", mismatches, StaleEnvironmentError)
    detail = "host arch, driver, toolkit and capability match"
    if unchecked:
        detail = f"match; not checked: {', '.join(unchecked)}"
    return StepResult(4, "environment", Outcome.PASSED, detail)


def compare_environment(
    predicate: GatePredicate, facts: MachineFacts
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(mismatches, items not checked) between the recorded environment and ``facts``."""
    signed = predicate.machine
    pairs = [
        ("host arch", signed.host_arch, facts.host_arch),
        ("driver", signed.driver_version, facts.driver_version),
        ("driver CUDA version", signed.driver_cuda_version, facts.driver_cuda_version),
        ("toolkit", signed.toolkit_version, facts.toolkit_version),
        ("toolkit release", signed.toolkit_release, facts.toolkit_release),
        ("compute capability", _capability(signed.capability), _capability(facts.capability)),
    ]
    mismatches: list[str] = []
    unchecked: list[str] = []
    for label, recorded, current in pairs:
        if current is None:
            unchecked.append(f"{label} (unknown here)")
        elif recorded is None and label == "toolkit release":
            unchecked.append(f"{label} (not recorded)")
        elif recorded != current:
            mismatches.append(f"{label} is {current} here, the manifest records {recorded}")
    return tuple(mismatches), tuple(unchecked)


def _capability(text: str | None) -> str | None:
    """Capabilities compare as values: "9.0" and "90" are the same device."""
    return None if text is None else str(Capability.parse(text))


def _step_verdict(predicate: GatePredicate) -> StepResult:
    """Step 5: the run was accepted (a verified record of a rejected run is still a rejection)."""
    verdict = predicate.verdict
    detail = f"recorded verdict: {verdict.statement}"
    if verdict.accepted:
        return StepResult(5, "verdict", Outcome.PASSED, detail)
    error = GateError(f"5. verdict: the run was not accepted ({detail})")
    return StepResult(5, "verdict", Outcome.FAILED, detail, error)


def _step_freshness(predicate: GatePredicate, wanted: Freshness, now: datetime) -> StepResult:
    """Step 6: state the recorded revision and finish time; check them when asked."""
    statement = fresh.recorded(predicate)
    if not wanted.requested:
        return StepResult(
            6,
            "freshness",
            Outcome.NOT_CHECKED,
            f"{statement}; the signature does not prove the run is recent or of the revision "
            "you expect (pass --revision, --max-age or --not-before)",
        )
    problems = fresh.problems(predicate, wanted, now)
    if problems:
        return failed(6, "freshness", problems, StaleEvidenceError)
    return StepResult(6, "freshness", Outcome.PASSED, statement)


def gather_machine_facts() -> MachineFacts:
    """This machine's facts; NoDeviceError when nvidia-smi is absent or sees no GPU.

    Driver and toolkit come from gate.environment's parsers (the same the gate
    records with); the capability from nvidia-smi's ``compute_cap`` for device 0,
    the device the probe reads. A missing nvcc leaves the toolkit unknown.
    """
    try:
        full, query = environment.nvidia_smi()
        driver = environment.driver_from(full, query)
        capability = environment.smi_capability()
    except ToolError as e:
        raise NoDeviceError(e.message) from e
    toolkit_version = toolkit_release = None
    try:
        nvcc = environment.nvcc_path()
        toolkit = environment.parse_nvcc_version(
            proc.run_checked([nvcc, "--version"], timeout=_SMI_TIMEOUT).stdout, nvcc
        )
        toolkit_version, toolkit_release = str(toolkit.version), toolkit.release
    except ToolError:
        pass
    return MachineFacts(
        host_arch=environment.host_arch(),
        driver_version=driver.driver_version,
        driver_cuda_version=str(driver.cuda_version),
        toolkit_version=toolkit_version,
        capability=capability,
        toolkit_release=toolkit_release,
    )
