"""Nothing lost: evidence is copied to a local spool first, uploaded from there, then dropped.

A spool entry is ``<spool>/<owner>/<repo>/<revision>/<runner>/<run-id>/`` holding
the copied files and the run's ``index.json``. It appears by one rename once the
copy is complete, and it is deleted only after the store has confirmed every
file and the index. If the store is unreachable or the upload breaks part-way,
the entry stays and ``cuda-gate upload --resume`` finishes the job: files already
stored identically are skipped, so nothing is duplicated or overwritten. A run
refused for a conflict is set aside instead (:mod:`gate.store.conflicts`).

The copy is made in ``<runner>/.partial-<pid>-<run-id>-<random>/``, a folder its
process holds an exclusive ``flock`` on until the rename. A process killed during
the copy (SIGTERM, SIGKILL, a crash) leaves the folder behind, and the kernel drops
its lock; the next ``upload`` or ``upload --resume`` removes every partial folder
that is unlocked and whose process is gone (:func:`remove_stale_partials`), never
the one another upload is filling right now.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from gate import __version__
from gate.errors import (
    EvidenceChangedError,
    EvidenceError,
    StorageConflictError,
    StorageError,
)
from gate.fsutil import FileDigest, write_atomic
from gate.store.base import EvidenceStore, PutOutcome
from gate.store.conflicts import CONFLICTS, conflict_hint, set_aside
from gate.store.intake import Intake, open_evidence
from gate.store.records import (
    INDEX_NAME,
    PublishResult,
    RunIndex,
    RunMeta,
    Verdict,
    copy_with_digest,
)

_PARTIAL = ".partial-"
RESUME_HINT = "run `cuda-gate upload --resume` when the store is reachable again"


def spool_run(evidence_dir: Path, meta: RunMeta, spool_dir: Path) -> tuple[Path, RunIndex]:
    """Check the folder is gate evidence, copy it into the spool, and write the run's index there.

    Only a gate evidence folder is taken (:func:`gate.store.intake.open_evidence`);
    each copy is hashed and must match what the manifest records, so the spool holds
    exactly the evidence that was checked.
    """
    intake = open_evidence(evidence_dir)
    remove_stale_partials(spool_dir)
    entry = spool_dir.joinpath(*meta.run_key().split("/"))
    partial = entry.with_name(f"{_PARTIAL}{os.getpid()}-{meta.run_id}-{uuid.uuid4().hex[:8]}")
    try:
        partial.mkdir(parents=True)
        with _held(partial):
            return _fill(intake, meta, entry, partial)
    except OSError as e:
        raise EvidenceError(f"cannot copy the evidence into the spool {entry}: {e}") from e
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        if not entry.exists():
            # A refused folder leaves nothing behind, not even empty key folders.
            _prune(entry.parent)


def _fill(intake: Intake, meta: RunMeta, entry: Path, partial: Path) -> tuple[Path, RunIndex]:
    """Copy the checked files and the index into ``partial``, then rename it to ``entry``."""
    entries = tuple(_copy(intake, name, partial) for name in intake.files)
    verdict = intake.record.verdict
    index = RunIndex(
        meta=meta,
        files=entries,
        verdict=Verdict(verdict.accepted, verdict.statement),
        tool_version=__version__,
        finished=intake.record.to_json()["finished"],
    )
    write_atomic(partial / INDEX_NAME, index.to_json())
    if entry.exists():
        return entry, _same_spooled(entry, index)
    partial.rename(entry)
    return entry, index


@contextlib.contextmanager
def _held(folder: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``folder`` while within: it is being filled, keep off.

    The kernel releases the lock when the process dies however it dies, so an
    unlocked partial folder is one nobody is writing any more.
    """
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def remove_stale_partials(spool_dir: Path) -> tuple[Path, ...]:
    """Remove the partial copies that interrupted uploads left in the spool; return them.

    A partial folder is removed only when no process holds its lock and the process
    named in it is gone: the one another upload is copying into right now stays.
    """
    if not spool_dir.is_dir():
        return ()
    removed = []
    for partial in sorted(spool_dir.glob(f"*/*/*/*/{_PARTIAL}*")):
        if partial.relative_to(spool_dir).parts[0] == CONFLICTS or not partial.is_dir():
            continue
        if _remove_if_stale(partial):
            removed.append(partial)
            _prune(partial.parent)
    return tuple(removed)


