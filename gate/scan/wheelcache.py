"""Wheels remembered by their identity: a wheel read before and unchanged since is not opened.

A wheel's members are read from the zip (inflated) before they can be hashed, so the
content-addressed cache of :mod:`gate.scan.cache` would save only the decoding; the
wheel's identity (real path, device, inode, size, modification and change times) names
its member reports instead, in the same cache folder, per reader version and mode.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from gate.errors import ConfigError
from gate.reader import artifacts
from gate.reader.read import ArtifactReport
from gate.scan import cache


def inspect_wheel(
    path: str | os.PathLike[str],
    read: Callable[[], tuple[ArtifactReport, ...]],
    *,
    names: bool,
    scan: bool,
    folder: Path | None = None,
    digests: bool = True,
) -> tuple[ArtifactReport, ...]:
    """The reports of a wheel's members, remembered by the wheel's identity: an unchanged
    wheel is not opened again. ``read`` reads it on a miss (with entry digests as
    ``digests`` says); a wheel with a member that could not be read is not remembered."""
    known = cached_wheel(path, names=names, scan=scan, folder=folder, digests=digests)
    if known is not None:
        return known
    # Before reading: a wheel changed meanwhile, or just before, is not kept.
    identity = cache.identity(path, only_settled=True)
    reports = read()
    prefix = f"{artifacts.shown(path)}!"
    if identity is None or any(r.error or not r.path.startswith(prefix) for r in reports):
        return reports
    doc = {
        "format": cache.FORMAT,
        "reader": cache.reader_version(),
        "identity": identity,
        "names": names,
        "scan": scan,
        "digests": digests or not names,
        "members": [[r.path[len(prefix) :], cache.report_json(r)] for r in reports],
    }
    mode = cache.mode_name(names, scan, digests)
    cache.store(_wheel_path(folder or cache.cache_dir(), identity, mode), doc)
    return reports


def cached_wheel(
    path: str | os.PathLike[str],
    *,
    names: bool,
    scan: bool,
    folder: Path | None = None,
    digests: bool = True,
) -> tuple[ArtifactReport, ...] | None:
    """The member reports of a wheel read before and unchanged since; None when not known.
    A reader that needs no entry digests takes reports kept with them too."""
    identity = cache.identity(path)
    if identity is None:
        return None
    root = folder or cache.cache_dir()
    found = _cached(path, identity, root, names=names, scan=scan, digests=digests or not names)
    if found is None and names and not digests:
        found = _cached(path, identity, root, names=names, scan=scan, digests=True)
    return found


def _cached(
    path: str | os.PathLike[str],
    identity: str,
    root: Path,
    *,
    names: bool,
    scan: bool,
    digests: bool,
) -> tuple[ArtifactReport, ...] | None:
    entry = _wheel_path(root, identity, cache.mode_name(names, scan, digests))
    prefix = f"{artifacts.shown(path)}!"
    try:
        doc = json.loads(entry.read_bytes())
        if (
            doc["format"] != cache.FORMAT
            or doc["reader"] != cache.reader_version()
            or doc["identity"] != identity
            or doc["names"] is not names
            or doc["scan"] is not scan
            or doc.get("digests", True) is not digests
        ):
            return None
        members = doc["members"]
        return tuple(cache.renamed(cache.report_from_json(r), prefix + str(m)) for m, r in members)
    except (OSError, ValueError, LookupError, TypeError, AttributeError, ConfigError):
        return None


def _wheel_path(folder: Path, identity: str, mode: str) -> Path:
    key = hashlib.sha256(
        f"{cache.reader_version()}\0{identity}".encode(errors="surrogateescape")
    ).hexdigest()
    return folder / "wheels" / key[:2] / f"{key}.{mode}.json"
