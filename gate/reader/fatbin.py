"""Fat binary containers and their entries, read from a buffer (see FATBIN.md for the format).

A container is a 16-byte header (magic 0xBA55ED50, version 1, header size, ``fat_size``)
followed by ``fat_size`` bytes of entries; each entry is a header (64 bytes plus an
ident string and an options record) followed by its payload: PTX text, an ELF cubin or
an NVVM / LTO IR blob, raw or compressed (LZ4 block or zstd frame).

:func:`parse_containers` reads a section that must hold nothing but containers
(``.nv_fatbin``); :func:`scan_containers` finds containers anywhere else by their magic,
keeping only candidates whose every size checks out (searched by the C library's
``memmem``: :mod:`gate.reader.memsearch`). Reading headers never decompresses;
:func:`payload` does (whole, for cubins) and :func:`payload_chunks` streams (for PTX),
both within the bounds of :class:`gate.reader.limits.Limits`.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from gate.errors import BadInputError
from gate.reader.elffile import Buffer
from gate.reader.limits import Budget, Limits, hint
from gate.reader.memsearch import Finder, address, finder

CONTAINER_MAGIC = 0xBA55ED50
# Magic, version 1 and header size 16, as they sit in memory: what a scan looks for.
CONTAINER_PREFIX = struct.pack("<IHH", CONTAINER_MAGIC, 1, 16)
KIND_PTX = 1
KIND_ELF = 2
KIND_NVVM = 8

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000  # 'a'
FLAG_FAMILY_SPECIFIC = 0x200000  # 'f'

# The default per-entry bound (gate.reader.limits): no real cubin comes near it.
MAX_UNCOMPRESSED = Limits().entry
# Pieces PTX text is streamed in, and compressed bytes fed to zstd per step.
_CHUNK = 1 << 20
# LZ4 cannot expand more than 255x (a match token covers at most 255 bytes per byte).
_LZ4_MAX_RATIO = 255
# Bytes searched between two releases of the scanned pages: what a scan adds to the
# peak. 16 MB put 12-15 MB on every library past that size (libnvperf_host.so, 32 MB:
# 39 MB peak, 24 MB with 1 MB) and cost no measurable time less (one find per piece).
_SCAN_CHUNK = 1 << 20
_MAX_ENTRY_HEADER = 4096
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
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_OPTIONS = struct.Struct("<II")
_OPTIONS_SIZE = _OPTIONS.size
_KNOWN_KINDS = frozenset((KIND_PTX, KIND_ELF, KIND_NVVM))
_COMPRESSED = FLAG_LZ4 | FLAG_ZSTD


class Entry(NamedTuple):
    """One entry's header; ``offset`` is where the entry starts in the buffer.

    A NamedTuple rather than a frozen dataclass: libraries hold thousands of entries
    and a tuple is several times cheaper to build, with the same immutability.
    """

    kind: int
    offset: int
    header_size: int
    payload_size: int
    compressed_size: int
    minor: int
    major: int
    arch: int
    flags: int
    uncompressed_size: int
    ident: str
    options_offset: int

    @property
    def payload_offset(self) -> int:
        """Where the stored payload starts in the buffer."""
        return self.offset + self.header_size

    @property
    def compression(self) -> str:
        """``lz4``, ``zstd`` or ``none``."""
        if self.flags & FLAG_LZ4:
            return "lz4"
        if self.flags & FLAG_ZSTD:
            return "zstd"
        return "none"

    @property
    def stored_size(self) -> int:
        """Bytes the payload takes in the file."""
        return self.compressed_size if self.compression != "none" else self.payload_size

    @property
    def size(self) -> int:
        """Bytes of the payload once decompressed (padded to 8 when stored raw)."""
        return self.uncompressed_size if self.compression != "none" else self.payload_size


@dataclass(frozen=True, slots=True)
class Container:
    """One fat binary container: where it sits and its entries, in order."""

    offset: int
    size: int
    entries: tuple[Entry, ...]


def parse_containers(
    buf: Buffer,
    start: int,
    end: int,
    name: str,
    *,
    done: Callable[[int, int], None] | None = None,
) -> Iterator[Container]:
    """Every container in ``buf[start:end]``, back to back (zero padding allowed between).

    ``done(lo, hi)`` is told each container's range once its headers are read.
    """
    pos = start
    while pos < end:
        if buf[pos : pos + 8] == b"\0" * 8:
            pos += 8
            continue
        container = parse_container(buf, pos, end, name)
        yield container
        pos = container.offset + container.size
        if done is not None:
            done(container.offset, pos)


def scan_containers(
    buf: Buffer,
    start: int,
    end: int,
    name: str,
    *,
    chunk: int = _SCAN_CHUNK,
    done: Callable[[int, int], None] | None = None,
) -> Iterator[Container]:
    """Containers anywhere in ``buf[start:end]``; candidates that do not validate are skipped.

    The range is searched ``chunk`` bytes at a time; ``done(lo, hi)`` is told each
    finished range so the caller can drop those pages (keeps a large scan's memory flat).
    """
    with finder(buf) as find:
        lo = start
        while lo < end:
            hi = min(lo + chunk, end)
            # A magic straddling the chunk boundary is found from this chunk.
            search_end = min(hi + len(CONTAINER_PREFIX) - 1, end)
            pos = find(CONTAINER_PREFIX, lo, search_end)
            while pos >= 0:
                try:
                    container = parse_container(buf, pos, end, name)
                except BadInputError:
                    pos = find(CONTAINER_PREFIX, pos + 4, search_end)
                    continue
                yield container
                after = container.offset + container.size
                hi = max(hi, after)
                pos = _next(buf, find, after, search_end) if after < search_end else -1
            if done is not None:
                done(lo, hi)
            lo = hi


# How far past a container the next one is looked for by a plain slice before memmem:
# libraries that hold thousands of containers in a row pad them by 0 to 24 bytes (cuFFT's
# 24,454 in .ldata), and a slice's find costs a tenth of a call through ctypes.
_NEAR = 32 + len(CONTAINER_PREFIX)


def _next(buf: Buffer, find: Finder, after: int, end: int) -> int:
    """Where ``CONTAINER_PREFIX`` next starts in ``buf[after:end]`` (-1: nowhere)."""
    near = min(after + _NEAR, end)
    at = buf[after:near].find(CONTAINER_PREFIX)
    if at >= 0:
        return after + at
    if near == end:
        return -1
    # A match straddling ``near`` starts past what the slice could show.
    return find(CONTAINER_PREFIX, near - len(CONTAINER_PREFIX) + 1, end)


def parse_container(buf: Buffer, pos: int, end: int, name: str) -> Container:
    """The container at ``pos``, every entry header validated against ``end``."""
    if pos + _CONTAINER.size > end:
        raise BadInputError(f"{name}: truncated fatbin container header at {pos:#x}")
    magic, version, header_size, fat_size = _CONTAINER.unpack_from(buf, pos)
    if magic != CONTAINER_MAGIC:
        raise BadInputError(f"{name}: no fatbin container at {pos:#x} (bad magic {magic:#x})")
    if version != 1 or header_size < _CONTAINER.size or header_size > _MAX_ENTRY_HEADER:
        raise BadInputError(
            f"{name}: corrupted fatbin container header at {pos:#x} "
            f"(version {version}, header size {header_size})"
        )
    body = pos + header_size
    if body + fat_size > end:
        raise BadInputError(
            f"{name}: fatbin container at {pos:#x} claims {fat_size} bytes, "
            f"past the end of its section"
        )
    entries = []
    cursor, stop = body, body + fat_size
    unpack, entry_size, kinds = _ENTRY.unpack_from, _ENTRY.size, _KNOWN_KINDS
    while cursor < stop:
        # The common case inline (thousands of entries per library); anything unusual
        # goes through _parse_entry, which names the problem.
        if cursor + entry_size <= stop:
            (kind, _, hsize, psize, csize, opts, minor, major, arch, ioff, ilen, flags, _,
             usize) = unpack(buf, cursor)  # fmt: skip
            after = cursor + hsize + psize
            if (
                kind in kinds
                and entry_size <= hsize <= _MAX_ENTRY_HEADER
                and after <= stop
                and (not flags & _COMPRESSED or 0 < csize <= psize)
                and (not ilen or (ioff and ioff + ilen <= hsize))
                and (not opts or opts + _OPTIONS_SIZE <= hsize)
            ):
                ident = ""
                if ilen:
                    at = cursor + ioff
                    ident = buf[at : at + ilen].rstrip(b"\0").decode("utf-8", "replace")
                entry = Entry(kind, cursor, hsize, psize, csize, minor, major, arch, flags,
                              usize, ident, opts)  # fmt: skip
                entries.append(entry)
                cursor = after
                continue
        entry = _parse_entry(buf, cursor, stop, name)
        entries.append(entry)
        cursor = entry.payload_offset + entry.payload_size
    return Container(pos, header_size + fat_size, tuple(entries))


def _parse_entry(buf: Buffer, pos: int, end: int, name: str) -> Entry:
    if pos + _ENTRY.size > end:
        raise BadInputError(f"{name}: truncated fatbin entry at {pos:#x}")
    fields = _ENTRY.unpack_from(buf, pos)
    kind, _, header_size, payload_size, compressed_size, options_offset = fields[:6]
    minor, major, arch, ident_offset, ident_len, flags, _, uncompressed_size = fields[6:]
    problem = None
    if kind not in (KIND_PTX, KIND_ELF, KIND_NVVM):
        problem = f"unknown kind {kind}"
    elif not _ENTRY.size <= header_size <= _MAX_ENTRY_HEADER:
        problem = f"header size {header_size}"
    elif pos + header_size + payload_size > end:
        raise BadInputError(
            f"{name}: fatbin entry at {pos:#x} claims {payload_size} bytes past its container"
        )
    elif flags & (FLAG_LZ4 | FLAG_ZSTD) and not 0 < compressed_size <= payload_size:
        problem = f"compressed size {compressed_size} for a {payload_size}-byte payload"
    elif ident_len and (ident_offset == 0 or ident_offset + ident_len > header_size):
        problem = "ident string out of range"
    elif options_offset and options_offset + _OPTIONS.size > header_size:
        problem = "options record out of range"
    if problem:
        raise BadInputError(f"{name}: corrupted fatbin entry at {pos:#x} ({problem})")
    ident = ""
    if ident_len:
        start = pos + ident_offset
        ident = bytes(buf[start : start + ident_len]).rstrip(b"\0").decode("utf-8", "replace")
    return Entry(
        kind, pos, header_size, payload_size, compressed_size, minor, major, arch, flags,
        uncompressed_size, ident, options_offset,
    )  # fmt: skip


def options(buf: Buffer, entry: Entry, name: str) -> tuple[str, bytes]:
    """The entry's option string (ptxas / nvvm options) and, for sm_100+ cubins, ``.nv.compat``."""
    if not entry.options_offset:
        return "", b""
    header = bytes(buf[entry.offset : entry.offset + entry.header_size])
    data_off, length = _OPTIONS.unpack_from(header, entry.options_offset)
    if length and (data_off == 0 or data_off + length > len(header)):
        raise BadInputError(f"{name}: corrupted fatbin entry at {entry.offset:#x} (options)")
    if entry.kind == KIND_ELF:
        # An empty option string (one NUL), then a copy of the cubin's .nv.compat.
        return "", header[data_off + 1 : data_off + 1 + length]
    return header[data_off : data_off + length].rstrip(b"\0").decode("utf-8", "replace"), b""


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

    decode = _lz4_function()
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
def _lz4_function() -> Any:  # noqa: ANN401  (a ctypes foreign function)
    """``LZ4_decompress_safe`` from the lz4 package's own extension (which exports it), else
    from the system's liblz4 (looked for only then: ctypes asks ``ldconfig``); None when
    neither is there."""
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
