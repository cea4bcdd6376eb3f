"""Kernels lost or gained against a baseline, as ``cuda-gate diff`` lists them: by the
name a person reads, whatever order their symbols sort in, each naming every target it
left or joined. Written to kill the mutants of gate.rules.baseline's ``_kernels`` that
benchmarks/MUTATION.md reported."""

from __future__ import annotations

import pytest

from gate.rules.baseline import CodeFacts, Level, Rule, TargetCode, compare
from gate.rules.kernels import readable_name
from gate.rules.targets import Target

pytestmark = pytest.mark.unit

# Symbols sort the other way round from the names they read as: "_Z1bv" < "_Z2aav",
# but "aa()" < "b()" (or "aa" < "b" where the demangler is missing).
B, AA = "_Z1bv", "_Z2aav"
KEPT = "keep"


def sass(number: str, *kernels: str) -> TargetCode:
    return TargetCode(False, Target.parse(f"sm_{number}"), frozenset(kernels), None, 100)


def lib(*targets: TargetCode) -> CodeFacts:
    return CodeFacts("libk.so", targets)


def test_lost_kernels_are_listed_by_the_name_a_person_reads() -> None:
    diff = compare([lib(sass("90", KEPT, B, AA))], [lib(sass("90", KEPT))])
    lost = [c for c in diff.changes if c.rule is Rule.DROPPED_KERNEL]
    assert [c.kernel for c in lost] == [AA, B]
    assert [c.what for c in lost] == [
        f"lost kernel {readable_name(AA)} from sm_90",
        f"lost kernel {readable_name(B)} from sm_90",
    ]


def test_gained_kernels_are_listed_by_the_name_a_person_reads() -> None:
    diff = compare([lib(sass("90", KEPT))], [lib(sass("90", KEPT, B, AA))])
    gained = [c for c in diff.changes if c.what.startswith("gained kernel")]
    assert [c.kernel for c in gained] == [AA, B]
    assert {c.level for c in gained} == {Level.INFO}


def test_a_kernel_gained_in_several_targets_names_each_once() -> None:
    diff = compare(
        [lib(sass("90", KEPT), sass("121", KEPT))],
        [lib(sass("90", KEPT, AA), sass("121", KEPT, AA))],
    )
    gained = [c.what for c in diff.changes if c.what.startswith("gained kernel")]
    assert gained == [f"gained kernel {readable_name(AA)} in sm_90, sm_121"]
