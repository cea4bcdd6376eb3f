"""Dropping the pages a read-only file map has touched, so a read's memory stays flat.

The reader maps each file (or wheel member) read-only and reads its fatbin containers
and payloads in place; once a range is read its pages are dropped from the process
(``madvise(MADV_DONTNEED)``): they stay in the page cache, and a later read of them maps
them back. :func:`releaser` gives the function that drops them for one buffer.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable

from gate.reader.elffile import Buffer

# Bytes of released ranges between two sweeps of a whole map (:func:`releaser`), and what a
# fault may map around a range besides it (Linux: fault_around_bytes, 64 kB by default).
_SWEEP_BYTES = 4 << 20
FAULT_AROUND = 64 << 10
# Ranges from this size on are dropped when released, smaller ones by the next sweep.
_ALONE = 1 << 20


def _keep(_lo: int, _hi: int) -> None:
    """Releasing pages is not possible (or not needed) for this buffer."""


def releaser(buf: Buffer) -> Callable[[int, int], None]:
    """A function dropping the pages ``buf[lo:hi]`` touches from this process (a
    read-only file map only: every mmap the reader makes)."""
    if not isinstance(buf, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return _keep
    page, size = mmap.PAGESIZE, len(buf)
    released = [0]  # bytes since the last sweep; shared by the threads, approximate

    def release(lo: int, hi: int) -> None:
        # A range of at least _ALONE bytes is dropped at once, every page it touches (the
        # partial ones at its ends included); a smaller one waits for the next sweep of
        # every page of the map, which comes once the ranges released since the last add
        # up to _SWEEP_BYTES, each counted with what a fault maps around it (fault-around:
        # pages no range of ours names). So at most about _SWEEP_BYTES of ranges stay
        # mapped, and a read of many small entries makes one call a sweep, not one a range:
        # the copies of libcublasLt.so.13's entries and its containers were 7,392 calls,
        # 0.035 s of its names read's 0.15 s in the reading thread. The map is read-only
        # and of a file: a dropped page that a neighbour or another thread still reads
        # comes back from the page cache, never lost, and a sweep costs microseconds.
        # With whole pages inside each range only, libcufft.so.11's 24,453 small entries
        # in .ldata kept 60 MB of the file mapped by the time the copies were looked for.
        first, last = lo // page * page, min(-(-hi // page) * page, size)
        released[0] += last - first + FAULT_AROUND
        if released[0] >= _SWEEP_BYTES:
            released[0] = 0
            first, last = 0, size
        elif last - first < _ALONE:
            return
        if last > first:
            buf.madvise(mmap.MADV_DONTNEED, first, last - first)

    return release