def _remove_if_stale(partial: Path) -> bool:
    try:
        fd = os.open(partial, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # locked: an upload is filling it now
        # Unlocked, but its process may not have taken the lock yet (just after mkdir).
        if _owner_alive(partial.name):
            return False
        shutil.rmtree(partial, ignore_errors=True)
        return not partial.exists()
    finally:
        os.close(fd)


def _owner_alive(name: str) -> bool:
    """Whether the process whose id the partial folder's name carries still runs."""
    field = name[len(_PARTIAL) :].split("-", 1)[0]
    pid = int(field) if field.isdecimal() else 0
    if pid <= 0 or pid == os.getpid():
        # Folders of older versions name no process. Our own id on a folder whose lock
        # was free is a dead process's id reused: our copies in progress are locked.
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:
        return True  # it exists, under another user
    return True


def _copy(intake: Intake, name: str, partial: Path) -> FileDigest:
    """Copy one file into the spool entry; it must be the file that was checked."""
    dest = partial.joinpath(*name.split("/"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    sha256, size = copy_with_digest(intake.root.joinpath(*name.split("/")), dest)
    intake.check_copy(name, sha256, size)
    return FileDigest(name, sha256, size)


def _same_spooled(entry: Path, index: RunIndex) -> RunIndex:
    """An earlier spool of the same run id is reused only when it holds the same evidence."""
    existing = read_spooled_index(entry)
    if existing != index:
        raise EvidenceError(
            f"the spool {entry} already holds different evidence for run {index.meta.run_id}",
            hint="upload it with `cuda-gate upload --resume`, or give this run a new run id",
        )
    return existing


def read_spooled_index(entry: Path) -> RunIndex:
    """The index of a spool entry."""
    path = entry / INDEX_NAME
    try:
        data = path.read_bytes()
    except OSError as e:
        raise EvidenceError(f"{path}: cannot read the spooled index: {e.strerror or e}") from e
    return RunIndex.from_json(data, str(path))


def pending(spool_dir: Path) -> tuple[Path, ...]:
    """Spool entries still waiting for upload, oldest run id first (runs set aside excluded)."""
    if not spool_dir.is_dir():
        return ()
    found = [
        index.parent
        for index in spool_dir.glob(f"*/*/*/*/*/{INDEX_NAME}")
        if not any(
            part.startswith(_PARTIAL) or part == CONFLICTS
            for part in index.relative_to(spool_dir).parts
        )
    ]
    return tuple(sorted(found, key=lambda p: (p.name, str(p))))


def upload_entry(store: EvidenceStore, entry: Path) -> PublishResult:
    """Upload one spool entry (files, then the index last), then drop it from the spool.

    An outage raises StorageError with the entry kept for ``upload --resume``. A
    conflict (different content already stored under the run's id) moves the entry
    to the spool's conflicts area (:mod:`gate.store.conflicts`) and raises
    StorageConflictError: retrying cannot help, and the run must not block the others.
    """
    index = read_spooled_index(entry)
    run_key = index.meta.run_key()
    uploaded: list[str] = []
    present: list[str] = []
    try:
        store.check()
        _check_index(store, run_key, index)
        for item in index.files:
            source = entry.joinpath(*item.name.split("/"))
            _check_size(source, item.size)
            outcome = store.put_file(f"{run_key}/{item.name}", source, item.sha256, item.size)
            (uploaded if outcome is PutOutcome.STORED else present).append(item.name)
        # Before the index: a stored run leaves no unfinished upload of its keys behind
        # (a failed abort of this attempt, or of an earlier one that was interrupted).
        names = [*(item.name for item in index.files), INDEX_NAME]
        store.abort_unfinished(run_key, frozenset(f"{run_key}/{name}" for name in names))
        # Last: the index makes the run complete.
        outcome = store.put_bytes(f"{run_key}/{INDEX_NAME}", index.to_json())
        (uploaded if outcome is PutOutcome.STORED else present).append(INDEX_NAME)
    except StorageConflictError as e:
        kept = set_aside(entry, entry.parents[4], index, e)
        raise type(e)(
            f"{e.message}; run {run_key} was not stored and is kept in {kept}",
            hint=conflict_hint(kept),
        ) from e
    except StorageError as e:
        raise type(e)(
            f"{e.message}; the evidence is kept in the spool {entry}", hint=e.hint or RESUME_HINT
        ) from e
    except OSError as e:
        raise EvidenceError(f"cannot read the spooled evidence in {entry}: {e}") from e
    _drop(entry)
    return PublishResult(
        location=store.location(run_key),
        index=index,
        uploaded=tuple(uploaded),
        already_present=tuple(present),
    )


def _check_index(store: EvidenceStore, run_key: str, index: RunIndex) -> None:
    """A run stored complete under this id with another index is a conflict before any put.

    Checked first so that no file of ours is added to another run's folder.
    """
    stored = store.get_bytes(f"{run_key}/{INDEX_NAME}")
    if stored is not None and stored != index.to_json():
        raise StorageConflictError(
            f"{store.location(run_key)}: another run with this id is already stored "
            "(its index differs)"
        )


def _check_size(source: Path, size: int) -> None:
    """A spooled file of the wrong size is damaged; the store checks the digest of the rest."""
    found = source.stat().st_size
    if found != size:
        raise EvidenceChangedError(
            f"{source}: the spooled file is {found} bytes, its index says {size}; "
            "the spool is damaged, upload the original evidence folder again"
        )


def _drop(entry: Path) -> None:
    """Remove an uploaded entry and the folders it leaves empty (up to the spool root)."""
    shutil.rmtree(entry, ignore_errors=True)
    _prune(entry.parent)


def _prune(folder: Path) -> None:
    """Remove ``folder`` and its parents while empty: the runner, revision, repo, owner levels."""
    for _ in range(4):
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
