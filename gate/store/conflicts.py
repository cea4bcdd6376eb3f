"""Runs refused for a conflict: set aside in the spool, kept, listed; never retried blindly.

A conflict is not an outage: the store already holds different content under the
run's id (another run reused the id, or someone changed the store). Retrying cannot
help, and a run left in the upload queue would fail every later ``upload --resume``.
So the run leaves the queue for ``<spool>/.conflicts/<runner>-<run-id>-<random>/``:

* ``evidence/``: the evidence as it was checked and spooled (marker, manifest, files);
* ``index.json``: the index it would have been stored with.

``cuda-gate upload <that folder>/evidence --run-id NEW`` stores it under another id;
cuda-gate deletes nothing there. The folder's name starts with a dot because a
GitHub owner name never does (:class:`gate.store.records.RunMeta` refuses one), so
it can never be mistaken for a queued run.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from gate.errors import BadInputError, EvidenceError, StorageConflictError
from gate.store.records import INDEX_NAME, RunIndex

CONFLICTS = ".conflicts"
EVIDENCE = "evidence"


def conflict_hint(kept: Path) -> str:
    """What a person can do about a run kept aside in ``kept``."""
    return (
        "nothing was overwritten; to store this run under another id: "
        f"cuda-gate upload {kept / EVIDENCE} --run-id NEW-ID"
    )


@dataclass(frozen=True)
class KeptRun:
    """A run in the conflicts area, with its index (None when it cannot be read)."""

    folder: Path
    index: RunIndex | None

    def describe(self) -> str:
        """One line: where it is and which run it was."""
        what = self.index.meta.run_key() if self.index else "index unreadable"
        return f"{self.folder} ({what})"


def conflicts_dir(spool_dir: Path) -> Path:
    """The conflicts area of a spool."""
    return spool_dir / CONFLICTS


def set_aside(entry: Path, spool_dir: Path, index: RunIndex, error: StorageConflictError) -> Path:
    """Move the spool entry into the conflicts area and return where it is kept.

    The same run refused again (an identical index kept earlier) is not kept twice.
    """
    for kept in kept_aside(spool_dir):
        if kept.index == index:
            shutil.rmtree(entry, ignore_errors=True)
            return kept.folder
    meta = index.meta
    dest = conflicts_dir(spool_dir) / f"{meta.runner}-{meta.run_id}-{uuid.uuid4().hex[:8]}"
    try:
        dest.mkdir(parents=True)
        # One rename takes the whole entry out of the queue; the index then moves up.
        entry.rename(dest / EVIDENCE)
        (dest / EVIDENCE / INDEX_NAME).replace(dest / INDEX_NAME)
    except OSError as e:
        raise EvidenceError(
            f"{error.message}; and the run could not be set aside in {dest}: {e}"
        ) from e
    return dest


def kept_aside(spool_dir: Path) -> tuple[KeptRun, ...]:
    """Every run in the conflicts area, by folder name."""
    area = conflicts_dir(spool_dir)
    if not area.is_dir():
        return ()
    return tuple(_kept(folder) for folder in sorted(area.iterdir()) if folder.is_dir())


def _kept(folder: Path) -> KeptRun:
    # An interruption between the two renames leaves the index inside evidence/.
    for path in (folder / INDEX_NAME, folder / EVIDENCE / INDEX_NAME):
        try:
            return KeptRun(folder, RunIndex.from_json(path.read_bytes(), str(path)))
        except (OSError, BadInputError):
            continue
    return KeptRun(folder, None)
