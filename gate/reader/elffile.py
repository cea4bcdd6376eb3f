"""A minimal, bounds-checked ELF reader over a buffer: header, sections, symbols, notes.

Built on ``struct`` so it can read a host library through ``mmap`` without copying it,
and a cubin straight out of a decompressed buffer: an ELF file is ``(buffer, base,
size)``, where ``buffer`` is ``bytes`` or an ``mmap`` and ``base`` the offset of the
file inside it (an archive member, a cubin inside a fatbin). Every read is checked
against ``base + size``; anything out of range raises BadInputError naming the file.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from gate.errors import BadInputError

Buffer = bytes | bytearray | mmap.mmap

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
SHT_SYMTAB = 2
SHT_NOTE = 7
SHT_NOBITS = 8
SHF_EXECINSTR = 0x4
STT_FUNC = 2

# e_machine values and the names `readelf -h` / the evidence use for them.
MACHINES = {
    3: "x86",
    8: "MIPS",
    20: "PowerPC",
    21: "PowerPC64",
    22: "S/390",
    40: "ARM",
    62: "x86-64",
    183: "AArch64",
    190: "NVIDIA CUDA",
    243: "RISC-V",
}

# (ELF class, little endian) -> header, section header and symbol layouts.
_LAYOUTS = {
    (64, True): ("<HHIQQQIHHHHHH", "<IIQQQQIIQQ", "<IBBHQQ"),
    (64, False): (">HHIQQQIHHHHHH", ">IIQQQQIIQQ", ">IBBHQQ"),
    (32, True): ("<HHIIIIIHHHHHH", "<IIIIIIIIII", "<IIIBBH"),
    (32, False): (">HHIIIIIHHHHHH", ">IIIIIIIIII", ">IIIBBH"),
}
_MAX_SECTIONS = 1 << 20


@dataclass(frozen=True, slots=True)
class Section:
    """One section header; ``offset`` is relative to the ELF file's start."""

    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True, slots=True)
class Symbol:
    """One symbol table entry."""

    name: str
    value: int
    size: int
    info: int
    other: int
    shndx: int

    @property
    def type(self) -> int:
        """STT_* value (STT_FUNC is 2)."""
        return self.info & 0xF


