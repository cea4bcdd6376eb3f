"""Signing apart from the run: the folder must be exactly what the run left, or nothing is signed.

``cuda-gate sign`` signs statements a run wrote unsigned, on another machine, later. What
it signs must be what the run decided, so before the key is used the folder is checked
step by step (each failure is :class:`~gate.errors.EvidenceChangedError`, exit 13, with
the first file that differs; nothing is written):

1. every entry is a plain file or folder: a link or a FIFO is never followed;
2. the gate's marker is there, and ``manifest.json`` is a cuda-gate manifest;
3. the files are exactly the evidence the manifest records, the marker, the statements
   and their envelopes: a file added after the run (hidden or not) or one removed is
   a change;
4. each evidence file has the digest and size the manifest records;
5. the manifest, derived again from the run record (``result.json``, itself covered by
   step 4), equals ``manifest.json``: an edited verdict there is a change;
6. the test-result Statement, derived again from the run record and the manifest,
   equals ``test-result.json`` field by field, except what only the run's environment
   knew (the Actions run URL, the runner's kind, the project configuration's digest),
   which must agree with the run record's run id; a run that wrote one must still
   have it;
7. an envelope already in the folder is the one this key writes over these statements
   (signing twice is harmless); any other is a change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate import jsonutil
from gate.attest.manifest import ManifestResult, build_statement, evidence_digests, write_statement
from gate.attest.predicate import read as read_predicate
from gate.attest.signing import Signer, sign_envelope
from gate.attest.testresult import build_test_result
from gate.errors import BadInputError, EvidenceChangedError, GateError
from gate.evidence import (
    ENVELOPE_FILE,
    MANIFEST_FILE,
    MARKER,
    TEST_RESULT_ENVELOPE,
    TEST_RESULT_FILE,
    evidence_folder,
    is_evidence,
    is_marked,
    is_plain_or_missing,
    walk,
)
from gate.fsutil import FileDigest, open_regular
from gate.record import RESULT_FILE, RunRecord
from gate.record import load as load_record
from gate.system import ci

_FRESH = "run the gate again to write fresh evidence"
# The files a finished run leaves beside its evidence (the marker is hidden, so no
# evidence; every other hidden file is an atomic write's leftover or added later).
_STATEMENTS = (MANIFEST_FILE, TEST_RESULT_FILE, ENVELOPE_FILE, TEST_RESULT_ENVELOPE)
# What ci.run_url makes of GITHUB_SERVER_URL, GITHUB_REPOSITORY, GITHUB_RUN_ID and _ATTEMPT.
_RUN_URL = re.compile(
    r"https?://[^/\s]+/[^/\s]+/[^/\s]+/actions/runs/(?P<run>[0-9]+)(?:/attempts/(?P<try>[0-9]+))?"
)
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Unchanged:
    """A folder checked as the run left it: the exact bytes to sign, and what they describe."""

    manifest: bytes
    test_result: bytes | None  # None: the run wrote no test-result Statement (no subject)
    subjects: tuple[str, ...]
    evidence_files: int


def changed(message: str) -> EvidenceChangedError:
    """The one error every step raises: exit 13, the file that differs, nothing signed."""
    return EvidenceChangedError(f"{message}; refusing to sign", hint=_FRESH)


def check_folder_is_gate(folder: Path) -> None:
    """Before the lock: a folder, holding the gate's marker as a plain file.

    BadInputError (6) for a path that is no evidence folder at all (nothing the gate
    writes is there); a folder the gate wrote but whose marker was removed or replaced
    by a link is a change (13).
    """
    marker = evidence_folder(folder)
    if not is_plain_or_missing(marker):
        raise changed(f"{marker}: the marker is not a regular file")
    if not marker.exists():
        if any((folder / name).exists() for name in (RESULT_FILE, *_STATEMENTS)):
            raise changed(f"{marker}: the gate's marker is missing")
        raise BadInputError(
            f"{folder}: not a cuda-gate evidence folder (no {MARKER} marker from the gate)",
            hint="sign the folder `cuda-gate run` wrote",
        )


def check_unchanged(folder: Path, signer: Signer) -> Unchanged:
    """Steps 1-7 of the module docstring, on a folder the caller holds locked."""
    # 1. plain files and folders only
    try:
        present = set(walk(folder))
    except BadInputError as e:
        raise changed(e.message) from e
    # 2. the marker and the manifest
    if not is_marked(folder):
        raise changed(f"{folder / MARKER}: not the gate's marker")
    if MANIFEST_FILE not in present:
        raise changed(f"{folder / MANIFEST_FILE}: missing (removed, or the run did not finish)")
    manifest = _read(folder / MANIFEST_FILE)
    statement = _statement(manifest, folder / MANIFEST_FILE)
    try:
        signed = read_predicate(statement.get("predicate"), f"{folder / MANIFEST_FILE}")
    except BadInputError as e:
        raise changed(f"{e.message} (not the manifest the run wrote)") from e
    recorded = {f.name: f for f in signed.evidence}
    # 3. exactly the files the run left
    allowed = {*recorded, MARKER, *_STATEMENTS}
    for name in sorted(present - allowed):
        what = "a hidden file" if not is_evidence(name) and name not in _STATEMENTS else "a file"
        raise changed(f"{folder / name}: {what} the run did not write (added after it)")
    for name in sorted(set(recorded) - present):
        raise changed(f"{folder / name}: recorded in {MANIFEST_FILE} but missing")
    # 4. every evidence file as recorded
    for name in sorted(recorded):
        if _digest(folder, name) != recorded[name]:
            raise changed(f"{folder / name}: changed since {MANIFEST_FILE} was written")
    if RESULT_FILE not in recorded:
        raise changed(f"{folder / RESULT_FILE}: not recorded in {MANIFEST_FILE}")
    record = load_record(folder)
    # 5. the manifest is the run record's
    _check_manifest(folder, statement, record)
    # 6. the test result is the run record's
    test_result = _check_test_result(folder, present, statement, record)
    # 7. envelopes already there are this key's over these very statements
    _check_envelope(folder, present, ENVELOPE_FILE, manifest, signer)
    if test_result is not None:
        _check_envelope(folder, present, TEST_RESULT_ENVELOPE, test_result, signer)
    subjects = tuple(str(s.get("name")) for s in statement.get("subject") or ())
    return Unchanged(manifest, test_result, subjects, len(recorded))


def sign_unchanged(folder: Path, signer: Signer) -> ManifestResult:
    """Sign the statements of a folder :func:`check_unchanged` passes, exactly as they are."""
    checked = check_unchanged(folder, signer)
    envelope = write_statement(folder / ENVELOPE_FILE, sign_envelope(checked.manifest, signer))
    test_envelope = None
    if checked.test_result is not None:
        test_envelope = write_statement(
            folder / TEST_RESULT_ENVELOPE, sign_envelope(checked.test_result, signer)
        )
    return ManifestResult(
        folder / MANIFEST_FILE,
        envelope,
        signer.keyid,
        checked.subjects,
        checked.evidence_files,
        test_result_path=folder / TEST_RESULT_FILE if checked.test_result is not None else None,
        test_result_envelope=test_envelope,
    )


def _read(path: Path) -> bytes:
    """A statement's bytes, never through a link or from a FIFO."""
    try:
        with open_regular(path) as handle:
            return handle.read()
    except BadInputError as e:
        raise changed(e.message) from e
    except OSError as e:
        raise BadInputError(f"{path}: cannot read: {e.strerror or e}") from e


