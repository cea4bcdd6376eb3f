"""Kernel shares judged with the device's driver: which PTX it can JIT decides the order of
equal shares and whether a distribution's kernels run. Written to kill the mutants of
gate.rules.shares's ``tally`` and gate.rules.environment's ``kernels_of`` that
benchmarks/MUTATION.md reported."""

from __future__ import annotations

import pytest

from gate.rules.environment import Category, Outcome, Part, kernels_of
from gate.rules.routes import Route, route
from gate.rules.shares import Reach, Share, reach, tally
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit

H100 = Capability(9, 0)
DRIVER_13_0 = Version(13, 0)  # JITs ISA 8.0 (it needs 12.0), not 9.2 (it needs 13.2)


def ptx(target: str, isa: str) -> Route:
    """The route PTX ``target`` of ISA ``isa`` gives on an H100."""
    return route((), ((Target.parse(target), Version.parse(isa)),), H100)


NEW_PTX = ptx("compute_90", "9.2")
OLD_PTX = ptx("compute_80", "8.0")


def test_of_equal_shares_the_one_the_driver_can_jit_comes_first() -> None:
    shares = tally([(NEW_PTX, ("a",)), (OLD_PTX, ("b",))], DRIVER_13_0)
    assert shares.majority == Share(OLD_PTX, ("b",))
    assert shares.shares == (Share(OLD_PTX, ("b",)), Share(NEW_PTX, ("a",)))
    # With no driver known both may JIT: the newer target comes first.
    assert tally([(OLD_PTX, ("b",)), (NEW_PTX, ("a",))]).majority == Share(NEW_PTX, ("a",))


def test_a_distribution_s_kernels_are_judged_with_its_parts_driver() -> None:
    jit = Outcome(Category.PTX_JIT, NEW_PTX, None)
    parts = [
        Part("a.so", jit, kernels=tally([(NEW_PTX, ("a",))], DRIVER_13_0)),
        Part("b.so", jit, kernels=tally([(NEW_PTX, ("b",))], DRIVER_13_0)),
    ]
    kernels = kernels_of(parts)
    assert kernels is not None
    assert kernels.driver == DRIVER_13_0
    assert kernels.missing == (Share(NEW_PTX, ("a", "b")),)  # driver 13.0 cannot JIT ISA 9.2
    assert not kernels.runs
    assert reach(kernels, passes=True) is Reach.NONE
