"""Evidence stores: a local folder by default, S3-compatible storage when configured.

The public API:

* ``publish(evidence_dir, meta, settings)``: spool, upload, verify, drop the spool;
* ``resume(settings)``: finish every upload left in the spool (runs refused for a
  conflict are set aside in the spool's conflicts area, not retried);
* ``open_store(settings)``, ``list_runs``, ``fetch_run``, ``latest_run``: read back;
* ``load_settings()``, ``run_meta_from_evidence()``: where, and what.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gate.lazy import exports

if TYPE_CHECKING:
    from gate.store.api import ResumeReport, open_store, publish, resume
    from gate.store.base import EvidenceStore, ObjectExistsError, ProgressCallback, ProgressEvent
    from gate.store.conflicts import KeptRun, kept_aside
    from gate.store.local import LocalStore
    from gate.store.meta import find_repository, run_meta_from_evidence
    from gate.store.readback import fetch_run, latest_run, list_runs, read_index
    from gate.store.records import PublishResult, RunIndex, RunMeta, RunSummary, Verdict
    from gate.store.settings import StoreSettings, load_settings, local_settings
    from gate.store.spool import pending

# Each public name and the module that holds it. A name is imported on first use (PEP 562):
# `cuda-gate run` reads its store settings at start, and only a run that stores needs the
# spool, the read-back and the record readers they bring (jsonschema among them).
_WHERE = {
    "EvidenceStore": "base",
    "ObjectExistsError": "base",
    "ProgressCallback": "base",
    "ProgressEvent": "base",
    "KeptRun": "conflicts",
    "kept_aside": "conflicts",
    "LocalStore": "local",
    "find_repository": "meta",
    "run_meta_from_evidence": "meta",
    "fetch_run": "readback",
    "latest_run": "readback",
    "list_runs": "readback",
    "read_index": "readback",
    "PublishResult": "records",
    "RunIndex": "records",
    "RunMeta": "records",
    "RunSummary": "records",
    "Verdict": "records",
    "StoreSettings": "settings",
    "load_settings": "settings",
    "local_settings": "settings",
    "pending": "spool",
    "ResumeReport": "api",
    "open_store": "api",
    "publish": "api",
    "resume": "api",
}

__all__ = [
    "EvidenceStore",
    "KeptRun",
    "LocalStore",
    "ObjectExistsError",
    "ProgressCallback",
    "ProgressEvent",
    "PublishResult",
    "ResumeReport",
    "RunIndex",
    "RunMeta",
    "RunSummary",
    "StoreSettings",
    "Verdict",
    "fetch_run",
    "find_repository",
    "kept_aside",
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


_exports = exports(__name__, _WHERE, globals())


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use."""
    return _exports(name)
