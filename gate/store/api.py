"""The evidence stores' operations: open the configured store, publish a run, resume the spool.

Imported through :mod:`gate.store` (its names load on first use).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gate.errors import GateError, StorageConflictError
from gate.store.base import EvidenceStore, ProgressCallback
from gate.store.conflicts import KeptRun, kept_aside
from gate.store.local import LocalStore
from gate.store.records import PublishResult, RunMeta
from gate.store.settings import StoreSettings, load_settings
from gate.store.spool import pending, remove_stale_partials, spool_run, upload_entry

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def open_store(
    settings: StoreSettings,
    *,
    client: S3Client | None = None,
    progress: ProgressCallback | None = None,
) -> EvidenceStore:
    """The store the settings name; boto3 is imported only for an S3 store."""
    if settings.kind == "local":
        assert settings.local_dir is not None  # noqa: S101 - guaranteed by the loader
        return LocalStore(settings.local_dir)
    from gate.store.s3 import S3Store  # noqa: PLC0415 - keep boto3 off the local path

    return S3Store(settings, client, progress=progress)


def publish(
    evidence_dir: Path,
    meta: RunMeta,
    settings: StoreSettings | None = None,
    *,
    store: EvidenceStore | None = None,
    progress: ProgressCallback | None = None,
) -> PublishResult:
    """Spool the evidence folder, upload it under ``meta``'s key, and drop the spool.

    Raises StorageError (the spool kept, its path in the message) when the store
    is unreachable or refuses; a later ``resume`` finishes the job. Raises
    StorageConflictError when the store holds different content under the run's
    id: the run is then kept in the spool's conflicts area, out of the queue.
    """
    settings = load_settings() if settings is None else settings
    entry, _ = spool_run(evidence_dir, meta, settings.spool_dir)
    store = open_store(settings, progress=progress) if store is None else store
    return upload_entry(store, entry)


@dataclass(frozen=True)
class ResumeReport:
    """What ``resume`` did: runs stored, runs set aside for a conflict, runs still queued."""

    stored: tuple[PublishResult, ...]
    conflicts: tuple[StorageConflictError, ...]
    failures: tuple[GateError, ...]
    kept_aside: tuple[KeptRun, ...]

    def error(self) -> GateError | None:
        """The error to exit with: an outage (20) first, then a conflict (22), else None.

        Runs kept aside by an earlier attempt are listed, never an error again.
        """
        attempted = len(self.stored) + len(self.conflicts) + len(self.failures)
        if self.failures:
            first = self.failures[0]
            also = f"; {len(self.conflicts)} set aside for a conflict" if self.conflicts else ""
            return type(first)(
                f"{len(self.failures)} of {attempted} spooled runs not uploaded{also}; "
                f"first: {first.message}",
                hint=first.hint,
            )
        if self.conflicts:
            first = self.conflicts[0]
            return StorageConflictError(
                f"{len(self.conflicts)} of {attempted} spooled runs conflict with evidence "
                f"already stored and were set aside; first: {first.message}",
                hint=first.hint,
            )
        return None


def resume(
    settings: StoreSettings | None = None,
    *,
    store: EvidenceStore | None = None,
    progress: ProgressCallback | None = None,
) -> ResumeReport:
    """Upload every run left in the spool; a failure or a conflict does not stop the others.

    Partial copies that an interrupted upload left behind are removed first.
    """
    settings = load_settings() if settings is None else settings
    remove_stale_partials(settings.spool_dir)
    entries = pending(settings.spool_dir)
    if not entries:
        return ResumeReport((), (), (), kept_aside(settings.spool_dir))
    store = open_store(settings, progress=progress) if store is None else store
    stored: list[PublishResult] = []
    conflicts: list[StorageConflictError] = []
    failures: list[GateError] = []
    for entry in entries:
        try:
            stored.append(upload_entry(store, entry))
        except StorageConflictError as e:
            conflicts.append(e)
        except GateError as e:
            failures.append(e)
    return ResumeReport(
        stored=tuple(stored),
        conflicts=tuple(conflicts),
        failures=tuple(failures),
        kept_aside=kept_aside(settings.spool_dir),
    )
