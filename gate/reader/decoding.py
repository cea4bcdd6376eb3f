"""Decoding an artifact's entries for their names: each payload once, on threads when worth it.

:func:`first_copies` finds the entries that repeat an earlier one byte for byte (decoded
once for all); :func:`decode_all` decodes the rest in order (:func:`decode`: a cubin's
kernels, producer, trap stubs and empty kernels, a PTX text's entries, and each one's
SHA-256), in the calling thread or, for a large artifact, on the threads a
:class:`Threads` starts; the pages each payload was read from are dropped once decoded
(:func:`gate.reader.pages.releaser`).
"""

from __future__ import annotations

import itertools
import os
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gate.reader import fatbin, payloads
from gate.reader.elffile import Buffer
from gate.reader.headers import PACKED_KIND, Headers, packed_signature, packed_sizes, signature
from gate.reader.limits import Budget
from gate.reader.pages import FAULT_AROUND, releaser
from gate.rules.targets import Variant

if TYPE_CHECKING:
    from concurrent.futures import Executor
    from hashlib import _Hash

# Fewer entries than this to decompress are not worth a thread pool, nor entries smaller
# than this on average: the Python work of each (which holds the GIL) then outweighs the
# decompression a thread runs without it, and threads contending for the GIL are slower
# than one. libcufft.so.11's 24,454 entries average 28 kB: 0.83 s in one thread, 1.03-1.14 s
# in two (2-core VM); libcublasLt.so.13's 1,486 distinct entries average 1.5 MB and
# libnccl.so.2's 466 1.4 MB: two threads 1.7x and 1.5x faster than one. Public tuning
# values: the tests lower them to take the threaded path on small golden files.
PARALLEL_MIN = 16
PARALLEL_MEAN_BYTES = 128 << 10
# Threads decoding names. Past 8 the per-entry Python work (which holds the GIL) bounds
# the speed, while memory grows with each thread (a payload held, and what the allocator
# keeps of those it freed). On the H200's 16 cores, 8 threads: libtorch_cuda.so 0.97 s /
# 292 MB, libcublasLt.so.13 1.09 s / 184 MB; 16 threads: 1.02 s / 445 MB and 1.08 s /
# 256 MB (medians of 5).
_WORKERS = 8
# Entries decoded by one task, and between two releases of the pages they were read from.
_BATCH = 16
_BATCH_BYTES = 4 << 20
# Decoding in this thread, the pages of a run of nearby entries are dropped once the run
# spans this many bytes.
_RELEASE_BYTES = 1 << 20
# Distinct payloads of one header signature kept to compare later entries against.
_DISTINCT_COMPARED = 4


class Threads(Protocol):
    """Starts a pool of ``workers`` threads to decode one artifact's entries on (shut down
    once they are decoded); :func:`gate.scan.threads.decoding_pool` is one."""

    def __call__(self, workers: int, /) -> Executor: ...


@dataclass(slots=True)
class Decoded:
    """What decoding one entry found. ``code``: its index in the listing's EntryPacker,
    set when the first entry holding it is added (its copies then name the same)."""

    kernels: tuple[str, ...]
    producer: str | None
    variant: Variant
    traps: tuple[str, ...] = ()
    empty: tuple[str, ...] = ()
    sha256: str = ""
    code: int | None = None


