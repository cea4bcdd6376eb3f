"""Reading evidence back: the runs of one revision, and one run's files, verified.

These are the functions `cuda-gate evidence` and `cuda-gate matrix` build on.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

from gate.errors import BadInputError, ConfigError, EvidenceChangedError, EvidenceError
from gate.store.base import EvidenceStore
from gate.store.records import (
    INDEX_NAME,
    RunIndex,
    RunSummary,
    check_segment,
    natural_key,
    revision_key,
    short_run_id,
    split_repository,
)

# A revision folder: a full commit id, SHA-1 or SHA-256 (gate.system.git.check_revision).
_REVISION = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def list_runs(
    store: EvidenceStore, repository: str, revision: str, *, keep_unreadable: bool = False
) -> tuple[RunSummary, ...]:
    """Every run stored for ``revision``, complete or not, sorted by run id then runner.

    An index that cannot be used (malformed, hostile, describing another run) raises,
    unless ``keep_unreadable``: then that run is listed with its ``problem`` and the
    others are still read. Decisions (the release matrix) keep the default: a run
    that cannot be read must not quietly count as merely incomplete.
    """
    base = revision_key(repository, revision)
    found = _found_runs(store, base, base.rsplit("/", 1)[1])
    return _summaries(store, base.rsplit("/", 1)[0], found, keep_unreadable=keep_unreadable)


def list_repository_runs(
    store: EvidenceStore, repository: str, *, keep_unreadable: bool = False
) -> tuple[RunSummary, ...]:
    """Every run stored for any revision of ``repository`` (see :func:`list_runs`)."""
    owner, repo = split_repository(repository)
    base = f"{owner}/{repo}"
    found = _found_runs(store, base, None)
    return _summaries(store, base, found, keep_unreadable=keep_unreadable)


def _found_runs(
    store: EvidenceStore, base: str, revision: str | None
) -> dict[tuple[str, str, str], bool]:
    """``(revision, runner, run id)`` of every run below ``base``, and whether it has its
    index; ``revision`` None: ``base`` is the repository's folder, holding revisions."""
    runs: dict[tuple[str, str, str], bool] = {}
    for key in store.list_keys(base):
        parts = key[len(base) + 1 :].split("/")
        if revision is None:
            if not _REVISION.fullmatch(parts[0]):
                continue  # a nested repository's folder (group/sub/repo), not a revision
            found, parts = parts[0], parts[1:]
        else:
            found = revision
        if len(parts) < 3:
            continue
        runner, run_id = parts[0], parts[1]
        has_index = len(parts) == 3 and parts[2] == INDEX_NAME
        run = (found, runner, run_id)
        runs[run] = runs.get(run, False) or has_index
    return runs


def _summaries(
    store: EvidenceStore,
    base: str,
    runs: dict[tuple[str, str, str], bool],
    *,
    keep_unreadable: bool,
) -> tuple[RunSummary, ...]:
    summaries = []
    for (revision, runner, run_id), has_index in runs.items():
        key = f"{base}/{revision}/{runner}/{run_id}"
        try:
            index = read_index(store, key) if has_index else None
        except (BadInputError, EvidenceChangedError) as e:
            if not keep_unreadable:
                raise
            summaries.append(
                RunSummary(runner, run_id, None, problem=e.one_line(), revision=revision)
            )
            continue
        summaries.append(RunSummary(runner, run_id, index, revision=revision))
    return tuple(sorted(summaries, key=lambda s: (s.revision, natural_key(s.run_id), s.runner)))


def read_index(store: EvidenceStore, run_key: str) -> RunIndex | None:
    """The index of the run at ``run_key``, or None while the run is incomplete."""
    data = store.get_bytes(f"{run_key}/{INDEX_NAME}")
    if data is None:
        return None
    index = RunIndex.from_json(data, store.location(f"{run_key}/{INDEX_NAME}"))
    if index.meta.run_key() != run_key:
        raise EvidenceChangedError(
            f"{store.location(run_key)}: the index describes another run ({index.meta.run_key()})"
        )
    return index


def latest_run(runs: tuple[RunSummary, ...], runner: str) -> RunSummary:
    """The newest complete run of ``runner``, by its recorded finish time (never by id text)."""
    complete = [r for r in runs if r.runner == runner and r.index is not None]
    if not complete:
        # The store answered: the evidence asked for is missing (13), not an outage (20).
        raise EvidenceChangedError(
            f"no complete run of runner {runner!r} is stored for this revision",
            hint="`cuda-gate evidence list` shows the stored runs",
        )
    return max(complete, key=lambda r: r.index.order() if r.index else ("", ()))


def resolve_run_id(runs: tuple[RunSummary, ...], runner: str, given: str) -> str:
    """The full id of ``runner``'s run that ``given`` names: the full id, or the short id
    `evidence list` shows (gate.store.records.short_run_id) when one run has it.

    An id no run has is returned as given: fetching it says the run is absent.
    """
    mine = [r for r in runs if r.runner == runner]
    if any(r.run_id == given for r in mine):
        return given
    matches = sorted(r.run_id for r in mine if short_run_id(r.run_id) == given)
    if len(matches) > 1:
        raise ConfigError(
            f"--run {given}: the short id of {len(matches)} runs of {runner} "
            f"({', '.join(matches)}); give the full id"
        )
    return matches[0] if matches else given


def fetch_run(
    store: EvidenceStore, repository: str, revision: str, *, runner: str, run_id: str, dest: Path
) -> RunIndex:
    """Download one run into ``dest`` (absent or empty) and check every file against its index.

    Files are written to a temporary sibling folder first; ``dest`` appears only when
    every file matched, so a failed fetch never leaves a folder that looks complete.
    """
    run_key = "/".join(
        (
            revision_key(repository, revision),
            check_segment(runner, "runner"),
            check_segment(run_id, "run id"),
        )
    )
    index = read_index(store, run_key)
    if index is None:
        raise EvidenceChangedError(
            f"{store.location(run_key)}: no index, the run is incomplete or absent",
            hint="`cuda-gate evidence list` shows the stored runs",
        )
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise EvidenceError(f"{dest}: destination exists and is not an empty folder")
    work = dest.with_name(f".{dest.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        work.mkdir(parents=True)
        for item in index.files:
            target = work.joinpath(*item.name.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            # Each file must match the digest and size the index recorded for it.
            got = store.get_file(f"{run_key}/{item.name}", target)
            if got != (item.sha256, item.size):
                raise EvidenceChangedError(
                    f"{store.location(f'{run_key}/{item.name}')}: sha256 {got[0]} ({got[1]} bytes) "
                    f"does not match the index ({item.sha256}, {item.size} bytes)"
                )
        (work / INDEX_NAME).write_bytes(index.to_json())
        work.replace(dest)
    except OSError as e:
        # The stores raise StorageError for their own faults; an OSError here is the
        # local side (a full disk, a read-only folder): exit 5, not "store unreachable".
        raise EvidenceError(f"cannot write the evidence into {dest}: {e.strerror or e}") from e
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return index
