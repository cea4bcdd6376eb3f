"""The release manifest: an in-toto Statement v1 over the final artifacts, optionally signed.

Built from the evidence folder of one gate run (``result.json`` plus every file
beside it). The Statement (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md)
names each final artifact as a subject with its SHA-256, and the delivery image the
run was in, where its manifest digest is known, as one more (its repository and
digest); its predicate (type :data:`PREDICATE_TYPE`, schema
``gate/schemas/manifest-predicate.schema.json``)
holds the seed's four evidence sets, the verdict, and the digest of every
evidence file. ``manifest.json`` is the Statement; ``manifest.dsse.json`` is
the same bytes signed in a DSSE envelope when a key is configured.

Beside it, for tools that know only the standard predicates, the same run as an
in-toto test-result Statement (``test-result.json``, signed the same way as
``test-result.dsse.json``; see :mod:`gate.attest.testresult`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.attest.predicate import PREDICATE_TYPE, predicate_of
from gate.attest.predicate import validate as validate_predicate
from gate.attest.signing import Envelope, Signer, load_signer_from_env_or_file, sign_envelope
from gate.attest.testresult import build_test_result
from gate.errors import ArtifactChangedError, BadInputError, EvidenceError
from gate.evidence import (
    ENVELOPE_FILE,
    MANIFEST_FILE,
    TEST_RESULT_ENVELOPE,
    TEST_RESULT_FILE,
    evidence_files,
)
from gate.fsutil import FileDigest, sha256_file, write_atomic
from gate.guard.redact import Redactor
from gate.record import RESULT_FILE, RunRecord, load

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
NOT_SIGNED = "manifest not signed: no signing key configured"

__all__ = [
    "ENVELOPE_FILE",
    "MANIFEST_FILE",
    "NOT_SIGNED",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "ManifestResult",
    "build_statement",
    "evidence_digests",
    "load_signer_from_env_or_file",
    "validate_predicate",
    "write_manifest",
    "write_statement",
]


@dataclass(frozen=True)
class ManifestResult:
    """What :func:`write_manifest` wrote, and whether it signed."""

    statement_path: Path
    envelope_path: Path | None
    keyid: str | None
    subjects: tuple[str, ...]
    evidence_files: int
    test_result_path: Path | None = None
    test_result_envelope: Path | None = None

    @property
    def signed(self) -> bool:
        """Whether a signed envelope was written."""
        return self.envelope_path is not None

    @property
    def message(self) -> str:
        """One line for the console and the summary."""
        if self.envelope_path is None:
            return NOT_SIGNED
        return f"manifest signed with key {self.keyid}: {self.envelope_path}"


def evidence_digests(evidence_dir: Path) -> tuple[FileDigest, ...]:
    """Every evidence file (:func:`gate.evidence.evidence_files`: no hidden file, no
    statement), with its digest and size. A symbolic link or a special file is refused:
    evidence is plain files, and a link could point anywhere after signing."""
    try:
        names = evidence_files(evidence_dir)
    except BadInputError as e:
        raise EvidenceError(e.message) from e
    found: list[FileDigest] = []
    for name in names:
        path = evidence_dir / name
        try:
            found.append(FileDigest.of_file(name, path))
        except OSError as e:
            raise EvidenceError(f"{path}: cannot read evidence: {e.strerror or e}") from e
    return tuple(found)


def build_statement(
    evidence_dir: Path,
    digests: tuple[FileDigest, ...] | None = None,
    record: RunRecord | None = None,
) -> dict[str, Any]:
    """The in-toto Statement for the run recorded in ``evidence_dir``.

    ``record`` is its result.json, read by the caller (else read here); the predicate
    is its projection (:func:`gate.attest.predicate.predicate_of`). Each artifact still
    at its recorded path is hashed again: an artifact that changed after inspection is
    an ArtifactChangedError, never signed.
    """
    if record is None:
        record = _record(evidence_dir)
    source = evidence_dir / RESULT_FILE
    if digests is None:
        digests = evidence_digests(evidence_dir)
    names = [a.name for a in record.artifacts]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise EvidenceError(f"{source}: artifact names must be unique: {', '.join(duplicates)}")
    for artifact in record.artifacts:
        _check_unchanged(artifact.path, artifact.sha256, source)
    predicate = predicate_of(record, digests)
    problem = validate_predicate(predicate)
    if problem:
        raise EvidenceError(f"{source}: {problem}")
    subjects = [{"name": a.name, "digest": {"sha256": a.sha256}} for a in record.artifacts]
    container = record.environment.container
    image = container.subject() if container is not None else None
    if image is not None:
        # The delivery image, pinned by its manifest digest, beside the artifacts it ships.
        if image[0] in names:
            raise EvidenceError(f"{source}: an artifact is named like the image {image[0]}")
        subjects.append({"name": image[0], "digest": {"sha256": image[1]}})
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def write_manifest(
    evidence_dir: Path,
    signer: Signer | None,
    *,
    redactor: Redactor | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    record: RunRecord | None = None,
) -> ManifestResult:
    """Write the manifest and the test-result Statement, each signed when there is a signer.

    ``manifest.json`` and ``test-result.json`` always (the latter not for a run that
    named neither an artifact nor a revision: a Statement needs a subject);
    ``manifest.dsse.json`` and ``test-result.dsse.json`` with a signer, all atomically.
    ``config_file`` (the project configuration the run used) is named with its digest
    in the test-result Statement; ``environ`` gives the GitHub Actions run URL
    (default: this process's). ``record`` is the run record just written to
    result.json, when the caller has it (else it is read from there).
    Without a signer, envelopes left by an earlier run are removed, so no stale
    signature sits next to new evidence. Evidence holding a secret (a secret-looking
    environment variable's value, the signing key however it was given) is refused:
    EvidenceError naming the file and the secret's name, never its value.
    """
    if redactor is None:
        extra = signer.secrets() if signer is not None else ()
        redactor = Redactor.from_environment(extra=extra)
    digests = evidence_digests(evidence_dir)
    _refuse_leaks(evidence_dir, digests, redactor)
    if record is None:
        record = _record(evidence_dir)
    statement = redactor.json(build_statement(evidence_dir, digests, record))
    payload = _dumps(statement)
    statement_path = write_atomic(evidence_dir / MANIFEST_FILE, payload)
    test_result = build_test_result(
        record,
        statement["subject"],
        evidence_dir,
        manifest=statement_path,
        config_file=config_file,
        environ=environ,
    )
    envelope_path = evidence_dir / ENVELOPE_FILE
    test_envelope = evidence_dir / TEST_RESULT_ENVELOPE
    stale = [] if signer is not None else [envelope_path, test_envelope]
    test_payload = test_result_path = None
    if test_result is None:
        # No artifact and no revision: an in-toto Statement needs a subject.
        stale += [evidence_dir / TEST_RESULT_FILE, test_envelope]
    else:
        test_payload = _dumps(redactor.json(test_result))
        test_result_path = write_atomic(evidence_dir / TEST_RESULT_FILE, test_payload)
    for path in stale:
        try:
            path.unlink(missing_ok=True)
        except OSError as e:
            raise EvidenceError(f"{path}: cannot remove a stale statement: {e}") from e
    if signer is None:
        return ManifestResult(
            statement_path,
            None,
            None,
            _subject_names(statement),
            len(digests),
            test_result_path=test_result_path,
        )
    write_statement(envelope_path, sign_envelope(payload, signer))
    if test_payload is not None:
        write_statement(test_envelope, sign_envelope(test_payload, signer))
    return ManifestResult(
        statement_path,
        envelope_path,
        signer.keyid,
        _subject_names(statement),
        len(digests),
        test_result_path=test_result_path,
        test_result_envelope=test_envelope if test_payload is not None else None,
    )


def write_statement(path: Path, envelope: Envelope) -> Path:
    """Write a signed envelope as the run and ``cuda-gate sign`` both do (atomically)."""
    return write_atomic(path, envelope.dumps().encode("utf-8"))


def _refuse_leaks(evidence_dir: Path, digests: tuple[FileDigest, ...], redactor: Redactor) -> None:
    """EvidenceError naming the first evidence file that holds a secret (never its value)."""
    for digest in digests:
        leaked = redactor.leaked_names((evidence_dir / digest.name).read_bytes())
        if leaked:
            raise EvidenceError(
                f"{evidence_dir / digest.name}: holds the value of {_secret_label(leaked[0])}; "
                "refusing to write a manifest over leaked secrets"
            )


def _dumps(statement: dict[str, Any]) -> bytes:
    """A Statement as the bytes written and signed: indented JSON and a final newline."""
    return (json.dumps(statement, indent=2) + "\n").encode("utf-8")


def _record(evidence_dir: Path) -> RunRecord:
    """The run record of ``evidence_dir`` (read once per manifest: it can be megabytes)."""
    try:
        return load(evidence_dir)
    except BadInputError as e:
        raise EvidenceError(e.message) from e


def _check_unchanged(path: str, recorded: str, source: Path) -> None:
    """ArtifactChangedError when the artifact, still at ``path``, is not what was inspected."""
    if Path(path).is_file():
        actual = sha256_file(Path(path))
        if actual != recorded:
            raise ArtifactChangedError(
                f"{path}: changed since it was inspected (sha256 {actual[:16]}..., "
                f"{source} records {recorded[:16]}...)"
            )


def _subject_names(statement: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(s["name"]) for s in statement["subject"])


def _secret_label(name: str) -> str:
    """``$NAME`` for an environment variable, the name itself for other secrets."""
    return f"${name}" if name.replace("_", "").isalnum() and name.isupper() else name
