"""The threads that decode one artifact's entries, and what the process sets up for them.

The reader decodes in the calling thread unless it is handed a way to start threads
(:data:`gate.reader.read.Threads`); :func:`decoding_pool` is the engine's. Setting up
the process's allocator is a choice for the whole process, so it is made here, by the
engine that starts the threads, never by the reader.
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import Executor

# Cores from which one artifact is decoded by forked processes rather than threads, and
# the most processes (measured: decoding_pool).
FORK_MIN_CPUS = 8
MAX_PROCESSES = 16
# glibc's mallopt parameter for the most malloc arenas (malloc.h).
_M_ARENA_MAX = -8


def decoding_pool(workers: int) -> Executor:
    """A pool for the reader to decode one artifact's entries on: forked processes where
    the machine has many cores and this process may fork (:func:`gate.scan.forked.usable`),
    else ``workers`` threads allocating from the main malloc arena (:func:`one_malloc_arena`,
    set before the threads exist).

    Processes take the work that holds the GIL off one core. On the lent H100 host's 16
    cores (2026-12-07, medians of 3, names read with no cache): libcublasLt.so.13 0.83 s
    with eight threads, 0.63 s with eight processes, 0.57 s with sixteen (cold 1.00, 0.83,
    0.82 s); cuDNN's precompiled engines 0.93, 0.76, 0.75 s; libtorch_cuda.so 0.87, 0.80,
    0.67 s; libcublas.so.13 0.45, 0.37, 0.35 s; the largest process's peak fell from
    67-212 MB to 36-75 MB. On this VM's 2 cores two processes were slower than two
    threads (libcublasLt 2.04 against 1.72 s): a fork and the results' round trip cost
    more than the GIL there.
    """
    cpus = os.cpu_count() or 1
    if cpus >= FORK_MIN_CPUS:
        from gate.scan import forked  # noqa: PLC0415  (names only)

        if forked.usable():
            return forked.ForkedDecoders(min(cpus, MAX_PROCESSES))
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415  (names only)

    one_malloc_arena()
    return ThreadPoolExecutor(workers)


@cache
def one_malloc_arena() -> bool:
    """Make threads started from now on allocate from the main malloc arena; True where
    that was done (glibc), False elsewhere (nothing changes).

    glibc gives each thread its own arena, and what a thread frees stays in its arena
    for its next allocations only: the payloads the decoding threads free add up, one
    arena's worth per thread. libcublasLt.so.13's names read with 8 threads peaked at
    187-205 MB with an arena per thread and at 154-160 MB with one shared (2 threads:
    121-125 and 94-125 MB; libtorch_cuda.so 108-146 and 98-111 MB), in the same time.
    """
    import ctypes  # noqa: PLC0415  (names with threads only)

    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        return bool(ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1))
    except (AttributeError, OSError, ValueError):  # no confstr name, no libc, no mallopt
        return False
