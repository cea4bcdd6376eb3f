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
    from concurrent.futures import ThreadPoolExecutor

# glibc's mallopt parameter for the most malloc arenas (malloc.h).
_M_ARENA_MAX = -8


def decoding_pool(workers: int) -> ThreadPoolExecutor:
    """A pool of ``workers`` threads for the reader to decode entries on, allocating from
    the main malloc arena (:func:`one_malloc_arena`, set before the threads exist)."""
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
