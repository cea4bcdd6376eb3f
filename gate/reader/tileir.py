"""Tile IR bytecode (cuTile's portable device code): its version and the kernels it holds.

The layout, from NVIDIA's Tile IR specification ("Binary Format") and the reader in
NVIDIA/cuda-tile (``lib/Bytecode/Reader/BytecodeReader.cpp``); all integers little-endian,
varints LEB128 (7 bits a byte, high bit: more follow):

1. Header: magic ``\\x7fTileIR\\0``, u8 major, u8 minor, u16 tag (13.4 is 0x0D, 0x04).
2. Sections until an end byte 0x00: u8 id (bit 7: aligned), varint length, and when
   aligned a varint alignment, then padding to it (counted from the start of the bytecode).
3. The string section (id 1): varint count, padding to 4, u32 offsets, the string bytes.
4. The function section (id 2): varint count, then per function varint name (a string
   index), varint signature, u8 flags (0x2 a kernel, 0x4 optimization hints follow),
   varint location, [a self-contained attribute: the hints], varint body length, body.
5. The type section (id 5): varint count, padding to 4, u32 offsets, each type a varint
   tag first (I1 = 0; the float types' tags give the width of a float attribute).

Only what names the kernels is read; a function section this reader cannot walk to its
end keeps the kernels read so far, and says so (``complete`` False).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass

from gate.errors import BadInputError
from gate.rules.targets import Version

MAGIC = b"\x7fTileIR\x00"
_HEADER = struct.Struct("<8sBBH")
_STRINGS, _FUNCTIONS, _TYPES = 1, 2, 5
_KERNEL, _HINTS = 0x02, 0x04
# Attribute tags (BytecodeEnums.h AttributeTag) and the float types' widths by type tag.
_INTEGER, _FLOAT, _BOOL, _TYPE, _STRING, _ARRAY, _DENSE, _DIVBY, _SAME, _DICT, _HINT_ATTR = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
)  # fmt: skip
_BOUNDED = 12
_I1 = 0
_FLOAT_BITS = {5: 16, 6: 16, 7: 32, 8: 19, 9: 64, 10: 8, 11: 8}
_MAX_DEPTH = 32


@dataclass(frozen=True)
class TileIR:
    """What one Tile IR module holds: its bytecode version and kernel names."""

    version: Version
    kernels: tuple[str, ...]
    complete: bool = True  # False: the function table was read only part of the way


def version_of(data: bytes) -> Version | None:
    """The bytecode version, or None when ``data`` does not start as Tile IR does."""
    if len(data) < _HEADER.size or not data.startswith(MAGIC):
        return None
    _, major, minor, _ = _HEADER.unpack_from(data)
    return Version(major, minor)


class _StopError(Exception):
    """The bytes end, or hold what this reader does not follow."""


class _Cursor:
    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data, self.pos = data, pos
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise _StopError("unexpected end")
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise _StopError("varint too long")

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise _StopError("past the end")
        self.pos += n

    def align(self, to: int, base: int = 0) -> None:
        self.skip((to - (self.pos - base) % to) % to)


def read(data: bytes, where: str) -> TileIR:
    """The version and kernels of the Tile IR bytecode ``data``; BadInputError when its
    header or sections do not hold together."""
    version = version_of(data)
    if version is None:
        raise BadInputError(f"{where}: not Tile IR bytecode (no {MAGIC!r} magic)")
    try:
        sections = _sections(data)
    except _StopError as e:
        raise BadInputError(f"{where}: corrupted Tile IR bytecode ({e})") from e
    strings = _table(data, sections.get(_STRINGS), where, "string")
    types = _table(data, sections.get(_TYPES), where, "type")
    functions = sections.get(_FUNCTIONS)
    if functions is None:
        return TileIR(version, ())
    kernels: list[str] = []
    complete = _kernels(data, functions, strings, types, kernels)
    return TileIR(version, tuple(kernels), complete)


def _sections(data: bytes) -> dict[int, tuple[int, int]]:
    """Each section's (start, end) by id, up to the end marker."""
    at = _Cursor(data, _HEADER.size)
    found: dict[int, tuple[int, int]] = {}
    while True:
        head = at.byte()
        ident, aligned = head & 0x7F, head & 0x80
        if ident == 0:
            return found
        length = at.varint()
        if aligned:
            alignment = at.varint()
            if alignment == 0 or alignment & (alignment - 1):
                raise _StopError(f"alignment {alignment}")
            at.align(alignment)
        start = at.pos
        at.skip(length)
        found.setdefault(ident, (start, at.pos))


