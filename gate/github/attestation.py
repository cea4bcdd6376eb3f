"""What ``actions/attest`` needs to publish a run's statements as GitHub artifact attestations.

The release workflow turns each required runner class's signed evidence into GitHub
attestations (Sigstore-signed by the workflow's OIDC identity, listed by
``gh attestation verify``). This module checks the evidence first and then writes the
action's inputs:

1. both envelopes (``manifest.dsse.json``, ``test-result.dsse.json``) verify with the
   release's public key over DSSE's PAE, and hold in-toto Statements of the expected
   predicate types (the gate-run predicate also matches its schema);
2. the run gated the revision being released, and its verdict accepted it;
3. both Statements name the same subjects, and there is at least one;
4. with ``published`` (the ``SHA256SUMS`` of the files the release publishes, checked
   against their bytes): every published file is a subject, by name and SHA-256 (a
   release asset is named for the file, and ``gh attestation verify FILE`` finds the
   attestation by the file's digest), and only the published files are attested (the
   gate's own smoke program is a subject too, and is never published);

then ``subjects.sha256`` (``sha256sum`` format, the action's ``subject-checksums``),
``gate-run.predicate.json`` and ``test-result.predicate.json`` (``predicate-path``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.attest import testresult
from gate.attest.predicate import PREDICATE_TYPE
from gate.attest.predicate import read as read_predicate
from gate.attest.signing import PAYLOAD_TYPE, PublicKey, parse_envelope, verify_envelope
from gate.errors import BadInputError, GateError, SignatureError
from gate.evidence import ENVELOPE_FILE, TEST_RESULT_ENVELOPE
from gate.fsutil import write_atomic
from gate.scan.checksums import Checksums

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
SUBJECTS_FILE = "subjects.sha256"
GATE_PREDICATE_FILE = "gate-run.predicate.json"
TEST_RESULT_PREDICATE_FILE = "test-result.predicate.json"


@dataclass(frozen=True)
class AttestInputs:
    """The files written for ``actions/attest``, and the subjects they name."""

    subjects: Path
    gate_predicate: Path
    test_result_predicate: Path
    names: tuple[str, ...]


def write_attest_inputs(
    evidence: Path,
    key: PublicKey,
    out: Path,
    *,
    revision: str | None = None,
    published: Checksums | None = None,
) -> AttestInputs:
    """Check a run's signed statements (see the module docstring) and write the inputs."""
    # 1. Signatures and Statement types.
    manifest = _verified(evidence / ENVELOPE_FILE, key, PREDICATE_TYPE)
    predicate = manifest["predicate"]
    signed = read_predicate(predicate, str(evidence / ENVELOPE_FILE))
    test_result = _verified(evidence / TEST_RESULT_ENVELOPE, key, testresult.PREDICATE_TYPE)
    # 2. The released revision, accepted.
    if revision is not None and signed.revision != revision:
        raise BadInputError(
            f"{evidence / ENVELOPE_FILE}: the run gated revision {signed.revision}, not {revision}"
        )
    if not signed.verdict.accepted:
        raise GateError(
            f"{evidence / ENVELOPE_FILE}: the run was not accepted "
            f"({signed.verdict.statement}); nothing to attest"
        )
    # 3. The same subjects, at least one, each with its SHA-256.
    subjects = manifest["subject"]
    if not subjects:
        raise BadInputError(f"{evidence / ENVELOPE_FILE}: the run names no artifact to attest")
    if test_result["subject"] != subjects:
        raise BadInputError(f"{evidence}: the two statements name different subjects")
    pairs = [(str(s["digest"]["sha256"]), str(s["name"])) for s in subjects]
    # 4. The published files, and only they, each with the digest the run gated.
    if published is not None:
        pairs = _published(published, {n: d for d, n in pairs}, evidence)
    lines = [f"{digest}  {name}\n" for digest, name in pairs]
    out.mkdir(parents=True, exist_ok=True)
    return AttestInputs(
        subjects=write_atomic(out / SUBJECTS_FILE, "".join(lines).encode("utf-8")),
        gate_predicate=write_atomic(out / GATE_PREDICATE_FILE, _json(predicate)),
        test_result_predicate=write_atomic(
            out / TEST_RESULT_PREDICATE_FILE, _json(test_result["predicate"])
        ),
        names=tuple(name for _, name in pairs),
    )


def _published(
    published: Checksums, gated: dict[str, str], evidence: Path
) -> list[tuple[str, str]]:
    """(sha256, name) of each published file, each checked to be a gated subject."""
    published.verify()  # the bytes at hand are the listed ones
    found: list[tuple[str, str]] = []
    for file in published.files:
        name = file.basename
        if any(name == n for _, n in found):
            raise BadInputError(f"{published.source}: two published files are named {name}")
        if name not in gated:
            raise BadInputError(
                f"{published.source}: {file.name} is published, but the run in {evidence} "
                f"did not gate {name}"
            )
        if gated[name] != file.sha256:
            raise BadInputError(
                f"{published.source}: {file.name} is published with sha256 {file.sha256}, "
                f"the run in {evidence} gated {name} with {gated[name]}"
            )
        found.append((file.sha256, name))
    return found


def _verified(path: Path, key: PublicKey, predicate_type: str) -> dict[str, Any]:
    """The Statement in a DSSE envelope that ``key`` signed; SignatureError or BadInputError."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BadInputError(f"{path}: cannot read: {e.strerror or e}") from e
    envelope = parse_envelope(data, str(path))
    if envelope.payload_type != PAYLOAD_TYPE:
        raise SignatureError(f"{path}: payloadType is {envelope.payload_type!r}, not in-toto")
    try:
        verify_envelope(envelope, key)
    except SignatureError as e:
        raise SignatureError(f"{path}: {e.message}") from e
    try:
        statement = json.loads(envelope.payload)
    except ValueError as e:
        raise BadInputError(f"{path}: the signed payload is not JSON: {e}") from e
    if (
        not isinstance(statement, dict)
        or statement.get("_type") != STATEMENT_TYPE
        or statement.get("predicateType") != predicate_type
        or not isinstance(statement.get("subject"), list)
        or not isinstance(statement.get("predicate"), dict)
    ):
        raise BadInputError(f"{path}: not an in-toto Statement v1 of type {predicate_type}")
    return statement


def _json(data: Any) -> bytes:  # noqa: ANN401 - any JSON value
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")
