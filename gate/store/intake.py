"""What may enter the store: a gate evidence folder, exactly as its manifest describes it.

A folder is taken only when

1. the gate marked it as its evidence folder (:func:`gate.evidence.is_marked`):
   a folder of wheels or a home directory is never "a run";
2. it holds folders and regular files only: a symbolic link anywhere inside (or a
   FIFO, socket or device) is refused with its name, never followed, so nothing
   outside the folder can be stored as its evidence;
3. its run record reads (:func:`gate.record.load`, the one reader of result.json);
4. its ``manifest.json`` is there, and the files are exactly those the manifest
   records: one recorded but missing, or present but not recorded (written after
   the manifest), is refused with its name; a signed envelope beside it carries
   ``manifest.json``'s bytes as its payload, and so does ``test-result.dsse.json``
   with ``test-result.json``'s.

Each file's digest is then checked as it is copied into the spool
(:meth:`Intake.check_copy`): what is stored is what was checked, and a file that
changed since the manifest was written is refused with its name.

Which files are evidence is :func:`gate.evidence.evidence_files`' rule, the one the
manifest digests by: hidden files other than the marker (temporary files of an atomic
write) and the statements are not; the marker, the statements and their envelopes are
stored beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate import jsonutil
from gate.attest.predicate import read as read_predicate
from gate.attest.signing import parse_envelope
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
from gate.record import RunRecord, load
from gate.store.records import INDEX_NAME, check_file_name

_LINK_HINT = "evidence is plain files; links are never followed"
_FRESH = "run the gate again to write fresh evidence"


@dataclass(frozen=True)
class Intake:
    """A checked evidence folder: the files to store and the digest each must have."""

    root: Path
    record: RunRecord
    expected: tuple[FileDigest, ...]  # every file to store, sorted by name
    recorded: frozenset[str]  # the names manifest.json records

    @property
    def files(self) -> tuple[str, ...]:
        """The relative names to store, sorted."""
        return tuple(entry.name for entry in self.expected)

    def check_copy(self, name: str, sha256: str, size: int) -> None:
        """EvidenceChangedError unless the copy of ``name`` has the digest that was checked."""
        want = next(entry for entry in self.expected if entry.name == name)
        if (want.sha256, want.size) == (sha256, size):
            return
        since = f"since {MANIFEST_FILE} was written" if name in self.recorded else "while copied"
        raise EvidenceChangedError(
            f"{self.root / name}: changed {since} (sha256 {sha256[:16]}..., {size} bytes; "
            f"expected {want.sha256[:16]}..., {want.size} bytes)",
            hint=_FRESH,
        )


def open_evidence(evidence_dir: Path) -> Intake:
    """Check that ``evidence_dir`` is gate evidence (steps 1-4 above); one line if not."""
    # 1. the gate's marker (a link in place of the folder is refused like any other link)
    marker = evidence_folder(evidence_dir)
    if not is_plain_or_missing(marker):
        # Checked before is_marked reads it: a link or FIFO there must not be followed.
        raise BadInputError(f"{marker}: the marker is not a regular file ({_LINK_HINT})")
    if not is_marked(evidence_dir):
        raise BadInputError(
            f"{evidence_dir}: not a cuda-gate evidence folder (no {MARKER} marker from the gate)",
            hint="upload the folder `cuda-gate run` wrote (--evidence, default gate-evidence)",
        )
    # 2. plain files and folders only
    found = walk(evidence_dir)
    if INDEX_NAME in found:
        raise BadInputError(f"{evidence_dir / INDEX_NAME}: this name is reserved for the run index")
    # 3. the run record
    record = load(evidence_dir)
    # 4. the manifest, and the files it records
    if MANIFEST_FILE not in found:
        raise BadInputError(
            f"{evidence_dir / MANIFEST_FILE}: no manifest; the gate writes it after the report "
            "(did the run finish?)"
        )
    manifest_bytes = _read(evidence_dir / MANIFEST_FILE)
    recorded = _recorded(manifest_bytes, evidence_dir / MANIFEST_FILE)
    evidence = {name for name in found if is_evidence(name)}
    _compare(evidence_dir, recorded, evidence)
    extra = [_entry(MANIFEST_FILE, manifest_bytes), _entry(MARKER, _read(evidence_dir / MARKER))]
    # Each statement and the envelope over it: every signed file is stored.
    extra += _signed(evidence_dir, found, MANIFEST_FILE, manifest_bytes, ENVELOPE_FILE)
    if TEST_RESULT_FILE in found:
        test_result = _read(evidence_dir / TEST_RESULT_FILE)
        extra.append(_entry(TEST_RESULT_FILE, test_result))
        extra += _signed(evidence_dir, found, TEST_RESULT_FILE, test_result, TEST_RESULT_ENVELOPE)
    elif TEST_RESULT_ENVELOPE in found:
        raise BadInputError(
            f"{evidence_dir / TEST_RESULT_ENVELOPE}: an envelope without {TEST_RESULT_FILE}"
        )
    entries = [recorded[name] for name in evidence] + extra
    for entry in entries:
        check_file_name(entry.name)
    return Intake(
        root=evidence_dir,
        record=record,
        expected=tuple(sorted(entries, key=lambda e: e.name)),
        recorded=frozenset(recorded),
    )


def _signed(
    root: Path, found: tuple[str, ...], statement: str, data: bytes, envelope: str
) -> list[FileDigest]:
    """The envelope over ``statement`` (bytes ``data``), when there is one, checked."""
    if envelope not in found:
        return []
    signed = _read(root / envelope)
    _check_envelope(root / envelope, signed, data, statement)
    return [_entry(envelope, signed)]


def _read(path: Path) -> bytes:
    """A small file's bytes, never through a link."""
    try:
        with open_regular(path) as handle:
            return handle.read()
    except OSError as e:
        raise BadInputError(f"{path}: cannot read: {e.strerror or e}") from e


def _entry(name: str, data: bytes) -> FileDigest:
    return FileDigest.of_bytes(name, data)


def _recorded(data: bytes, path: Path) -> dict[str, FileDigest]:
    """The evidence files manifest.json records, by name (gate.attest.predicate)."""
    statement = jsonutil.loads(data, str(path))
    predicate = statement.get("predicate") if isinstance(statement, dict) else None
    signed = read_predicate(predicate, f"{path}: not a cuda-gate manifest")
    return {e.name: e for e in signed.evidence}


def _compare(root: Path, recorded: dict[str, FileDigest], present: set[str]) -> None:
    """The files must be the ones the manifest records: none missing, none added."""
    problems = [
        f"{root / name}: recorded in {MANIFEST_FILE} but missing"
        for name in sorted(recorded)
        if name not in present
    ]
    problems += [
        f"{root / name}: not recorded in {MANIFEST_FILE} (written after it)"
        for name in sorted(present - set(recorded))
    ]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise EvidenceChangedError(problems[0] + more, hint=_FRESH)


def _check_envelope(path: Path, data: bytes, statement: bytes, name: str) -> None:
    """The signed envelope must sign its statement as it is (no key needed to see that)."""
    try:
        jsonutil.loads(data, str(path))
        payload = parse_envelope(data, str(path)).payload
    except GateError as e:
        raise BadInputError(e.message) from e
    if payload != statement:
        raise EvidenceChangedError(
            f"{path}: its signed payload is not {name} (one of them changed after signing)"
        )