def _digest(folder: Path, name: str) -> FileDigest:
    """An evidence file's digest, never through a link or from a FIFO."""
    path = folder / name
    try:
        return FileDigest.of_file(name, path, plain=True)
    except BadInputError as e:
        raise changed(e.message) from e
    except OSError as e:
        raise BadInputError(f"{path}: cannot read evidence: {e.strerror or e}") from e


def _statement(data: bytes, path: Path) -> dict[str, Any]:
    try:
        statement = jsonutil.loads(data, str(path))
    except GateError as e:
        raise changed(f"{e.message} (not the statement the run wrote)") from e
    if not isinstance(statement, dict):
        raise changed(f"{path}: not an in-toto Statement")
    return dict(statement)


def _check_manifest(folder: Path, statement: Mapping[str, Any], record: RunRecord) -> None:
    """Step 5: ``manifest.json`` is what the run record gives (artifacts re-hashed where
    they still are: one changed since inspection is ArtifactChangedError, exit 11)."""
    expected = _plain(build_statement(folder, evidence_digests(folder), record))
    where = _first_difference(expected, statement)
    if where is not None:
        raise changed(
            f"{folder / MANIFEST_FILE}: {where} is not what {RESULT_FILE} records"
            + _version_note(record)
        )


def _check_test_result(
    folder: Path, present: set[str], manifest: Mapping[str, Any], record: RunRecord
) -> bytes | None:
    """Step 6: the test-result Statement's bytes, checked; None where the run wrote none."""
    path = folder / TEST_RESULT_FILE
    expected = build_test_result(
        record, manifest.get("subject") or (), folder, manifest=folder / MANIFEST_FILE, environ={}
    )
    if expected is None:
        for name in (TEST_RESULT_FILE, TEST_RESULT_ENVELOPE):
            if name in present:
                raise changed(f"{folder / name}: the run wrote none (its record names no subject)")
        return None
    if TEST_RESULT_FILE not in present:
        raise changed(f"{path}: missing (the run wrote it beside {MANIFEST_FILE})")
    data = _read(path)
    actual = _statement(data, path)
    where = _first_difference(_plain(expected), _from_environment(actual, record, path))
    if where is not None:
        raise changed(f"{path}: {where} is not what {RESULT_FILE} records" + _version_note(record))
    return data