def decode_all(
    buf: Buffer,
    headers: Headers,
    first: array[int],
    *,
    display: str,
    budget: Budget,
    digests: bool = True,
    threads: Threads | None = None,
) -> Iterator[tuple[fatbin.Entry, Decoded | None]]:
    """Every entry of ``headers`` in order, with what it decodes to: an entry that is the
    first of its copies (``first[i] == i``, :func:`first_copies`) is decoded, once; a
    copy is given its first's result (:func:`_with_copies`). On ``threads`` when they
    are worth it, else in this thread."""
    release = releaser(buf)
    workers = min(os.cpu_count() or 1, _WORKERS)
    if threads is None or workers == 1 or not _worth_threads(headers, first):
        # Pages are dropped a run of nearby entries at a time, not entry by entry (a
        # system call each; cuFFT's entries are a container header apart).
        lo = hi = 0  # the run of pages read and not yet dropped: [lo, hi)

        def decoded(e: fatbin.Entry) -> Decoded | None:
            nonlocal lo, hi
            found = decode(buf, e, display, budget, digests)
            if hi == lo or not hi <= e.offset <= hi + FAULT_AROUND:
                if hi > lo:
                    release(lo, hi)
                lo = e.offset
            hi = e.payload_offset + e.payload_size
            if hi - lo >= _RELEASE_BYTES:
                release(lo, hi)
                lo = hi
            return found

        yield from _with_copies(headers, first, decoded)
        if hi > lo:
            release(lo, hi)
        return
    # lz4 and zstd release the GIL while decompressing: threads use every core. Chunks
    # of a few entries (each task costs GIL time), handed out with no barrier between
    # them: a worker never waits for another's large entry. Results come back in order;
    # each chunk's pages are dropped once decoded.
    work = [e for i, e in enumerate(headers) if first[i] == i]
    chunks = list(_batches(work))

    def chunk(span: tuple[int, int]) -> list[Decoded | None]:
        lo, hi = span
        found = [decode(buf, e, display, budget, digests) for e in work[lo:hi]]
        # Dropped by the thread that read them, at once: a thread ahead of the others
        # would otherwise hold its pages until the results before its own were taken.
        last = work[hi - 1]
        release(work[lo].offset, last.payload_offset + last.payload_size)
        return found

    with threads(workers) as pool:
        results = itertools.chain.from_iterable(pool.map(chunk, chunks))
        try:
            yield from _with_copies(headers, first, lambda _e: next(results))
        except BaseException:
            pool.shutdown(cancel_futures=True)  # a bad entry: decode no further
            raise


def _with_copies(
    headers: Headers, first: array[int], decoded: Callable[[fatbin.Entry], Decoded | None]
) -> Iterator[tuple[fatbin.Entry, Decoded | None]]:
    """Each entry with ``decoded(entry)`` for the first of its copies (asked in order), and
    that same result for each later copy; only results a later copy needs are kept."""
    # first[i] <= i: a copy's first is decoded (and kept) before the copy is reached.
    kept: dict[int, Decoded | None] = {f: None for i, f in enumerate(first) if f != i}
    for i, e in enumerate(headers):
        f = first[i]
        if f != i:
            yield e, kept[f]
            continue
        d = decoded(e)
        if i in kept:
            kept[i] = d
        yield e, d


def _worth_threads(headers: Headers, first: array[int]) -> bool:
    """Whether decoding the entries of ``headers`` that are no copies (``first``) is worth
    a pool of threads (PARALLEL_MEAN_BYTES)."""
    count = decoded = 0
    for i, v in enumerate(headers.packed()):
        if first[i] == i and v[PACKED_KIND] != fatbin.KIND_NVVM:  # LTO IR: never decoded
            count += 1
            decoded += max(packed_sizes(v))
    return count >= PARALLEL_MIN and decoded >= PARALLEL_MEAN_BYTES * count


def first_copies(buf: Buffer, headers: Headers) -> array[int]:
    """For each entry, the index of the first entry with the same header and payload bytes.

    Libraries repeat entries (libcublasLt: 4,479 of its 5,666 are copies, mostly small
    device-link stubs): decoding each payload once saves the per-entry cost of the rest.
    Only entries whose header fields all agree are compared, byte for byte, each against
    at most a few distinct payloads (so a crafted file cannot make this quadratic); a
    CRC-32 of each payload (read in place, its pages dropped after) is compared first,
    so no payload is held: sgl-kernel's flash_ops holds 546 raw cubins of up to 6 MB.
    LTO IR is never decoded, so never compared. Entries are grouped by their fields'
    hash, and a group of one is its index alone: a tuple and a list per entry were 6 MB
    of cuFFT's 24,454 headers.
    """
    release = releaser(buf)
    first = array("q", range(len(headers)))
    groups: dict[int, int | list[int]] = {}
    for i, v in enumerate(headers.packed()):
        if v[PACKED_KIND] == fatbin.KIND_NVVM:
            continue
        key = hash(packed_signature(v))
        seen = groups.get(key)
        if seen is None:
            groups[key] = i
        elif isinstance(seen, int):
            groups[key] = [seen, i]
        else:
            seen.append(i)
    with memoryview(buf) as view:

        def payload(e: fatbin.Entry) -> memoryview:
            return view[e.payload_offset : e.payload_offset + e.payload_size]

        for members in groups.values():
            if isinstance(members, int):
                continue
            # Fields that differ but hash alike (a crafted file can make them: flags and
            # sizes are 64-bit) are kept apart, each with its own few payloads compared.
            by_fields: dict[tuple[int, ...], list[tuple[int, int]]] = {}  # entry, CRC-32
            for i in members:
                e = headers[i]
                crc = zlib.crc32(payload(e))
                release(e.payload_offset, e.payload_offset + e.payload_size)
                distinct = by_fields.setdefault(signature(e), [])
                same = next(
                    (j for j, seen in distinct
                     if seen == crc and payload(headers[j]) == payload(e)),
                    None,
                )  # fmt: skip
                if same is not None:
                    first[i] = same
                elif len(distinct) < _DISTINCT_COMPARED:
                    distinct.append((i, crc))
    return first


