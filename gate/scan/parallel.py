"""Many files read at once: kernel names decoded in worker processes, reports in order.

Decoding names is CPU work, and much of it holds the GIL (the per-entry Python work;
only zstd and lz4 release it), so threads alone leave cores idle on a tree of many
libraries: the names-mode profile on the H200 showed one core busy. Here each file, or
each whole wheel or archive, is read by one worker of a process pool, while each worker
still decodes a large library's entries on threads (:mod:`gate.scan.threads`). Headers
alone are read by the pool too where there is much to scan. Only large files go to the
pool: a task's round trip (pickling the reports, two queues) costs more than reading a
small file, so this process reads the small ones meanwhile (flashinfer-cubin's 15,970
cubins of ~120 kB: 1.6-2.2 s through the pool, 1.3-1.7 s here, at the same time as the
pool's work instead of before or after it).

What comes back is what a serial read gives, in the same order: the reports of each
found file in turn. Files the inspection cache knows by identity (unchanged since they
were read) are answered here and never sent to a worker; when what is left is a single
file or little data, it is read in this process (starting workers would cost more).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gate.reader import artifacts
from gate.reader.limits import Limits
from gate.reader.read import ArtifactReport, Progress
from gate.scan.files import read_found

# The pool's modules (multiprocessing, concurrent.futures: logging, sockets) are imported
# when a pool starts: a small environment is read without one, and sooner. The caches
# (hashlib: OpenSSL, 4 MB) are imported when used: a read without them never needs them.
if TYPE_CHECKING:
    import multiprocessing.context
    from concurrent.futures import Future, ProcessPoolExecutor

# Workers at most: past 8 processes a names run gained nothing on the H200's 16 cores
# (each worker also decodes on threads), while memory grows with each.
MAX_WORKERS = 8
# Files smaller than this are read in this process, the larger by the pool.
SMALL_FILE = 4 << 20
# Less than this in large files (bytes on disk) in all: no pool (with names; headers only).
MIN_BYTES = 64 << 20
MIN_BYTES_HEADERS = 512 << 20
# A task holds one file of at least BATCH_BYTES, or up to BATCH_FILES smaller ones.
BATCH_FILES = 64
BATCH_BYTES = 16 << 20

Found = artifacts.Found | artifacts.Unreadable


@dataclass(frozen=True)
class _How:
    names: bool
    scan: bool
    limits: Limits
    cache: bool
    digests: bool = True

    def here(self, found: Found, members: Progress | None = None) -> tuple[ArtifactReport, ...]:
        return tuple(
            read_found(
                found, names=self.names, scan=self.scan, limits=self.limits, cache=self.cache,
                members=members, digests=self.digests,
            )
        )  # fmt: skip


def read_each(
    found: Sequence[Found],
    *,
    names: bool,
    scan: bool,
    limits: Limits,
    cache: bool,
    before: Callable[[Found], None] | None = None,
    members: Progress | None = None,
    digests: bool = True,
) -> Iterator[tuple[ArtifactReport, ...]]:
    """The reports of each of ``found`` in turn, as :func:`read_found` gives them.

    ``before`` hears of each file before its reports come; ``members`` of each member of
    a wheel read in this process (a worker's wheel counts as one file). A pool, where one
    reads, starts at this call with every file handed to it, not at the first report
    asked for: the caller can do other work while it reads.
    """
    how = _How(names, scan, limits, cache, digests)
    if cache:
        from gate.scan.cache import cache_dir  # noqa: PLC0415  (see the imports)

        folder = cache_dir()
        known = [_known(f, names=names, scan=scan, digests=digests, folder=folder) for f in found]
    else:
        known = [None] * len(found)
    todo = [i for i, k in enumerate(known) if k is None and isinstance(found[i], artifacts.Found)]
    sizes = {i: _size(found[i]) for i in todo}
    large = [i for i in todo if sizes[i] >= SMALL_FILE]
    workers = _workers(large, sizes, names=names, others=len(todo) - len(large))
    if not workers:
        return _serial(found, known, how, before, members)
    small = [i for i in todo if sizes[i] < SMALL_FILE]
    pool = _pooled(found, _tasks(large, sizes), workers, how)
    return _collected(found, known, small, pool, how, before, members)


def _serial(
    found: Sequence[Found],
    known: list[tuple[ArtifactReport, ...] | None],
    how: _How,
    before: Callable[[Found], None] | None,
    members: Progress | None,
) -> Iterator[tuple[ArtifactReport, ...]]:
    for f, k in zip(found, known, strict=True):
        if before is not None:
            before(f)
        yield k if k is not None else how.here(f, members)


_Futures = dict[int, "tuple[Future[list[tuple[ArtifactReport, ...]]], int]"]


def _pooled(
    found: Sequence[Found], tasks: list[list[int]], workers: int, how: _How
) -> tuple[ProcessPoolExecutor, _Futures]:
    """A new pool with every task handed to it; each file's future and place in its task."""
    from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415  (see the imports)

    from gate.scan.cache import cache_dir  # noqa: PLC0415  (see the imports)

    folder = str(cache_dir()) if how.cache else ""
    pool = ProcessPoolExecutor(workers, mp_context=_context())
    futures: _Futures = {}
    try:
        for task in tasks:
            future = pool.submit(_work, [found[i] for i in task], how, folder)
            futures.update((i, (future, at)) for at, i in enumerate(task))
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    return pool, futures


def _collected(  # noqa: PLR0917  (private: read_each's state, passed on)
    found: Sequence[Found],
    known: list[tuple[ArtifactReport, ...] | None],
    small: list[int],
    started: tuple[ProcessPoolExecutor, _Futures],
    how: _How,
    before: Callable[[Found], None] | None,
    members: Progress | None,
) -> Iterator[tuple[ArtifactReport, ...]]:
    """The reports in order: the small files read here first, while the pool reads."""
    pool, futures = started
    try:
        here = {i: how.here(found[i], members) for i in small}
        for i, f in enumerate(found):
            if before is not None:
                before(f)
            k = known[i]
            if k is not None:
                yield k
            elif i in here:
                yield here.pop(i)
            elif i in futures:
                future, at = futures.pop(i)
                yield future.result()[at]
            else:  # a path that could not be read: its error report, made here
                yield how.here(f)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _tasks(todo: list[int], sizes: dict[int, int]) -> list[list[int]]:
    """``todo`` as the pool's tasks, the largest first (so that no worker is left with a
    large file at the end): each file of BATCH_BYTES or more alone, the smaller ones up
    to BATCH_FILES or BATCH_BYTES at a time."""
    tasks: list[list[int]] = []
    batch: list[int] = []
    held = 0
    for i in sorted(todo, key=lambda i: -sizes[i]):
        if sizes[i] >= BATCH_BYTES:
            tasks.append([i])
            continue
        batch.append(i)
        held += sizes[i]
        if len(batch) >= BATCH_FILES or held >= BATCH_BYTES:
            tasks.append(batch)
            batch, held = [], 0
    if batch:
        tasks.append(batch)
    return tasks


def _work(found: list[Found], how: _How, folder: str) -> list[tuple[ArtifactReport, ...]]:
    """Files read in a worker (a module-level function: the pool pickles it)."""
    from gate.scan import forked  # noqa: PLC0415  (a worker reads one of many files)

    forked.forbid_in_this_process()
    if folder:
        from gate.scan.cache import ENV_DIR  # noqa: PLC0415

        # The pool's processes hold the environment of when the first pool started:
        # use the cache folder the caller uses now.
        os.environ[ENV_DIR] = folder
    return [how.here(f) for f in found]


def _known(
    found: Found, *, names: bool, scan: bool, digests: bool, folder: Path
) -> tuple[ArtifactReport, ...] | None:
    """The reports the cache holds for an unchanged file or wheel, else None."""
    if not isinstance(found, artifacts.Found) or found.kind in (None, "archive", "duplicate"):
        return None
    if found.kind == "zip":
        from gate.scan.wheelcache import cached_wheel  # noqa: PLC0415

        return cached_wheel(found.path, names=names, scan=scan, digests=digests, folder=folder)
    from gate.scan.cache import cached_file, kept_report, known_report  # noqa: PLC0415

    if isinstance(found.report, dict):
        kept = kept_report(found.path, found.report)
        if kept is not None:
            return (kept,)
    if found.digest is not None:
        report = known_report(
            found.path, found.digest, found.size, names=names, scan=scan, digests=digests,
            folder=folder,
        )  # fmt: skip
        if report is not None:
            return (report,)
    hit = cached_file(
        found.path, names=names, scan=scan, digests=digests, real=found.real, folder=folder
    )
    return (hit[0],) if hit is not None else None


def _workers(large: list[int], sizes: dict[int, int], *, names: bool, others: int) -> int:
    """How many worker processes read the ``large`` files (``others`` small ones being
    read here meanwhile): none for little work, or for one file with nothing else to do."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    total = sum(sizes[i] for i in large)
    if total < (MIN_BYTES if names else MIN_BYTES_HEADERS) or (len(large) < 2 and not others):
        return 0
    return max(1, min(cores or 1, MAX_WORKERS, len(large)))


def _size(found: Found) -> int:
    try:
        return Path(found.path).stat().st_size if isinstance(found, artifacts.Found) else 0
    except OSError:
        return 0


def _context() -> multiprocessing.context.BaseContext:
    """fork while this process runs one thread (the pool forks all its workers before it
    starts its own thread), else forkserver: forking a process that runs threads can
    copy a lock another thread holds. forkserver (like spawn) imports the caller's
    main module in each worker: a script calling this guards its top level."""
    import multiprocessing  # noqa: PLC0415  (see the imports)

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["gate.reader.read", "gate.reader.cubin", "gate.scan.cache"])
    return context
