"""The trap-stub rule (gate.rules.stubs) and the SASS decoder it reads (gate.reader.sass).

Table-driven: each row is one decision a mutant of the rule would flip. The encodings
are nvcc 13.0's, copied from ``cuobjdump -sass`` of the builds in tests/test_stubs.py.
"""

from __future__ import annotations

import struct

import pytest

from gate.reader import sass
from gate.rules.causes import RuntimeFailure
from gate.rules.causes import classify as classify_log
from gate.rules.stubs import Body, Instruction, Op, Severity, classify, severity

pytestmark = pytest.mark.unit

LDC_R1 = (0x0000DF00FF017B82, 0x000FE20000000800)  # LDC R1, c[0x0][0x37c]   (sm_121)
MOV_R1 = (0x00000A0000017A02, 0x000FC60000000F00)  # MOV R1, c[0x0][0x28]    (sm_75)
LDC_R2 = (0x00008400FF027B82, 0x000E220000000A00)  # LDC.64 R2, c[0x0][0x210] (sm_90)
BPT_TRAP = (0x000000040000795C, 0x000FEA0000300000)  # BPT.TRAP 0x1
EXIT = (0x000000000000794D, 0x000FEA0003800000)  # EXIT
BRA_SELF = (0xFFFFFFFC00FC7947, 0x000FC0000383FFFF)  # BRA 0x20 (itself)
NOP = (0x0000000000007918, 0x000FC00000000000)  # NOP
P0_BRA = (0x0000000000040947, 0x000FEA0003800000)  # @P0 BRA 0x70
S2R = (0x0000000000057919, 0x000E220000002100)  # S2R R5, SR_TID.X


def body(*words: tuple[int, int]) -> bytes:
    return b"".join(struct.pack("<QQ", lo, hi) for lo, hi in words)


def ins(op: Op, *, predicated: bool = False) -> Instruction:
    return Instruction(op, predicated)


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ((LDC_R1, BPT_TRAP, BRA_SELF, NOP, NOP), Body.TRAP),  # #else __trap(); sm_90+
        ((MOV_R1, BPT_TRAP, BRA_SELF, NOP), Body.TRAP),  # sm_75/sm_80 prologue
        ((LDC_R1, BPT_TRAP, EXIT, BRA_SELF), Body.TRAP),  # __brkpt()
        ((LDC_R1, EXIT, BRA_SELF, NOP), Body.EMPTY),  # guard without #else
        ((NOP, LDC_R1, NOP, EXIT), Body.EMPTY),  # padding is skipped anywhere before
        ((LDC_R1, S2R, EXIT), Body.CODE),  # real work first
        ((LDC_R2, BPT_TRAP), Body.CODE),  # LDC to another register is no prologue
        ((LDC_R1, P0_BRA, BPT_TRAP, EXIT), Body.CODE),  # if (x) __trap(); then code
        ((LDC_R1,), Body.CODE),  # a body that ends before deciding
        ((), Body.CODE),
    ],
)
def test_a_body_is_classified_from_its_bytes(
    words: tuple[tuple[int, int], ...], expected: Body
) -> None:
    assert classify(sass.decode(body(*words))) is expected


@pytest.mark.parametrize(
    ("word", "op", "predicated"),
    [
        (LDC_R1, Op.PROLOGUE, False),
        (MOV_R1, Op.PROLOGUE, False),
        (LDC_R2, Op.OTHER, False),
        (BPT_TRAP, Op.TRAP, False),
        ((BPT_TRAP[0], 0x000FEA0000100000), Op.OTHER, False),  # another BPT mode
        (EXIT, Op.EXIT, False),
        ((EXIT[0] & ~0xF000, EXIT[1]), Op.EXIT, True),  # @P0 EXIT
        (NOP, Op.NOP, False),
        (BRA_SELF, Op.OTHER, False),
        (P0_BRA, Op.OTHER, True),
        (S2R, Op.OTHER, False),
    ],
)
def test_each_encoding_decodes_to_its_class(
    word: tuple[int, int], op: Op, predicated: bool
) -> None:
    assert list(sass.decode(body(word))) == [Instruction(op, predicated)]


def test_a_partial_last_instruction_is_dropped() -> None:
    assert list(sass.decode(body(EXIT) + b"\x4d\x79")) == [Instruction(Op.EXIT)]


