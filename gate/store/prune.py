"""``cuda-gate evidence prune``: keep a local store from filling with every trial run.

Per runner of one repository (every revision), the newest ``keep`` runs stay; older ones
go, except accepted runs, which stay unless ``accepted`` is asked for: an accepted run is
the evidence a release may need. Runs whose index cannot be read are never removed (the
listing names them). Only a local store: an S3 store is write-once by design (its
credentials cannot delete; expire old runs with a lifecycle rule).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from gate.errors import BadInputError, ConfigError, EvidenceChangedError, EvidenceError
from gate.store.base import EvidenceStore
from gate.store.local import LocalStore
from gate.store.readback import read_index
from gate.store.records import natural_key, split_repository

_HEX_REVISION = 40


@dataclass(frozen=True)
class StoredRun:
    """One run found in the store, and whether pruning removes it."""

    revision: str
    runner: str
    run_id: str
    state: str  # "accepted", "not accepted", "incomplete", "unreadable"
    order: tuple[str, tuple[tuple[int, str], ...]]  # oldest first
    path: Path


def prune(
    store: EvidenceStore, repository: str, keep: int, *, accepted: bool = False, apply: bool = True
) -> tuple[tuple[StoredRun, ...], tuple[StoredRun, ...]]:
    """(kept, removed) runs of ``repository``; removed only when ``apply``."""
    if not isinstance(store, LocalStore):
        raise ConfigError(
            f"{store.describe()}: prune works on a local store; an S3 store is write-once "
            "(expire old runs with a lifecycle rule)"
        )
    if keep < 0:
        raise ConfigError(f"--keep {keep}: must be 0 or more")
    owner, repo = split_repository(repository)
    runs = _runs(store, f"{owner}/{repo}")
    kept: list[StoredRun] = []
    removed: list[StoredRun] = []
    for runner in sorted({r.runner for r in runs}):
        newest_first = sorted(
            (r for r in runs if r.runner == runner), key=lambda r: r.order, reverse=True
        )
        for position, run in enumerate(newest_first):
            protected = run.state == "unreadable" or (run.state == "accepted" and not accepted)
            (kept if position < keep or protected else removed).append(run)
    if apply:
        for run in removed:
            try:
                shutil.rmtree(run.path)
            except OSError as e:
                raise EvidenceError(f"{run.path}: cannot remove: {e.strerror or e}") from e
            _prune_empty(run.path.parent, store.root)
    return tuple(kept), tuple(removed)


def _runs(store: LocalStore, base: str) -> list[StoredRun]:
    found = []
    root = store.root / base
    for run_dir in sorted(root.glob("*/*/*")) if root.is_dir() else []:
        if not run_dir.is_dir() or run_dir.is_symlink():
            continue
        revision, runner, run_id = run_dir.relative_to(root).parts
        if len(revision) != _HEX_REVISION or not all(c in "0123456789abcdef" for c in revision):
            continue  # a nested repository's folder, not a revision of this one
        key = f"{base}/{revision}/{runner}/{run_id}"
        try:
            index = read_index(store, key)
        except (BadInputError, EvidenceChangedError):
            found.append(StoredRun(revision, runner, run_id, "unreadable", ("", ()), run_dir))
            continue
        if index is None:
            state, order = "incomplete", ("", natural_key(run_id))
        else:
            state = "accepted" if index.verdict and index.verdict.accepted else "not accepted"
            order = index.order()
        found.append(StoredRun(revision, runner, run_id, state, order, run_dir))
    return found


def _prune_empty(folder: Path, stop: Path) -> None:
    """Remove ``folder`` and its parents up to ``stop`` while they are empty."""
    while folder != stop and folder.is_relative_to(stop):
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
