"""Fat binary containers and their entries, read from a buffer (see FATBIN.md for the format).

A container is a 16-byte header (magic 0xBA55ED50, version 1, header size, ``fat_size``)
followed by ``fat_size`` bytes of entries; each entry is a header (64 bytes plus an
ident string and an options record) followed by its payload: PTX text, an ELF cubin or
an NVVM / LTO IR blob, raw or compressed (LZ4 block or zstd frame).

:func:`parse_containers` reads a section that must hold nothing but containers
(``.nv_fatbin``); :func:`scan_containers` finds containers anywhere else by their magic,
keeping only candidates whose every size checks out. Reading headers never decompresses;
:func:`payload` does, refusing sizes past :data:`MAX_UNCOMPRESSED`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gate.elffile import Buffer
from gate.errors import BadInputError

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

# No real cubin comes near this; a larger claim is a corrupted header or a bomb.
MAX_UNCOMPRESSED = 1 << 28
# LZ4 cannot expand more than 255x (a match token covers at most 255 bytes per byte).
_LZ4_MAX_RATIO = 255
_MAX_ENTRY_HEADER = 4096

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_OPTIONS = struct.Struct("<II")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry's header; ``offset`` is where the entry starts in the buffer."""

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
    options: str
    compat: bytes

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
    chunk: int = 16 << 20,
    done: Callable[[int, int], None] | None = None,
) -> Iterator[Container]:
    """Containers anywhere in ``buf[start:end]``; candidates that do not validate are skipped.

    The range is searched ``chunk`` bytes at a time; ``done(lo, hi)`` is told each
    finished range so the caller can drop those pages (keeps a large scan's memory flat).
    """
    lo = start
    while lo < end:
        hi = min(lo + chunk, end)
        # A magic straddling the chunk boundary is found from this chunk.
        search_end = min(hi + len(CONTAINER_PREFIX) - 1, end)
        pos = buf.find(CONTAINER_PREFIX, lo, search_end)
        while pos >= 0:
            try:
                container = parse_container(buf, pos, end, name)
            except BadInputError:
                pos = buf.find(CONTAINER_PREFIX, pos + 4, search_end)
                continue
            yield container
            after = container.offset + container.size
            hi = max(hi, after)
            pos = buf.find(CONTAINER_PREFIX, after, search_end) if after < search_end else -1
        if done is not None:
            done(lo, hi)
        lo = hi


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
    while cursor < stop:
        entry = _parse_entry(buf, cursor, stop, name)
        entries.append(entry)
        cursor = entry.payload_offset + entry.payload_size
    return Container(pos, header_size + fat_size, tuple(entries))


def _parse_entry(buf: Buffer, pos: int, end: int, name: str) -> Entry:
    where = f"fatbin entry at {pos:#x}"
    if pos + _ENTRY.size > end:
        raise BadInputError(f"{name}: truncated {where}")
    fields = _ENTRY.unpack_from(buf, pos)
    kind, _, header_size, payload_size, compressed_size, options_offset = fields[:6]
    minor, major, arch, ident_offset, ident_len, flags, _, uncompressed_size = fields[6:]
    if kind not in (KIND_PTX, KIND_ELF, KIND_NVVM):
        raise BadInputError(f"{name}: corrupted {where} (unknown kind {kind})")
    if not _ENTRY.size <= header_size <= _MAX_ENTRY_HEADER:
        raise BadInputError(f"{name}: corrupted {where} (header size {header_size})")
    if pos + header_size + payload_size > end:
        raise BadInputError(f"{name}: {where} claims {payload_size} bytes past its container")
    compressed = flags & (FLAG_LZ4 | FLAG_ZSTD)
    if compressed and not 0 < compressed_size <= payload_size:
        raise BadInputError(
            f"{name}: corrupted {where} (compressed size {compressed_size} "
            f"for a {payload_size}-byte payload)"
        )
    header = bytes(buf[pos : pos + header_size])
    ident = _field(header, ident_offset, ident_len, name, where).decode("utf-8", "replace")
    options, compat = "", b""
    if options_offset:
        if options_offset + _OPTIONS.size > header_size:
            raise BadInputError(f"{name}: corrupted {where} (options record out of range)")
        data_off, length = _OPTIONS.unpack_from(header, options_offset)
        if kind == KIND_ELF:
            # An empty option string (one NUL), then a copy of the cubin's .nv.compat.
            compat = _field(header, data_off + 1, length, name, where)
        else:
            options = (
                _field(header, data_off, length, name, where)
                .rstrip(b"\0")
                .decode("utf-8", "replace")
            )
    return Entry(
        kind, pos, header_size, payload_size, compressed_size, minor, major, arch, flags,
        uncompressed_size, ident.rstrip("\0"), options, compat,
    )  # fmt: skip


def _field(header: bytes, offset: int, length: int, name: str, where: str) -> bytes:
    if length == 0:
        return b""
    if offset + length > len(header) or offset == 0:
        raise BadInputError(f"{name}: corrupted {where} (string field out of range)")
    return header[offset : offset + length]


def payload(buf: Buffer, entry: Entry, name: str) -> tuple[Buffer, int, int]:
    """The entry's payload as ``(buffer, start, size)``: in place when raw, else decompressed."""
    start = entry.payload_offset
    if entry.compression == "none":
        return buf, start, entry.payload_size
    expected = entry.uncompressed_size
    where = f"fatbin entry at {entry.offset:#x}"
    if not 0 < expected <= MAX_UNCOMPRESSED:
        raise BadInputError(
            f"{name}: {where} would decompress to {expected} bytes "
            f"(limit {MAX_UNCOMPRESSED}); refusing"
        )
    stored = bytes(buf[start : start + entry.compressed_size])
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


def _lz4(stored: bytes, expected: int, name: str, where: str) -> bytes:
    import lz4.block  # noqa: PLC0415  (only when an entry is LZ4-compressed)

    if expected > len(stored) * _LZ4_MAX_RATIO + 64:
        raise BadInputError(f"{name}: {where} claims an impossible LZ4 ratio; refusing")
    try:
        out: bytes = lz4.block.decompress(stored, uncompressed_size=expected)
    except lz4.block.LZ4BlockError as e:
        raise BadInputError(f"{name}: {where}: corrupted LZ4 data") from e
    return out


def _zstd(stored: bytes, expected: int, name: str, where: str) -> bytes:
    import zstandard  # noqa: PLC0415  (only when an entry is zstd-compressed)

    try:
        declared = zstandard.frame_content_size(stored)
        if declared not in (-1, expected):
            raise BadInputError(
                f"{name}: {where}: zstd frame declares {declared} bytes, header says {expected}"
            )
        return zstandard.ZstdDecompressor().decompress(stored, max_output_size=expected)
    except zstandard.ZstdError as e:
        raise BadInputError(f"{name}: {where}: corrupted zstd data ({e})") from e