class ElfFile:
    """An ELF file inside ``buf`` at ``base``, ``size`` bytes long (default: to the end)."""

    def __init__(self, buf: Buffer, name: str, base: int = 0, size: int | None = None) -> None:
        self.buf = buf
        self.name = name
        self.base = base
        self.size = len(buf) - base if size is None else size
        if self.size < 52 or buf[base : base + 4] != ELF_MAGIC:
            raise BadInputError(f"{name}: not an ELF file (no ELF header)")
        ident = buf[base : base + 16]
        if ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise BadInputError(f"{name}: corrupted ELF header (class {ident[4]}, data {ident[5]})")
        self.elf_class = 32 if ident[4] == 1 else 64
        self.little_endian = ident[5] == 1
        self.os_abi = ident[7]
        self.abi_version = ident[8]
        header, shdr, sym = _LAYOUTS[(self.elf_class, self.little_endian)]
        self._shdr = struct.Struct(shdr)
        self._sym = struct.Struct(sym)
        fields = self._unpack(struct.Struct(header), 16, "ELF header")
        (self.type, self.machine, _, self.entry, _, self.shoff, self.flags, _, _, _) = fields[:10]
        self.shentsize, self.shnum, self.shstrndx = fields[10:13]
        self._sections: tuple[Section, ...] | None = None
        self._headers: list[tuple[int, ...]] | None = None
        self._table: bytes | None = None
        self._names: bytes | None = None

    @property
    def machine_name(self) -> str:
        """``x86-64``, ``AArch64``, ... or ``machine 1234`` when unknown."""
        return MACHINES.get(self.machine, f"machine {self.machine}")

    def _unpack(self, layout: struct.Struct, offset: int, what: str) -> tuple[int, ...]:
        if offset < 0 or offset + layout.size > self.size:
            raise BadInputError(f"{self.name}: truncated {what} at offset {offset:#x}")
        return layout.unpack_from(self.buf, self.base + offset)

    @property
    def sections(self) -> tuple[Section, ...]:
        """Every section header, in index order, with its name."""
        if self._sections is None:
            self._sections = self._read_sections()
        return self._sections

    def headers(self) -> list[tuple[int, ...]]:
        """Raw section headers (name offset, type, flags, addr, offset, size, link, info, ...)."""
        if self._headers is None:
            self._headers = self._read_headers()
        return self._headers

    def headers_of_type(self, types: frozenset[int]) -> list[tuple[int, tuple[int, ...]]]:
        """``(index, raw header)`` of the sections whose type is in ``types``, in order.

        For a 64-bit little-endian file the candidates are picked in C (a strided slice
        of the type fields' low bytes, translated and searched) and only those unpacked:
        a cubin has hundreds of sections and its reader wants two or three.
        """
        if self._headers is not None or self.elf_class != 64 or not self.little_endian:
            return [(i, h) for i, h in enumerate(self.headers()) if h[1] in types]
        table = self._header_table()
        width = self._shdr.size
        flags = _low_byte_table(types)
        candidates = table[4::width].translate(flags)
        out = []
        i = candidates.find(1)
        while i >= 0:
            header = self._shdr.unpack_from(table, i * width)
            if header[1] in types:
                out.append((i, header))
            i = candidates.find(1, i + 1)
        return out

    def header(self, index: int) -> tuple[int, ...]:
        """The raw header of section ``index``; BadInputError when there is none."""
        if self._headers is not None:
            if not 0 <= index < len(self._headers):
                raise BadInputError(f"{self.name}: no section {index}")
            return self._headers[index]
        table = self._header_table()
        if not 0 <= index < len(table) // self._shdr.size:
            raise BadInputError(f"{self.name}: no section {index}")
        return self._shdr.unpack_from(table, index * self._shdr.size)

    def _header_table(self) -> bytes:
        """The section header table's bytes (validated as _read_headers does), kept."""
        if self._table is None:
            count = self._section_count()
            start = self.base + self.shoff
            self._table = bytes(self.buf[start : start + count * self._shdr.size])
        return self._table

    def _section_count(self) -> int:
        if self.shoff == 0:
            return 0
        count = self.shnum
        if count == 0:  # more than SHN_LORESERVE sections: the count is in section 0
            count = self._unpack(self._shdr, self.shoff, "section header")[5]
        if self.shentsize != self._shdr.size or count > _MAX_SECTIONS:
            raise BadInputError(f"{self.name}: corrupted ELF header (section table)")
        if self.shoff + count * self._shdr.size > self.size:
            raise BadInputError(f"{self.name}: truncated (section table past the end of file)")
        return int(count)

    def _read_headers(self) -> list[tuple[int, ...]]:
        return list(self._shdr.iter_unpack(self._header_table()))

    def _read_sections(self) -> tuple[Section, ...]:
        raw = self.headers()
        names = b""
        strndx = self.shstrndx if self.shstrndx != 0xFFFF and raw else (raw[0][6] if raw else 0)
        if 0 < strndx < len(raw):
            s = raw[strndx]
            names = self._bytes(s[4], s[5], "section names")
        out = []
        for i, (nm, typ, flags, addr, off, size, link, info, _, entsize) in enumerate(raw):
            out.append(
                Section(i, _cstr(names, nm), typ, flags, addr, off, size, link, info, entsize)
            )
        return tuple(out)

    def section_name(self, index: int) -> str:
        """The name of section ``index`` without building every Section record."""
        if self._sections is not None:
            return self._sections[index].name
        raw = self.headers()
        strndx = self.shstrndx if self.shstrndx != 0xFFFF else raw[0][6]
        if not 0 < strndx < len(raw) or not 0 <= index < len(raw):
            return ""
        if self._names is None:  # kept: a cubin's .shstrtab can be hundreds of kB
            s = raw[strndx]
            self._names = self._bytes(s[4], s[5], "section names")
        return _cstr(self._names, raw[index][0])

    def _bytes(self, offset: int, size: int, what: str) -> bytes:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise BadInputError(f"{self.name}: truncated ({what} past the end of file)")
        return bytes(self.buf[self.base + offset : self.base + offset + size])

    def section(self, name: str) -> Section | None:
        """The first section called ``name``, or None."""
        return next((s for s in self.sections if s.name == name), None)

    def span(self, section: Section) -> tuple[int, int]:
        """Absolute ``(start, end)`` of a section's bytes in ``buf``, bounds-checked."""
        if section.type == SHT_NOBITS:
            return self.base, self.base
        return self.span_of(section.offset, section.size, f"section {section.name}")

    def span_of(self, offset: int, size: int, what: str) -> tuple[int, int]:
        """Absolute ``(start, end)`` of ``size`` bytes at file offset ``offset``, bounds-checked."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise BadInputError(
                f"{self.name}: {what} ({size} bytes at {offset:#x}) runs past the end of the file"
            )
        start = self.base + offset
        return start, start + size

    def data(self, section: Section) -> bytes:
        """A copy of a section's bytes."""
        start, end = self.span(section)
        return bytes(self.buf[start:end])

    def symbols(self, section: Section) -> Iterator[Symbol]:
        """The entries of a SYMTAB/DYNSYM section, names resolved through its string table."""
        if section.entsize != self._sym.size:
            raise BadInputError(f"{self.name}: corrupted symbol table {section.name}")
        if not 0 < section.link < len(self.sections):
            raise BadInputError(f"{self.name}: symbol table {section.name} has no string table")
        strings = self.data(self.sections[section.link])
        start, end = self.span(section)
        for off in range(start, end - self._sym.size + 1, self._sym.size):
            if self.elf_class == 64:
                name, info, other, shndx, value, size = self._sym.unpack_from(self.buf, off)
            else:
                name, value, size, info, other, shndx = self._sym.unpack_from(self.buf, off)
            yield Symbol(_cstr(strings, name), value, size, info, other, shndx)

    def notes(self, offset: int, size: int, what: str) -> Iterator[tuple[str, int, bytes]]:
        """``(owner, type, descriptor)`` of each note in the NOTE section at ``offset``."""
        start, end = self.span_of(offset, size, what)
        data = bytes(self.buf[start:end])
        endian = "<" if self.little_endian else ">"
        pos = 0
        while pos + 12 <= len(data):
            namesz, descsz, kind = struct.unpack_from(f"{endian}III", data, pos)
            name_end = pos + 12 + namesz
            desc_start = name_end + (-namesz % 4)
            desc_end = desc_start + descsz
            if desc_end > len(data):
                raise BadInputError(f"{self.name}: corrupted note in {what}")
            yield _cstr(data[pos + 12 : name_end], 0), kind, data[desc_start:desc_end]
            pos = desc_end + (-descsz % 4)


@cache
def _low_byte_table(types: frozenset[int]) -> bytes:
    """A translate table mapping a section type's low byte to 1 when some type has it."""
    lows = {t & 0xFF for t in types}
    return bytes(1 if b in lows else 0 for b in range(256))


def _cstr(table: bytes, offset: int) -> str:
    """The NUL-terminated string at ``offset`` in ``table`` ('' when out of range)."""
    if offset >= len(table):
        return ""
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", errors="replace")