@pytest.mark.parametrize(
    ("instructions", "expected"),
    [
        ([ins(Op.TRAP)], Body.TRAP),
        ([ins(Op.TRAP, predicated=True)], Body.CODE),
        ([ins(Op.EXIT, predicated=True), ins(Op.TRAP)], Body.CODE),
        ([ins(Op.PROLOGUE, predicated=True), ins(Op.EXIT)], Body.EMPTY),
        ([ins(Op.NOP, predicated=True), ins(Op.TRAP)], Body.TRAP),
        ([ins(Op.OTHER), ins(Op.TRAP)], Body.CODE),
        ([ins(Op.EXIT), ins(Op.OTHER)], Body.EMPTY),  # nothing after EXIT is reachable
    ],
)
def test_the_first_instruction_past_the_prologue_decides(
    instructions: list[Instruction], expected: Body
) -> None:
    assert classify(instructions) is expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("        /*0000*/                   LDC R1, c[0x0][0x37c] ;", ins(Op.PROLOGUE)),
        (
            "        /*0000*/                   MOV R1, c[0x0][0x28] ;  /* 0x00000a0000017a02 */",
            ins(Op.PROLOGUE),
        ),
        ("        /*0020*/                   LDC.64 R2, c[0x0][0x380] ;", ins(Op.OTHER)),
        ("        /*0010*/                   BPT.TRAP 0x1 ;", ins(Op.TRAP)),
        ("        /*0060*/               @!P0 BPT.TRAP 0x1 ;", ins(Op.TRAP, predicated=True)),
        ("        /*0010*/                   EXIT ;", ins(Op.EXIT)),
        ("        /*0050*/               @P0 BRA 0x70 ;", ins(Op.OTHER, predicated=True)),
        ("        /*0040*/                   NOP;", ins(Op.NOP)),
        ("        /*0020*/                   BRA `(.L_x_4);", ins(Op.OTHER)),
    ],
)
def test_disassembly_lines_read_as_the_bytes_do(line: str, expected: Instruction) -> None:
    assert sass.parse_line(line) == expected


@pytest.mark.parametrize("line", ["\t\tFunction : _Z1kPf", ".L_x_4:", "  /* 0x000fc00000000000 */"])
def test_other_lines_are_no_instruction(line: str) -> None:
    assert sass.parse_line(line) is None


@pytest.mark.parametrize(("arch", "read"), [(61, False), (69, False), (70, True), (121, True)])
def test_bodies_are_read_from_sm_70_on(arch: int, read: bool) -> None:
    assert sass.readable(arch) is read


@pytest.mark.parametrize(
    ("kind", "runs_here", "code_elsewhere", "own", "expected"),
    [
        (Body.TRAP, True, False, True, Severity.FAIL),
        (Body.TRAP, True, True, True, Severity.FAIL),
        (Body.TRAP, False, True, True, Severity.WARN),
        (Body.TRAP, True, False, False, Severity.WARN),  # a vendor library: never a failure
        (Body.EMPTY, True, True, True, Severity.FAIL),  # a guard emptied this target
        (Body.EMPTY, False, True, True, Severity.WARN),
        (Body.EMPTY, True, True, False, Severity.WARN),
        (Body.EMPTY, True, False, True, Severity.NOTE),  # empty everywhere: by design
        (Body.CODE, True, True, True, Severity.NOTE),
    ],
)
def test_severity(
    kind: Body, runs_here: bool, code_elsewhere: bool, own: bool, expected: Severity
) -> None:
    got = severity(kind, runs_here=runs_here, code_elsewhere=code_elsewhere, own=own)
    assert got is expected


@pytest.mark.parametrize(
    ("log", "failure", "trap"),
    [
        ("CUDA error: unspecified launch failure", RuntimeFailure.LAUNCH_FAILED, True),
        ("an illegal instruction was encountered", RuntimeFailure.ILLEGAL_INSTRUCTION, True),
        (
            "no kernel image is available for execution on the device",
            RuntimeFailure.NO_KERNEL_IMAGE,
            False,
        ),
    ],
)
def test_the_runtime_errors_of_a_trap_are_told_apart(
    log: str, failure: RuntimeFailure, trap: bool
) -> None:
    found = classify_log(log)
    assert found is failure
    assert found.is_trap() is trap
    assert not found.is_trap() or not found.is_code_failure()
