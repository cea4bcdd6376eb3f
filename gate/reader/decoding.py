"""Decoding an artifact's entries for their names: each payload once, on threads when worth it.

As the reader finds the entries, :class:`Copies` tells which repeat an earlier one byte
for byte (decoded once for all) and :class:`Decoding` takes the rest, in order, to decode
(:func:`decode`: a cubin's kernels, producer, trap stubs and empty kernels, a PTX text's
entries, and each one's SHA-256), in batches: on the threads a :class:`Threads` starts
while the reader reads on, for a large artifact, else in the calling thread; the pages
each batch was read from are dropped once decoded (:func:`gate.reader.pages.releaser`).
The pool may be of forked processes (``separate_memory``: gate.scan.forked): each batch
then comes back with the bytes its process charged to its own copy of the budget, which
are charged here, so the artifact's bound holds over all of them; a batch whose process
died is decoded here.
"""

from __future__ import annotations

import os
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gate.reader import fatbin, payloads
from gate.reader.elffile import Buffer
from gate.reader.headers import Headers, signature
from gate.reader.limits import Budget
from gate.reader.pages import releaser
from gate.rules.targets import Variant

# The kinds whose payloads are decoded (kernel names, digests); LTO IR is opaque and an
# unknown kind is not understood: both are listed from their headers alone.
DECODED = frozenset((fatbin.KIND_PTX, fatbin.KIND_ELF, fatbin.KIND_TILEIR))

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future
    from hashlib import _Hash

# Before this many entries to decompress a batch is not worth a thread pool, nor a batch
# of entries smaller than this on average: the Python work of each (which holds the GIL)
# then outweighs the decompression a thread runs without it, and threads contending for
# the GIL are slower than one. libcufft.so.11's 24,454 entries average 28 kB: 0.83 s in
# one thread, 1.03-1.14 s in two (2-core VM); libcublasLt.so.13's 1,486 distinct entries
# average 1.5 MB and libnccl.so.2's 466 1.4 MB: two threads 1.7x and 1.5x faster than
# one. Public tuning values: the tests lower them to take the threaded path on small
# golden files.
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
# Distinct payloads of one header signature kept to compare later entries against.
_DISTINCT_COMPARED = 4
# Bytes of a host ELF's other sections to scan for containers from which the search is
# handed to the pool (started for it), and the piece one task searches: libcublasLt.so.13
# scans 260 MB besides its 164 MB .nv_fatbin, 0.06 s in the reading thread warm and, cold,
# that much read from disk after the primary section, one fault at a time.
SEARCH_MIN = 16 << 20
_SEARCH_PIECE = 8 << 20
# What the pool's one function (_run) is asked to do.
_DECODE, _DECODE_CHARGED, _SEARCH = 0, 1, 2
# A piece of a range searched for containers: its start and end, and the range's end.
_Piece = tuple[int, int, int]


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


class Copies:
    """Which earlier entry each entry repeats byte for byte, told an entry at a time, as
    the reader reads them (the entries are decoded meanwhile: :class:`Decoding`).

    Libraries repeat entries (libcublasLt: 4,479 of its 5,666 are copies, mostly small
    device-link stubs): decoding each payload once saves the per-entry cost of the rest.
    Only entries whose header fields all agree are compared, byte for byte, each against
    at most a few distinct payloads (so a crafted file cannot make this quadratic); a
    CRC-32 of each payload (read in place, its pages dropped after) is compared first,
    so no payload is held: sgl-kernel's flash_ops holds 546 raw cubins of up to 6 MB.
    LTO IR is never decoded, so never compared. Entries are grouped by their fields'
    hash, and a group of one is its index alone (its CRC is taken once a second entry
    comes): a tuple and a list per entry were 6 MB of cuFFT's 24,454 headers.
    """

    def __init__(self, buf: Buffer, headers: Headers) -> None:
        self._buf, self._headers = buf, headers
        self._release = releaser(buf)
        # Per fields' hash: the first entry's index, or, from the second entry on, per
        # exact fields (a crafted file can make fields that differ hash alike: flags and
        # sizes are 64-bit) the few distinct payloads compared: (entry, CRC-32).
        self._groups: dict[int, int | dict[tuple[int, ...], list[tuple[int, int]]]] = {}

    def first_of(self, i: int, entry: fatbin.Entry) -> int:
        """The index of the first entry (``i`` itself, or an earlier one) with the same
        header fields and payload bytes as entry ``i`` (``headers[i]``)."""
        if entry.kind not in DECODED:
            return i
        key = hash(signature(entry))
        seen = self._groups.get(key)
        if seen is None:
            self._groups[key] = i
            return i
        if isinstance(seen, int):
            by_fields: dict[tuple[int, ...], list[tuple[int, int]]] = {}
            self._groups[key] = by_fields
            self._place(by_fields, seen, self._headers[seen])
            return self._place(by_fields, i, entry)
        return self._place(seen, i, entry)

    def _place(
        self, by_fields: dict[tuple[int, ...], list[tuple[int, int]]], i: int, e: fatbin.Entry
    ) -> int:
        lo, hi = e.payload_offset, e.payload_offset + e.payload_size
        with memoryview(self._buf) as view:
            crc = zlib.crc32(view[lo:hi])
            self._release(lo, hi)
            distinct = by_fields.setdefault(signature(e), [])
            for j, seen in distinct:
                if seen == crc:
                    other = self._headers[j]
                    start = other.payload_offset
                    if view[start : start + other.payload_size] == view[lo:hi]:
                        return j
        if len(distinct) < _DISTINCT_COMPARED:
            distinct.append((i, crc))
        return i


