"""Fat binary containers and their entries, read from a buffer (see FATBIN.md for the format).

A container is a 16-byte header (magic 0xBA55ED50, version 1, header size, ``fat_size``)
followed by ``fat_size`` bytes of entries; each entry is a header (64 bytes plus an
ident string and an options record) followed by its payload: PTX text, an ELF cubin or
an NVVM / LTO IR blob, raw or compressed (LZ4 block or zstd frame).

:func:`parse_containers` reads a section that must hold nothing but containers
(``.nv_fatbin``); :func:`scan_containers` finds containers anywhere else by their magic,
keeping only candidates whose every size checks out (searched by the C library's
``memmem``: :mod:`gate.reader.memsearch`). Reading headers never decompresses:
:mod:`gate.reader.payloads` does, within the bounds of :class:`gate.reader.limits.Limits`.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from gate.errors import BadInputError
from gate.reader.elffile import Buffer
from gate.reader.limits import Limits
from gate.reader.memsearch import Finder, finder

CONTAINER_MAGIC = 0xBA55ED50
# Magic, version 1 and header size 16, as they sit in memory: what a scan looks for.
CONTAINER_PREFIX = struct.pack("<IHH", CONTAINER_MAGIC, 1, 16)
KIND_PTX = 1
KIND_ELF = 2
KIND_NVVM = 8
# Tile IR bytecode (cuTile), written by nvFatbin 13.4's nvFatbinAddTileIR: an 88-byte header,
# the bytecode version in the major field (0x0D04 for 13.4), arch field 80, zstd payload.
KIND_TILEIR = 128

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000  # 'a'
FLAG_FAMILY_SPECIFIC = 0x200000  # 'f'

# The default per-entry bound (gate.reader.limits): no real cubin comes near it.
MAX_UNCOMPRESSED = Limits().entry
# Bytes searched between two releases of the scanned pages: what a scan adds to the
# peak. 16 MB put 12-15 MB on every library past that size (libnvperf_host.so, 32 MB:
# 39 MB peak, 24 MB with 1 MB) and cost no measurable time less (one find per piece).
_SCAN_CHUNK = 1 << 20
_MAX_ENTRY_HEADER = 4096
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_OPTIONS = struct.Struct("<II")
_OPTIONS_SIZE = _OPTIONS.size
# Kinds this reader knows; any other is listed as unknown, never a reason to refuse a file.
KNOWN_KINDS = frozenset((KIND_PTX, KIND_ELF, KIND_NVVM, KIND_TILEIR))
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


def container_starts(
    buf: Buffer,
    lo: int,
    hi: int,
    end: int,
    name: str,
    *,
    done: Callable[[int, int], None] | None = None,
) -> array[int]:
    """Where a container that parses (every size checks out within ``buf[:end]``) starts in
    ``buf[lo:hi)``, ascending: each candidate :func:`scan_containers` would try there, each
    judged alone, so that the pieces of a range can be searched apart (gate.reader.decoding
    hands them to its workers) and :func:`containers_at` then keeps what a scan of the whole
    range keeps. ``done(lo, hi)`` is told once the piece is searched."""
    out = array("q")
    with finder(buf) as find:
        # A magic straddling ``hi`` is this piece's; the prefix cannot overlap itself, so
        # the next candidate is looked for one byte on.
        stop = min(hi + len(CONTAINER_PREFIX) - 1, end)
        pos = find(CONTAINER_PREFIX, lo, stop)
        while pos >= 0:
            try:
                parse_container(buf, pos, end, name)
            except BadInputError:
                pass
            else:
                out.append(pos)
            pos = find(CONTAINER_PREFIX, pos + 1, stop)
    if done is not None:
        done(lo, hi)
    return out


def containers_at(
    buf: Buffer,
    starts: Iterable[int],
    end: int,
    name: str,
    *,
    done: Callable[[int, int], None] | None = None,
) -> Iterator[Container]:
    """The containers a scan of a range ending at ``end`` finds (:func:`scan_containers`),
    from where containers that parse start in it (:func:`container_starts` of its pieces,
    in order): each one not inside the last one kept. ``done`` as parse_containers'."""
    after = -1
    for pos in starts:
        if pos < after:
            continue
        try:  # parsed once already, maybe by another process: the same bytes parse the same
            container = parse_container(buf, pos, end, name)
        except BadInputError:
            continue
        yield container
        after = container.offset + container.size
        if done is not None:
            done(container.offset, after)


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
    unpack, entry_size = _ENTRY.unpack_from, _ENTRY.size
    while cursor < stop:
        # The common case inline (thousands of entries per library); anything unusual
        # goes through _parse_entry, which names the problem.
        if cursor + entry_size <= stop:
            (kind, _, hsize, psize, csize, opts, minor, major, arch, ioff, ilen, flags, _,
             usize) = unpack(buf, cursor)  # fmt: skip
            after = cursor + hsize + psize
            if (
                entry_size <= hsize <= _MAX_ENTRY_HEADER
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
    # A kind this reader does not know is no problem (it is listed as such): only sizes
    # that do not hold together are.
    problem = None
    if not _ENTRY.size <= header_size <= _MAX_ENTRY_HEADER:
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
