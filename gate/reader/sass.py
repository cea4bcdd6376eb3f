"""SASS instructions as gate.rules.stubs sees them: from a cubin's bytes, or from disassembly.

From bytes (sm_70 and later: one 128-bit instruction, little-endian, per 16 bytes): the
opcode is the low 12 bits of the first 64-bit word and the guard predicate the next 4
(``0x7``: PT, unpredicated). The few encodings the rule needs, as ``cuobjdump -sass``
prints them for nvcc 13.0 builds (sm_75, sm_80, sm_90, sm_100, sm_121)::

    LDC R1, c[0x0][0x37c] ;   /* 0x0000df00ff017b82 */   opcode 0xb82, destination R1
    MOV R1, c[0x0][0x28] ;    /* 0x00000a0000017a02 */   opcode 0xa02 (sm_75/sm_80)
    BPT.TRAP 0x1 ;            /* 0x000000040000795c */   opcode 0x95c, mode 3 in bits 84-87
                              /* 0x000fea0000300000 */
    EXIT ;                    /* 0x000000000000794d */   opcode 0x94d
    NOP;                      /* 0x0000000000007918 */   opcode 0x918

Older cubins (sm_50 to sm_62) pack three 64-bit instructions behind a control word:
their bodies are not read (:func:`readable`). tests/test_stubs.py holds every one of
these against nvdisasm's and cuobjdump's own disassembly.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

from gate.rules.stubs import Instruction, Op

FIRST_READ_ARCH = 70  # the first SASS generation with 128-bit instructions
# A stub or empty kernel is 256 bytes with its padding (512 under -G); a body longer
# than this is code, and is not read at all: libraries hold hundreds of thousands.
MAX_BODY = 512
_WORDS = struct.Struct("<QQ")
_PT = 0x7
_R1 = 0x01
_BPT_TRAP_MODE = 0x3
_OPCODES = {0x918: Op.NOP, 0x94D: Op.EXIT}
_STACK_LOADS = frozenset({0xB82, 0xA02})  # LDC R, c[][]; MOV R, c[][]
_BPT = 0x95C
# One instruction line of cuobjdump -sass or nvdisasm: ``/*0010*/  @!P0 BPT.TRAP 0x1 ;``.
_TEXT_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_STACK_TEXT = re.compile(r"^R1,\s*c\[0x0\]\[")


def readable(arch: int) -> bool:
    """Whether bodies of SASS for ``sm_<arch>`` can be read from their bytes."""
    return arch >= FIRST_READ_ARCH


def decode(data: bytes | memoryview) -> Iterator[Instruction]:
    """The instructions of a 128-bit-encoded body, in order (a partial last one dropped)."""
    for at in range(0, len(data) - len(data) % 16, 16):
        lo, hi = _WORDS.unpack_from(data, at)
        yield Instruction(_op(lo, hi), predicated=(lo >> 12) & 0xF != _PT)


def _op(lo: int, hi: int) -> Op:
    opcode = lo & 0xFFF
    if opcode in _STACK_LOADS:
        return Op.PROLOGUE if (lo >> 16) & 0xFF == _R1 else Op.OTHER
    if opcode == _BPT:
        return Op.TRAP if (hi >> 20) & 0xF == _BPT_TRAP_MODE else Op.OTHER
    return _OPCODES.get(opcode, Op.OTHER)


def parse_line(line: str) -> Instruction | None:
    """One disassembled instruction (cuobjdump -sass or nvdisasm), or None for other lines."""
    match = _TEXT_LINE.match(line)
    if match is None:
        return None
    guard, mnemonic, operands = match.groups()
    predicated = guard is not None
    if mnemonic in ("LDC", "MOV") and _STACK_TEXT.match(operands.strip()):
        return Instruction(Op.PROLOGUE, predicated)
    op = {"NOP": Op.NOP, "EXIT": Op.EXIT, "BPT.TRAP": Op.TRAP}.get(mnemonic, Op.OTHER)
    return Instruction(op, predicated)
