"""Evidence stores: a local folder by default, S3-compatible storage when configured.

The public API:

* ``publish(evidence_dir, meta, settings)``: spool, upload, verify, drop the spool;
* ``resume(settings)``: finish every upload left in the spool;
* ``open_store(settings)``, ``list_runs``, ``fetch_run``, ``latest_run``: read back;
* ``load_settings()``, ``run_meta_from_evidence()``: where, and what.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gate.errors import GateError
from gate.store.base import EvidenceStore, ObjectExistsError, ProgressCallback, ProgressEvent
from gate.store.local import LocalStore
from gate.store.meta import find_repository, run_meta_from_evidence
from gate.store.readback import fetch_run, latest_run, list_runs, read_index
from gate.store.records import PublishResult, RunIndex, RunMeta, RunSummary, Verdict
from gate.store.settings import StoreSettings, load_settings, local_settings
from gate.store.spool import pending, spool_run, upload_entry

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = [
    "EvidenceStore",
    "LocalStore",
    "ObjectExistsError",
    "ProgressCallback",
    "ProgressEvent",
    "PublishResult",
    "RunIndex",
    "RunMeta",
    "RunSummary",
    "StoreSettings",
    "Verdict",
    "fetch_run",
    "find_repository",
    "latest_run",
    "list_runs",
    "load_settings",
    "local_settings",
    "open_store",
    "pending",
    "publish",
    "read_index",
    "resume",
    "run_meta_from_evidence",
]


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
    is unreachable or refuses; a later ``resume`` finishes the job.
    """
    settings = load_settings() if settings is None else settings
    entry, _ = spool_run(evidence_dir, meta, settings.spool_dir)
    store = open_store(settings, progress=progress) if store is None else store
    return upload_entry(store, entry)


def resume(
    settings: StoreSettings | None = None,
    *,
    store: EvidenceStore | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[PublishResult, ...]:
    """Upload every run left in the spool; re-raise the first failure after trying them all."""
    settings = load_settings() if settings is None else settings
    entries = pending(settings.spool_dir)
    if not entries:
        return ()
    store = open_store(settings, progress=progress) if store is None else store
    done: list[PublishResult] = []
    failures: list[GateError] = []
    for entry in entries:
        try:
            done.append(upload_entry(store, entry))
        except GateError as e:
            failures.append(e)
    if failures:
        first = failures[0]
        raise type(first)(
            f"{len(failures)} of {len(entries)} spooled runs not uploaded; first: {first.message}",
            hint=first.hint,
        ) from first
    return tuple(done)
