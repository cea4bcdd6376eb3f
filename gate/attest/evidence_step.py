"""Step 3 of ``verify``: the evidence files beside the envelope, as the signed predicate lists.

Every recorded file must be there with its recorded SHA-256: a deleted file fails
like a changed one, so removing ``result.json`` can never turn the step into a
skip. Only an envelope checked on its own, asked for explicitly (``--envelope-only``),
skips the step, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gate.attest.steps import Outcome, StepResult, failed
from gate.errors import BadInputError, EvidenceChangedError
from gate.evidence import MANIFEST_FILE, MARKER, evidence_files, is_marked
from gate.fsutil import FileDigest, sha256_file


def step_evidence(
    folder: Path, evidence: Sequence[FileDigest], payload: bytes, *, envelope_only: bool
) -> StepResult:
    """Step 3: every recorded evidence file is in ``folder`` with its recorded digest.

    A missing file fails like a changed one (deleting result.json must not turn the
    step into a skip). The unsigned ``manifest.json`` beside it, when there, must
    be the signed payload byte for byte.
    """
    if envelope_only:
        return StepResult(
            3,
            "evidence",
            Outcome.NOT_CHECKED,
            "skipped (--envelope-only): the evidence files were not compared",
        )
    recorded = {e.name: e.sha256 for e in evidence}
    problems = [
        p for name, digest in recorded.items() if (p := _evidence_problem(folder, name, digest))
    ]
    unsigned = folder / MANIFEST_FILE
    if unsigned.is_file() and (problem := _unsigned_problem(unsigned, payload)):
        problems.append(problem)
    in_evidence = _marked(folder) or unsigned.is_file()
    if problems and not in_evidence and all(p.endswith(": missing") for p in problems):
        # Nothing of the run here: say how to check an envelope on its own, on purpose.
        alone = (
            f"no evidence next to the envelope in {folder} ({len(recorded)} recorded files "
            "missing; to check the envelope alone, pass --envelope-only)"
        )
        problems = [alone]
    if problems:
        return failed(3, "evidence", problems, EvidenceChangedError)
    detail = f"{len(recorded)} files match"
    extra = _uncovered(folder, recorded) if in_evidence else ()
    if extra:
        detail += f"; not covered by the manifest: {', '.join(extra)}"
    return StepResult(3, "evidence", Outcome.PASSED, detail)


def _unsigned_problem(path: Path, payload: bytes) -> str | None:
    """Why the unsigned manifest is not the signed payload, reading at most one byte past it."""
    try:
        with path.open("rb") as stream:
            same = stream.read(len(payload) + 1) == payload
    except OSError as e:
        return f"{path}: cannot read: {e.strerror or e}"
    return None if same else f"{path}: differs from the signed payload"


def _marked(folder: Path) -> bool:
    """The gate's marker, read only when it is a plain file (a FIFO there would block)."""
    marker = folder / MARKER
    return not marker.is_symlink() and marker.is_file() and is_marked(folder)


def _evidence_problem(folder: Path, name: str, digest: str) -> str | None:
    """Why one recorded evidence file does not match, or None when it does."""
    parts = name.split("/")
    if name.startswith("/") or any(p in {"", ".", ".."} for p in parts):
        return f"{name}: not a file name inside the evidence folder"
    path = folder.joinpath(*parts)
    if path.is_symlink():
        return f"{path}: a symbolic link, not the evidence file"
    if not path.exists():
        return f"{path}: missing"
    if not path.is_file():
        return f"{path}: not a regular file"
    try:
        actual = sha256_file(path)
    except OSError as e:
        return f"{path}: cannot read: {e.strerror or e}"
    return None if actual == digest else f"{path}: changed"


def _uncovered(folder: Path, recorded: dict[str, str]) -> tuple[str, ...]:
    """Evidence files in the folder the manifest does not cover (informational), by the
    rule that decides what evidence is (gate.evidence.evidence_files)."""
    try:
        names = evidence_files(folder)
    except BadInputError as e:
        return (e.message,)
    return tuple(name for name in names if name not in recorded)