class Decoding:
    """The entries to decode (the first of their copies), handed over in order as the
    reader finds them, and what each decodes to (:func:`decode`), given back in that order.

    They are decoded in batches of a few entries: a batch worth it (PARALLEL_MIN entries
    so far, PARALLEL_MEAN_BYTES on average) on the threads a :class:`Threads` starts, as
    soon as it is full, while the reader reads on (the headers of other sections, the
    scan for containers, the pages a first read brings in from disk); any other batch in
    this thread, once its results are asked for. Each batch's pages are dropped once
    decoded. :meth:`close` stops the threads (a read that failed half-way)."""

    def __init__(
        self,
        buf: Buffer,
        *,
        display: str,
        budget: Budget,
        digests: bool = True,
        threads: Threads | None = None,
    ) -> None:
        self._buf, self._display, self._budget, self._digests = buf, display, budget, digests
        self._threads = threads
        self._workers = min(os.cpu_count() or 1, _WORKERS)
        self._release = releaser(buf)
        self._pool: Executor | None = None
        self._jobs: deque[Future[list[Decoded | None]] | _Charged | list[fatbin.Entry]] = deque()
        self._batch: list[fatbin.Entry] = []
        self._stored = self._decoded = 0  # the batch's stored and decoded bytes
        self._count = 0  # entries decoded (not LTO IR) handed over so far

    def put(self, entry: fatbin.Entry) -> None:
        """Add ``entry`` (the next in order) to the entries to decode."""
        self._batch.append(entry)
        self._stored += entry.header_size + entry.payload_size
        if entry.kind in DECODED:  # LTO IR and unknown kinds: never decoded
            self._count += 1
            self._decoded += max(entry.payload_size, entry.uncompressed_size)
        if len(self._batch) >= _BATCH or self._stored >= _BATCH_BYTES:
            self._flush()

    def search(self, ranges: Sequence[tuple[int, int]]) -> list[Iterator[int]] | None:
        """Where containers that parse start in each range of the buffer
        (:func:`gate.reader.fatbin.container_starts`; :func:`~gate.reader.fatbin.containers_at`
        keeps what a scan keeps), searched on the pool in pieces, every piece handed out
        now: the workers search (and, cold, read from disk) while the reader reads the
        primary section. None where there is no pool to start, or for less than
        SEARCH_MIN bytes in all: the caller scans them itself."""
        total = sum(hi - lo for lo, hi in ranges)
        if self._threads is None or self._workers < 2 or total < SEARCH_MIN:
            return None
        pool = self._started(self._threads)
        found = []
        for lo, hi in ranges:
            pieces = [(at, min(at + _SEARCH_PIECE, hi), hi) for at in range(lo, hi, _SEARCH_PIECE)]
            found.append(self._starts([(p, pool.submit(self._run, _SEARCH, p)) for p in pieces]))
        return found

    def results(self) -> Iterator[Decoded | None]:
        """What each entry handed over decodes to, in order (once all are handed over)."""
        self._flush()
        while self._jobs:
            job = self._jobs.popleft()
            if isinstance(job, list):
                yield from self._decode(job)
            elif isinstance(job, _Charged):
                try:
                    found, used = job.future.result()
                except DecoderLostError:  # its process ended (killed?): decoded here instead
                    yield from self._decode(job.batch)
                    continue
                self._budget.charge(used, f"fatbin entry at {job.batch[-1].offset:#x}")
                yield from found
            else:
                yield from job.result()

    def close(self) -> None:
        """Stop the threads, if any: batches not started are dropped, running ones end."""
        self._jobs.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _flush(self) -> None:
        batch = self._batch
        if not batch:
            return
        threads, pool = self._threads, self._pool
        processes = getattr(pool, "separate_memory", False)
        # Processes take any batch once they run: small entries cost the GIL only threads
        # share (cuDNN's precompiled engines: 1,760 of 3,810 entries, 158 MB, were decoded
        # in the reading process, which then ran behind the sixteen it had forked).
        worth = (
            self._workers > 1
            and self._count >= PARALLEL_MIN
            and (processes or self._decoded >= PARALLEL_MEAN_BYTES * len(batch))
        )
        self._batch, self._stored, self._decoded = [], 0, 0
        if threads is None or not worth:  # decoded here, when asked for
            self._jobs.append(batch)
            return
        if pool is None:
            pool = self._started(threads)
            processes = getattr(pool, "separate_memory", False)
        if processes:
            self._jobs.append(_Charged(pool.submit(self._run, _DECODE_CHARGED, batch), batch))
        else:
            self._jobs.append(pool.submit(self._run, _DECODE, batch))

    def _started(self, threads: Threads) -> Executor:
        """The pool, started now if it was not."""
        if self._pool is None:
            self._pool = threads(self._workers)
        return self._pool

    def _run(self, task: int, job: Any) -> Any:  # noqa: ANN401  (the task's own result)
        """What the pool runs: one function for every task, as a forked worker runs the
        function it was forked with (gate.scan.forked)."""
        if task == _SEARCH:
            return self._search(job)
        if task == _DECODE_CHARGED:
            return self._decode_charged(job)
        return self._decode(job)

    def _search(self, piece: _Piece) -> array[int]:
        lo, hi, end = piece
        return fatbin.container_starts(self._buf, lo, hi, end, self._display, done=self._release)

    def _starts(self, searched: list[tuple[_Piece, Future[array[int]]]]) -> Iterator[int]:
        """The starts each piece's task found, in order; a piece whose process ended is
        searched here."""
        for piece, future in searched:
            try:
                starts = future.result()
            except DecoderLostError:
                starts = self._search(piece)
            yield from starts

    def _decode_charged(self, batch: list[fatbin.Entry]) -> tuple[list[Decoded | None], int]:
        """:meth:`_decode` in a process of its own (gate.scan.forked), with the bytes it
        charged to its copy of the budget: the caller charges them to the artifact's."""
        before = self._budget.used
        found = self._decode(batch)
        return found, self._budget.used - before

    def _decode(self, batch: list[fatbin.Entry]) -> list[Decoded | None]:
        found = [decode(self._buf, e, self._display, self._budget, self._digests) for e in batch]
        # Dropped by the thread that read them, at once: a thread ahead of the others
        # would otherwise hold its pages until the results before its own were taken.
        last = batch[-1]
        self._release(batch[0].offset, last.payload_offset + last.payload_size)
        return found