def _table(data: bytes, span: tuple[int, int] | None, where: str, what: str) -> list[bytes]:
    """A string or type section's entries, as bytes."""
    if span is None:
        return []
    start, end = span
    at = _Cursor(data, start, end)
    try:
        offsets = _offsets(at, start, end, what)
    except _StopError as e:
        raise BadInputError(f"{where}: corrupted Tile IR {what} table ({e})") from e
    base = at.pos
    bounds = (*offsets, end - base)
    if any(a > b for a, b in itertools.pairwise(bounds)):
        raise BadInputError(f"{where}: corrupted Tile IR {what} table (offsets out of order)")
    return [data[base + a : base + b] for a, b in itertools.pairwise(bounds)]


def _offsets(at: _Cursor, start: int, end: int, what: str) -> tuple[int, ...]:
    """A table's count, padding and u32 offsets, the cursor left at its data."""
    count = at.varint()
    if count == 0:
        return ()
    if count > (end - at.pos) // 4:
        raise _StopError(f"{count} {what}s in {end - start} bytes")
    at.align(4, start)
    offsets = struct.unpack_from(f"<{count}I", at.data, at.pos)
    at.skip(4 * count)
    return offsets


def _kernels(
    data: bytes, span: tuple[int, int], strings: list[bytes], types: list[bytes], out: list[str]
) -> bool:
    """Add the kernel names of the function section to ``out``; False where it stopped short."""
    at = _Cursor(data, *span)
    try:
        for _ in range(at.varint()):
            name = at.varint()
            at.varint()  # signature
            flags = at.byte()
            at.varint()  # location
            if flags & _KERNEL and flags & _HINTS:
                _attribute(at, types, 0)
            at.skip(at.varint())  # the body
            if flags & _KERNEL:
                if name >= len(strings):
                    return False
                out.append(strings[name].decode("utf-8", "replace"))
    except _StopError:
        return False
    return True


def _attribute(at: _Cursor, types: list[bytes], depth: int) -> None:
    """Step over one self-contained attribute (its tag first)."""
    if depth > _MAX_DEPTH:
        raise _StopError("attributes nested too deep")
    tag = at.varint()
    if tag in (_ARRAY, _DICT, _HINT_ATTR):
        keyed = tag != _ARRAY  # a dictionary's (the hints' too) entries have a key first
        for _ in range(at.varint()):
            if keyed:
                at.varint()
            _attribute(at, types, depth + 1)
        return
    step = _SCALARS.get(tag)
    if step is None:
        raise _StopError(f"attribute tag {tag}")
    step(at, types)


def _number(at: _Cursor, types: list[bytes], *, integer: bool) -> None:
    bits = _type_bits(types, at.varint(), integer=integer)
    _ = at.byte() if bits <= 8 else at.varint()


def _flagged(at: _Cursor, *, lead: bool) -> None:
    """A DivBy (a varint first) or Bounded attribute: a flags byte, then a varint per bit."""
    if lead:
        at.varint()
    flags = at.byte()
    for bit in (0x1, 0x2):
        _ = at.varint() if flags & bit else None


def _dense(at: _Cursor) -> None:
    at.varint()  # its type
    for _ in range(at.varint()):
        at.varint()


_SCALARS: dict[int, Callable[[_Cursor, list[bytes]], object]] = {
    _INTEGER: lambda at, types: _number(at, types, integer=True),
    _FLOAT: lambda at, types: _number(at, types, integer=False),
    _BOOL: lambda at, _: at.skip(1),
    _TYPE: lambda at, _: at.varint(),
    _STRING: lambda at, _: at.varint(),
    _DENSE: lambda at, _: _dense(at),
    _DIVBY: lambda at, _: _flagged(at, lead=True),
    _SAME: lambda at, _: at.skip(8 * at.varint()),
    _BOUNDED: lambda at, _: _flagged(at, lead=False),
}


def _type_bits(types: list[bytes], index: int, *, integer: bool) -> int:
    """The width that decides how an integer or float attribute of type ``index`` is stored
    (an i1 as a byte, wider integers as a varint; a float by its width)."""
    if index >= len(types) or not types[index]:
        raise _StopError(f"type {index}")
    tag = types[index][0]
    if integer:
        return 1 if tag == _I1 else 64
    bits = _FLOAT_BITS.get(tag)
    if bits is None:
        raise _StopError(f"float type tag {tag}")
    return bits