def _batches(entries: list[fatbin.Entry]) -> Iterator[tuple[int, int]]:
    """Index ranges of at most _BATCH entries and about _BATCH_BYTES stored bytes each."""
    lo, stored = 0, 0
    for i, e in enumerate(entries):
        stored += e.header_size + e.payload_size
        if i + 1 - lo >= _BATCH or stored >= _BATCH_BYTES:
            yield lo, i + 1
            lo, stored = i + 1, 0
    if lo < len(entries):
        yield lo, len(entries)


def decode(
    buf: Buffer, entry: fatbin.Entry, display: str, budget: Budget, digests: bool = True
) -> Decoded | None:
    """What one entry's payload holds (kernels, producer, stubs, digest), decompressed
    within ``budget``; None for LTO IR (listed, never decoded). :func:`decode_all` calls it
    once per distinct payload."""
    if entry.kind == fatbin.KIND_NVVM:
        return None  # LTO IR payloads are opaque: listed, never decoded
    from gate.reader.cubin import scan_ptx  # noqa: PLC0415  (names only: start-up)

    where = f"{display}: fatbin entry at {entry.offset:#x}"
    if entry.kind == fatbin.KIND_PTX:
        # Streamed: a PTX text is read once from the front, never held whole.
        pieces = payloads.payload_chunks(buf, entry, display, budget.limits, budget)
        sha256 = ""
        if digests:
            # Imported only here: OpenSSL is 4 MB of start-up and 1.8 MB of pages that
            # an inspection (no digests) never needs.
            import hashlib  # noqa: PLC0415

            digest = hashlib.sha256()
            ptx = scan_ptx(_hashed(pieces, digest), where)
            sha256 = digest.hexdigest()
        else:
            ptx = scan_ptx(pieces, where)
        target = ptx.target or ""
        variant = {"a": Variant.ARCH, "f": Variant.FAMILY}.get(target[-1:], Variant.NONE)
        return Decoded(ptx.kernels, ptx.producer, variant, sha256=sha256)
    if payloads.spills(entry):
        with payloads.spilled(buf, entry, display, budget.limits, budget) as (data, start, size):
            return _cubin_decoded(data, start, size, where, digests)
    data, start, size = payloads.payload(buf, entry, display, budget.limits, budget)
    return _cubin_decoded(data, start, size, where, digests)


def _cubin_decoded(buf: Buffer, start: int, size: int, where: str, digests: bool) -> Decoded:
    from gate.reader.cubin import read_cubin  # noqa: PLC0415  (names only: start-up)

    cubin = read_cubin(buf, start, size, where)
    return Decoded(
        cubin.kernels,
        cubin.producer,
        Variant.ARCH if cubin.arch_specific else Variant.NONE,
        cubin.traps,
        cubin.empty,
        sha256_hex(buf, start, size) if digests else "",
    )


def sha256_hex(buf: Buffer, start: int, size: int) -> str:
    """The SHA-256 of ``buf[start:start+size]``, without copying it."""
    import hashlib  # noqa: PLC0415  (names only: OpenSSL is 4 MB of start-up)

    with memoryview(buf) as view:
        return hashlib.sha256(view[start : start + size]).hexdigest()


def _hashed(pieces: Iterable[bytes], digest: _Hash) -> Iterator[bytes]:
    """``pieces`` as they are, the text up to its first NUL added to ``digest``.

    scan_ptx asks for no piece after the one holding the NUL: the digest covers the text
    the driver reads, whatever padding follows it.
    """
    for piece in pieces:
        nul = piece.find(b"\0")
        digest.update(piece if nul < 0 else piece[:nul])
        yield piece
        if nul >= 0:
            return
