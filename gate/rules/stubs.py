"""Which kernels are present but do nothing: trap stubs and empty kernels.

A kernel built under an architecture guard that excludes the target
(``#if __CUDA_ARCH__ == 1200 ... #else __trap(); #endif`` built for ``sm_121``) is
present in the SASS for that target, passes every listing check, and kills the first
launch ("unspecified launch failure"). The same guard without an ``#else`` leaves an
empty kernel that launches and silently does nothing.

What ptxas leaves for such a body (nvcc 13.0, sm_75 to sm_121; ``cuobjdump -sass``)::

    trap stub (sm_90)                      empty kernel (sm_121)
    LDC R1, c[0x0][0x28] ;                 LDC R1, c[0x0][0x37c] ;
    BPT.TRAP 0x1 ;                         EXIT ;
    BRA 0x20;                              BRA 0x20;
    NOP; ...                               NOP; ...

(sm_75 and sm_80 load the stack pointer with ``MOV R1, c[0x0][0x28]``; ``__brkpt()``
leaves ``BPT.TRAP 0x1 ; EXIT ;``.) The rule, read from the first instruction:

1. skip the stack-pointer set-up (R1 loaded from constant bank 0) and padding (NOP);
2. the next instruction decides: an unpredicated trap makes a trap stub, an
   unpredicated EXIT an empty kernel, anything else is code. Nothing after it is
   reachable, since nothing before it branches.

A trap behind a predicate (``if (x < 0) __trap();``) is code, and so is a ``-G`` debug
build (its prologue moves the parameters first): the rule can miss a stub, never call
code a stub.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Op(enum.Enum):
    """The instruction classes the rule tells apart (decoded by gate.reader.sass)."""

    PROLOGUE = "prologue"  # the stack pointer, R1, loaded from constant bank 0
    NOP = "nop"
    TRAP = "trap"  # BPT.TRAP
    EXIT = "exit"
    OTHER = "other"


class Body(enum.Enum):
    """What one kernel's SASS for one target does."""

    TRAP = "trap stub"
    EMPTY = "empty"
    CODE = "code"


@dataclass(frozen=True)
class Instruction:
    """One instruction as the rule sees it: its class, and whether a predicate guards it."""

    op: Op
    predicated: bool = False


# Skipped before the deciding instruction, predicated or not (a predicated prologue
# or NOP still does nothing the kernel needs).
_SKIPPED = frozenset({Op.PROLOGUE, Op.NOP})
# The unpredicated instruction that makes the body what it is.
_DECIDES = {Op.TRAP: Body.TRAP, Op.EXIT: Body.EMPTY}


def classify(instructions: Iterable[Instruction]) -> Body:
    """Trap stub, empty kernel or code, by the rule above; a body that ends first is code."""
    for ins in instructions:
        if ins.op in _SKIPPED:
            continue
        if ins.predicated:
            return Body.CODE
        return _DECIDES.get(ins.op, Body.CODE)
    return Body.CODE


class Severity(enum.Enum):
    """What a kernel that does nothing on some target means for the gate."""

    FAIL = "fail"
    WARN = "warn"
    NOTE = "note"


def severity(body: Body, *, runs_here: bool, code_elsewhere: bool, own: bool) -> Severity:
    """How much a trap stub or empty body matters.

    ``runs_here``: a checked device would run this SASS; ``code_elsewhere``: the same
    kernel has code for another target (so an architecture guard emptied this one);
    ``own``: the project's own artifact, not a library outside it.

    * a trap stub fails where a checked device runs it (its first launch dies), and warns
      where none does (a device the gate did not check would);
    * an empty body left by a guard (code elsewhere) counts as a trap stub does: the
      launch succeeds and computes nothing; empty on every target it is by design (a
      warm-up kernel): a note;
    * outside the project nothing fails: a failure is a warning.
    """
    if body is Body.CODE or (body is Body.EMPTY and not code_elsewhere):
        return Severity.NOTE
    if not runs_here:
        return Severity.WARN
    return Severity.FAIL if own else Severity.WARN
