"""One file read by the engine: through the inspection cache or not, names on threads.

:mod:`gate.reader.read` reads one file in the calling thread and keeps nothing; here the
same reads decode a large artifact's entries on a pool of threads
(:func:`gate.scan.threads.decoding_pool`), and :func:`read_found` takes a file a walk
found through the caches (:mod:`gate.scan.cache`, :mod:`gate.scan.wheelcache`) when
asked to. The caches are imported only when used: they bring hashlib (OpenSSL, 4 MB of
start-up) that a read without them never needs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from gate.errors import BadInputError
from gate.reader import artifacts, read
from gate.reader.artifacts import shown
from gate.reader.elffile import Buffer
from gate.reader.limits import Limits
from gate.reader.read import ArtifactReport, Progress
from gate.scan.threads import decoding_pool


def read_artifact(
    path: str | os.PathLike[str],
    *,
    names: bool = True,
    scan: bool = True,
    limits: Limits | None = None,
    digests: bool = True,
) -> ArtifactReport:
    """:func:`gate.reader.read.read_artifact`, a large artifact's names decoded on threads."""
    return read.read_artifact(
        path, names=names, scan=scan, limits=limits, digests=digests, threads=decoding_pool
    )


def read_buffer(
    buf: Buffer,
    base: int,
    size: int,
    display: str,
    *,
    names: bool = True,
    scan: bool = True,
    limits: Limits | None = None,
    digests: bool = True,
) -> ArtifactReport:
    """:func:`gate.reader.read.read_buffer`, a large artifact's names decoded on threads."""
    return read.read_buffer(
        buf, base, size, display, names=names, scan=scan, limits=limits, digests=digests,
        threads=decoding_pool,
    )  # fmt: skip


def read_found(
    found: artifacts.Found | artifacts.Unreadable,
    *,
    names: bool = True,
    scan: bool = True,
    limits: Limits | None = None,
    cache: bool = False,
    members: Progress | None = None,
    digests: bool = True,
) -> Iterator[ArtifactReport]:
    """Reports for one file :func:`gate.reader.artifacts.discover` found (several for a
    wheel or an archive); a failure becomes a report with ``error``. ``members`` hears of
    each member of a wheel as it is read."""
    limits = limits or Limits.from_env()
    if isinstance(found, artifacts.Unreadable):
        yield ArtifactReport(found.path, "unknown", error=found.message)
        return
    try:
        if found.kind == "zip" and cache:
            from gate.scan.wheelcache import inspect_wheel  # noqa: PLC0415  (the cache only)

            yield from inspect_wheel(
                found.path,
                lambda: read.read_wheel(
                    found.path, names=names, scan=scan, limits=limits, progress=members,
                    digests=digests, threads=decoding_pool,
                ),
                names=names,
                scan=scan,
                digests=digests,
            )  # fmt: skip
        elif found.kind == "zip":
            yield from read.read_wheel(
                found.path, names=names, scan=scan, limits=limits, progress=members,
                digests=digests, threads=decoding_pool,
            )  # fmt: skip
        elif found.kind == "archive":
            yield from read.read_archive(
                found.path, names=names, scan=scan, limits=limits, digests=digests,
                threads=decoding_pool,
            )  # fmt: skip
        elif found.kind == "duplicate":
            return
        elif cache:
            from gate.scan.cache import inspect_file  # noqa: PLC0415  (the cache only)

            yield inspect_file(
                found.path, names=names, scan=scan, limits=limits, by_identity=True,
                digests=digests, real=found.real,
            )[0]  # fmt: skip
        else:
            yield read_artifact(found.path, names=names, scan=scan, limits=limits, digests=digests)
    except BadInputError as e:
        yield ArtifactReport(shown(found.path), "unknown", error=e.message)
