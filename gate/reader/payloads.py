"""A fatbin entry's payload, decompressed within bounds: LZ4 blocks, zstd frames, spills.

:func:`payload` gives the payload whole (for cubins: their section headers are at the
end), in place when stored raw; :func:`payload_chunks` streams it (for PTX, read once
from the front); :func:`spilled` decompresses a large one into an unnamed temporary file
and maps it (:func:`spills` says which). Every one refuses, before any work, an entry
whose claimed size passes the bounds of :class:`gate.reader.limits.Limits`, and charges
what it decompresses to the artifact's :class:`~gate.reader.limits.Budget`. The headers
these read are :mod:`gate.reader.fatbin`'s.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from gate.errors import BadInputError
from gate.reader.elffile import Buffer
from gate.reader.fatbin import Entry
from gate.reader.limits import Budget, Limits, hint
from gate.reader.memsearch import address

# Pieces PTX text is streamed in, and compressed bytes fed to zstd per step.
_CHUNK = 1 << 20
# LZ4 cannot expand more than 255x (a match token covers at most 255 bytes per byte).
_LZ4_MAX_RATIO = 255
# Payloads that decompress to this many bytes or more go through an unnamed temporary file
# (spilled): libnccl.so.2 (NCCL 2.32, CUDA 13) holds six zstd cubins of 51-160 MB, and its
# names run peaked at 283 MB with two threads holding one each; 64-70 MB through the file
# (105-137 MB with 64 MB here), in about the same time. The corpus of benchmarks/RESULTS.md
# holds 36 such zstd cubins (2.65 GB) among 66,000 entries; libnccl.so.2 for CUDA 12
# (NCCL 2.32) holds LZ4 cubins of up to 134 MB.
SPILL_BYTES = 32 << 20
# An LZ4 block is decoded by the C library straight into the file (_lz4_to_file), never
# whole in the heap, so from a smaller size: CuPy's thrust module holds twelve LZ4 cubins
# of 10-21 MB and a 35.6 MB PTX text; its names run peaked at 79 MB with 32 MB here (the
# allocator keeps what the decoded cubins leave) and 27 MB with 8 MB, 0.35 -> 0.45 s.
LZ4_SPILL_BYTES = 8 << 20
# How often the pages an LZ4 decompression into a file has written are dropped from the
# process (seconds): at a few GB/s, a few MB written in between.
_SWEEP_EVERY = 0.001
# One zstd decompression context per thread, reused across entries.
_local = threading.local()


def payload(
    buf: Buffer,
    entry: Entry,
    name: str,
    limits: Limits | None = None,
    budget: Budget | None = None,
) -> tuple[Buffer, int, int]:
    """The entry's payload as ``(buffer, start, size)``: in place when raw, else decompressed.

    A compressed payload is refused before decompressing when its claimed size passes
    the per-entry bound or an implausible ratio, and charged to ``budget`` (the
    artifact's running total) before it is allocated.
    """
    start = entry.payload_offset
    if entry.compression == "none":
        return buf, start, entry.payload_size
    limits = limits or Limits()
    expected = entry.uncompressed_size
    where = f"fatbin entry at {entry.offset:#x}"
    _check_claim(entry, name, where, limits)
    if budget is not None:
        budget.charge(expected, where)
    # A view, not a copy: the decompressors read the mapped file directly.
    with memoryview(buf) as whole, whole[start : start + entry.compressed_size] as stored:
        out = (
            _lz4(stored, expected, name, where)
            if entry.compression == "lz4"
            else _zstd(stored, expected, name, where)
        )
    if len(out) != expected:
        raise BadInputError(
            f"{name}: {where} decompressed to {len(out)} bytes, header says {expected}"
        )
    return out, 0, len(out)


def spills(entry: Entry) -> bool:
    """Whether :func:`spilled` is the way to decompress ``entry``: large enough."""
    if entry.compression == "lz4":
        return entry.uncompressed_size >= LZ4_SPILL_BYTES
    return entry.compression == "zstd" and entry.uncompressed_size >= SPILL_BYTES


@contextmanager
def spilled(
    buf: Buffer,
    entry: Entry,
    name: str,
    limits: Limits | None = None,
    budget: Budget | None = None,
) -> Iterator[tuple[Buffer, int, int]]:
    """A compressed entry's payload as ``(buffer, start, size)``, decompressed into an
    unnamed temporary file and mapped from it, as a wheel member is: a cubin's section
    headers are at its end, so it is read whole, but its bytes go through the page cache,
    not the heap (libnccl.so.2 holds cubins of up to 160 MB, two decoded at once). A zstd
    frame is streamed into the file; an LZ4 block, which cannot be streamed, is decoded by
    the C library straight into the file's map while a thread drops the pages written
    (:func:`_lz4_to_file`). Within the bounds :func:`payload_chunks` keeps; where no
    temporary file can be made (or, for LZ4, the C function cannot be reached), the
    payload is decompressed in memory as :func:`payload` does, and a write that fails (no
    room in TMPDIR) is a BadInputError naming the entry."""
    import mmap  # noqa: PLC0415  (large entries only)
    import tempfile  # noqa: PLC0415

    try:
        # Unbuffered: a write that fails (a full disk) fails here, not when it closes.
        scratch = tempfile.TemporaryFile(buffering=0, prefix="cuda-gate-entry-")  # noqa: SIM115
    except OSError:
        yield payload(buf, entry, name, limits, budget)
        return
    with scratch:
        try:
            if entry.compression == "lz4":
                size = _lz4_to_file(
                    buf, entry, scratch.fileno(), name, limits=limits, budget=budget
                )
                if size is None:  # no C function to call: in memory, as before
                    yield payload(buf, entry, name, limits, budget)
                    return
            else:
                pieces = payload_chunks(buf, entry, name, limits, budget)
                try:
                    for piece in pieces:  # a generator: closed below, releasing its view
                        scratch.write(piece)
                finally:
                    pieces.close()
                size = scratch.tell()
            mapped = mmap.mmap(scratch.fileno(), size, access=mmap.ACCESS_READ)
        except OSError as e:
            raise BadInputError(
                f"{name}: fatbin entry at {entry.offset:#x}: cannot write its {entry.size} "
                f"decompressed bytes to a temporary file: {e.strerror or e} (TMPDIR chooses "
                "its folder)"
            ) from e
        with mapped:
            yield mapped, 0, size


def _lz4_to_file(
    buf: Buffer,
    entry: Entry,
    fd: int,
    name: str,
    *,
    limits: Limits | None,
    budget: Budget | None,
) -> int | None:
    """Decode the entry's LZ4 block into the file ``fd`` (sized to fit), without holding
    the output in the process: the C library's ``LZ4_decompress_safe`` (called through
    ctypes, without the GIL) writes into a shared map of the file while this thread drops
    the map's pages every millisecond, the block's own pages as well. A dropped page is
    kept by the page cache, never lost: the decoder reads back at most 64 kB behind it and
    finds its bytes there. The bytes written; None where the function is not reachable
    (or the block is past its 2 GB reach). A malformed block is a BadInputError, as
    :func:`payload` says it."""
    import mmap  # noqa: PLC0415  (large entries only)
    import os  # noqa: PLC0415

    decode = lz4_function()
    expected = entry.uncompressed_size
    if decode is None or expected >= 1 << 31 or entry.compressed_size >= 1 << 31:
        return None
    limits = limits or Limits()
    where = f"fatbin entry at {entry.offset:#x}"
    _check_claim(entry, name, where, limits)
    if expected > entry.compressed_size * _LZ4_MAX_RATIO + 64:
        raise BadInputError(f"{name}: {where} claims an impossible LZ4 ratio; refusing")
    os.ftruncate(fd, expected)
    start, stored = entry.payload_offset, entry.compressed_size
    with mmap.mmap(fd, expected, access=mmap.ACCESS_WRITE) as out:
        done = threading.Event()
        source = buf if isinstance(buf, mmap.mmap) else None

        def sweep() -> None:
            page = mmap.PAGESIZE
            lo = start // page * page
            while not done.wait(_SWEEP_EVERY):
                out.madvise(mmap.MADV_DONTNEED)
                if source is not None:
                    source.madvise(mmap.MADV_DONTNEED, lo, min(start + stored, len(source)) - lo)

        with address(buf) as src, address(out) as dst:
            if src is None or dst is None:
                return None
            if budget is not None:
                budget.charge(expected, where)
            sweeper = threading.Thread(target=sweep, name="cuda-gate-lz4-sweep", daemon=True)
            sweeper.start()
            try:
                written = int(decode(src + start, dst, stored, expected))
            finally:
                done.set()
                sweeper.join()
        out.madvise(mmap.MADV_DONTNEED)
    if written < 0:
        raise BadInputError(f"{name}: {where}: corrupted LZ4 data")
    if written != expected:
        raise BadInputError(
            f"{name}: {where} decompressed to {written} bytes, header says {expected}"
        )
    return written


@cache
def lz4_function() -> Any:  # noqa: ANN401  (a ctypes foreign function)
    """``LZ4_decompress_safe`` from the lz4 package's own extension (which exports it), else
    from the system's liblz4 (looked for only then: ctypes asks ``ldconfig``); None when
    neither is there, and LZ4 entries are then decompressed in memory."""
    import ctypes  # noqa: PLC0415  (large entries only)

    def bound(path: str | None) -> Any:  # noqa: ANN401
        if not path:
            return None
        try:
            function = ctypes.CDLL(path).LZ4_decompress_safe
        except (OSError, AttributeError):
            return None
        function.restype = ctypes.c_int
        function.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
        return function

    try:
        import lz4.block._block as extension  # noqa: PLC0415

        found = bound(extension.__file__)
    except ImportError:
        found = None
    if found is None:
        import ctypes.util  # noqa: PLC0415

        found = bound(ctypes.util.find_library("lz4"))
    return found


def payload_chunks(
    buf: Buffer,
    entry: Entry,
    name: str,
    limits: Limits | None = None,
    budget: Budget | None = None,
    *,
    chunk: int = _CHUNK,
) -> Generator[bytes, None, None]:
    """The entry's payload in pieces of at most ``chunk`` bytes, decompressed as it goes.

    For text read once from the front (PTX): a zstd payload is never held whole, so
    memory stays at one piece however large the entry; the caller may stop early.
    LZ4 blocks cannot be streamed: each is decompressed whole (within the same bounds), a
    large one into a temporary file read back a piece at a time (:func:`spilled`).
    """
    start = entry.payload_offset
    if entry.compression == "none":
        for lo in range(start, start + entry.payload_size, chunk):
            yield bytes(buf[lo : min(lo + chunk, start + entry.payload_size)])
        return
    if entry.compression == "lz4":
        if not spills(entry):
            # Decompressed whole in memory (bytes): its pieces are slices, the block
            # itself when it fits one piece (cuFFT's 8,183 texts average 50 kB).
            block, lo, size = payload(buf, entry, name, limits, budget)
            for at in range(lo, lo + size, chunk):
                yield bytes(block[at : min(at + chunk, lo + size)])
            return
        # A large block through a temporary file (CuPy's thrust holds a 35.6 MB PTX text):
        # its pieces are read from the map, each one's pages dropped once copied.
        with (
            spilled(buf, entry, name, limits, budget) as (data, lo, size),
            memoryview(data) as view,
        ):
            for at in range(lo, lo + size, chunk):
                hi = min(at + chunk, lo + size)
                piece = bytes(view[at:hi])
                _drop(data, at, hi)
                yield piece
        return
    limits = limits or Limits()
    expected = entry.uncompressed_size
    where = f"fatbin entry at {entry.offset:#x}"
    _check_claim(entry, name, where, limits)
    import zstandard  # noqa: PLC0415  (only when an entry is zstd-compressed)

    produced = 0
    with memoryview(buf) as whole, whole[start : start + entry.compressed_size] as stored:
        _zstd_declared(stored, expected, name, where)
        pieces = zstandard.ZstdDecompressor().read_to_iter(
            stored, read_size=_CHUNK, write_size=chunk
        )
        try:
            for piece in pieces:
                produced += len(piece)
                if produced > expected:
                    raise BadInputError(
                        f"{name}: {where} decompresses past the {expected} bytes its header says"
                    )
                if budget is not None:
                    budget.charge(len(piece), where)
                yield piece
        except zstandard.ZstdError as e:
            raise BadInputError(f"{name}: {where}: corrupted zstd data ({e})") from e
        finally:
            # The iterator holds the view; drop it first, or releasing the view fails
            # when the caller stops early (a PTX text ends at its first NUL).
            del pieces
    if produced != expected:
        raise BadInputError(
            f"{name}: {where} decompressed to {produced} bytes, header says {expected}"
        )


def _drop(data: Buffer, lo: int, hi: int) -> None:
    """Drop the pages of ``data[lo:hi]`` from the process when it is a map (of a file: its
    bytes stay in the page cache)."""
    import mmap  # noqa: PLC0415

    if isinstance(data, mmap.mmap):
        page = mmap.PAGESIZE
        first = lo // page * page
        data.madvise(mmap.MADV_DONTNEED, first, min(hi, len(data)) - first)


def _check_claim(entry: Entry, name: str, where: str, limits: Limits) -> None:
    """Refuse, before any work, an entry whose claimed size passes a bound."""
    expected = entry.uncompressed_size
    if not 0 < expected <= limits.entry:
        raise BadInputError(
            f"{name}: {where} would decompress to {expected} bytes "
            f"(limit {limits.entry}); refusing ({hint('entry')})"
        )
    if limits.refuse_ratio(expected, entry.compressed_size):
        raise BadInputError(
            f"{name}: {where} claims {expected} bytes from {entry.compressed_size} "
            f"(more than {limits.ratio}:1, a decompression bomb?); refusing ({hint('ratio')})"
        )


def _lz4(stored: memoryview, expected: int, name: str, where: str) -> bytes:
    import lz4.block  # noqa: PLC0415  (only when an entry is LZ4-compressed)

    if expected > len(stored) * _LZ4_MAX_RATIO + 64:
        raise BadInputError(f"{name}: {where} claims an impossible LZ4 ratio; refusing")
    try:
        out: bytes = lz4.block.decompress(stored, uncompressed_size=expected)
    except lz4.block.LZ4BlockError as e:
        raise BadInputError(f"{name}: {where}: corrupted LZ4 data") from e
    return out


def _zstd_declared(stored: memoryview, expected: int, name: str, where: str) -> None:
    """The frame's own size claim must agree with the header's (it is what zstd allocates)."""
    import zstandard  # noqa: PLC0415  (only when an entry is zstd-compressed)

    try:
        declared = zstandard.frame_content_size(stored)
    except zstandard.ZstdError as e:
        raise BadInputError(f"{name}: {where}: corrupted zstd frame header ({e})") from e
    if declared not in (-1, expected):
        raise BadInputError(
            f"{name}: {where}: zstd frame declares {declared} bytes, header says {expected}"
        )


def _zstd(stored: memoryview, expected: int, name: str, where: str) -> bytes:
    import zstandard  # noqa: PLC0415  (only when an entry is zstd-compressed)

    decompressor = getattr(_local, "zstd", None)
    if decompressor is None:
        decompressor = _local.zstd = zstandard.ZstdDecompressor()
    # Checked before decompressing: the frame's own size claim is what would be allocated.
    _zstd_declared(stored, expected, name, where)
    try:
        out: bytes = decompressor.decompress(stored, max_output_size=expected)
    except zstandard.ZstdError as e:
        raise BadInputError(f"{name}: {where}: corrupted zstd data ({e})") from e
    return out