def _from_environment(
    statement: Mapping[str, Any], record: RunRecord, path: Path
) -> dict[str, Any]:
    """``statement`` without what only the run's environment knew, once that is checked
    against the run record: the run URL (GitHub Actions' run of the record's run id), the
    runner's kind, and the project configuration's descriptor."""
    found: dict[str, Any] = json.loads(json.dumps(statement))
    predicate = found.get("predicate")
    if not isinstance(predicate, dict):
        return found
    in_actions = record.run.run_id.startswith("gh-")  # ci.ci_run_id's form under Actions
    url = predicate.pop("url", None)
    if url is not None and not _url_names_run(url, record.run.run_id):
        raise changed(f"{path}: predicate.url {str(url)[:80]!r} is not the run {record.run.run_id}")
    configuration = predicate.get("configuration")
    if isinstance(configuration, list) and configuration and isinstance(configuration[0], dict):
        annotations = configuration[0].get("annotations")
        if isinstance(annotations, dict) and "runnerEnvironment" in annotations:
            kind = annotations["runnerEnvironment"]
            kinds = {ci.GITHUB_HOSTED, ci.SELF_HOSTED, ci.UNKNOWN_RUNNER} if in_actions else set()
            if kind not in kinds | {ci.NOT_ACTIONS}:
                raise changed(f"{path}: runnerEnvironment {str(kind)[:40]!r} is not a runner's")
            annotations["runnerEnvironment"] = ci.NOT_ACTIONS
        if len(configuration) == 3 and _is_config_descriptor(configuration[2]):
            configuration.pop()
    return found


def _url_names_run(url: object, run_id: str) -> bool:
    """Whether ``url`` is the Actions run that ``run_id`` (``gh-<id>-<attempt>``) names."""
    match = _RUN_URL.fullmatch(url) if isinstance(url, str) else None
    if match is None:
        return False
    attempt = match["try"] or "1"
    return run_id == f"gh-{match['run']}-{attempt}"


def _is_config_descriptor(item: object) -> bool:
    """The project configuration's descriptor (ungated: the file stays with the project)."""
    if not isinstance(item, dict) or set(item) != {"name", "digest", "mediaType"}:
        return False
    name, digest, media = item["name"], item["digest"], item["mediaType"]
    toml = isinstance(name, str) and name.endswith(".toml")
    return (
        isinstance(name, str)
        and isinstance(digest, dict)
        and set(digest) == {"sha256"}
        and _SHA256.fullmatch(str(digest["sha256"])) is not None
        and media == ("application/toml" if toml else "text/plain")
    )


def _check_envelope(
    folder: Path, present: set[str], name: str, payload: bytes, signer: Signer
) -> None:
    if name not in present:
        return
    ours = sign_envelope(payload, signer).dumps().encode("utf-8")
    if _read(folder / name) != ours:
        raise changed(
            f"{folder / name}: an envelope this key did not write over the statement beside it "
            "(a run without a key writes none)"
        )


def _plain(data: Mapping[str, Any]) -> Any:  # noqa: ANN401 - JSON values
    """``data`` as JSON reads it back (tuples as lists, ...), for comparing with a file."""
    return json.loads(json.dumps(data))


def _first_difference(expected: object, actual: object, where: str = "") -> str | None:
    """The first JSON path at which ``actual`` differs from ``expected``, or None."""
    pairs: list[tuple[str, object, object]]
    if isinstance(expected, dict) and isinstance(actual, dict) and set(expected) == set(actual):
        pairs = [(f"{where}.{k}", expected[k], actual[k]) for k in sorted(expected, key=str)]
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        pairs = [
            (f"{where}[{i}]", e, a) for i, (e, a) in enumerate(zip(expected, actual, strict=True))
        ]
    else:
        same = type(expected) is type(actual) and expected == actual
        return None if same else _shown_path(where, expected, actual)
    return next(
        (found for w, e, a in pairs if (found := _first_difference(e, a, w)) is not None), None
    )


def _shown_path(where: str, expected: object, actual: object) -> str:
    """``predicate.verdict.accepted``; for objects, the first key only one of them has."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        key = min(set(expected) ^ set(actual), key=str)
        where = f"{where}.{key}"
    return where.lstrip(".") or "the statement"


def _version_note(record: RunRecord) -> str:
    from gate import __version__  # noqa: PLC0415

    if record.tool_version == __version__:
        return ""
    return f" (written by cuda-gate {record.tool_version}; this is {__version__})"
