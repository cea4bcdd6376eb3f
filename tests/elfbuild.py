"""Tiny ELF files built byte by byte, for the reader's tests: a section holding any payload."""

from __future__ import annotations

import struct


def elf_with_section(name: bytes, flags: int, payload: bytes) -> bytes:
    """A minimal x86-64 ELF shared object: null, ``name`` (PROGBITS) and .shstrtab."""
    names = b"\0" + name + b"\0.shstrtab\0"
    data_off = 64
    data = payload + bytes(-len(payload) % 8)
    names_off = data_off + len(data)
    shoff = names_off + len(names) + (-(names_off + len(names)) % 8)
    header = struct.pack(
        "<4sBBBBB7xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, 3, 62, 1, 0, 0, shoff, 0,
        64, 0, 0, 64, 3, 2,
    )  # fmt: skip
    shdr = struct.Struct("<IIQQQQIIQQ")
    sections = shdr.pack(*[0] * 10)
    sections += shdr.pack(1, 1, flags, 0x400000, data_off, len(payload), 0, 0, 16, 0)
    sections += shdr.pack(2 + len(name), 3, 0, 0, names_off, len(names), 0, 0, 1, 0)
    body = header + data + names
    return body + bytes(shoff - len(body)) + sections