class DecoderLostError(RuntimeError):
    """A process decoding a batch ended before it said what the batch holds."""


@dataclass(frozen=True, slots=True)
class _Charged:
    """A batch decoded in another process: its future gives what it found and the bytes
    it charged to that process's copy of the budget."""

    future: Future[tuple[list[Decoded | None], int]]
    batch: list[fatbin.Entry]


def with_copies(
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


def decode(
    buf: Buffer, entry: fatbin.Entry, display: str, budget: Budget, digests: bool = True
) -> Decoded | None:
    """What one entry's payload holds (kernels, producer, stubs, digest), decompressed
    within ``budget``; None for LTO IR (listed, never decoded). :func:`decode_all` calls it
    once per distinct payload."""
    if entry.kind not in DECODED:
        return None  # LTO IR payloads are opaque, unknown kinds not understood: listed only
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
    if entry.kind == fatbin.KIND_TILEIR:
        data, start, size = payloads.payload(buf, entry, display, budget.limits, budget)
        return _tileir_decoded(data, start, size, where, digests)
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


def _tileir_decoded(buf: Buffer, start: int, size: int, where: str, digests: bool) -> Decoded:
    from gate.reader import tileir  # noqa: PLC0415  (names only: start-up)

    with memoryview(buf) as view:
        module = tileir.read(bytes(view[start : start + size]), where)
    return Decoded(module.kernels, None, Variant.NONE,
                   sha256=sha256_hex(buf, start, size) if digests else "")  # fmt: skip


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
