"""Prediction, missing kernels and the inspect summary stay linear in entries + kernels.

libtorch_cuda holds 2,789 cubins and tens of thousands of kernels; a per-kernel scan
of the entries made `inspect --names` take a minute. Counting every pass over the
entries and every look into an entry's kernel tuple on a synthetic library at two
sizes catches a quadratic step without timing anything (the machine is shared).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.reader.read import ArtifactReport
from gate.render.inspect import artifact_json
from gate.render.text import routes_line
from gate.rules.routes import Path
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit

SASS = [Target.parse(f"sm_{n}") for n in (75, 80, 86, 90, 100, 120)]
PTX = Target.parse("compute_90")
CAPS = [Capability(12, 1), Capability(9, 0), Capability(13, 0)]


class Counter:
    ops = 0


class Counted(tuple[Any, ...]):
    """A tuple that counts how often it is walked or searched."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        Counter.ops += 1
        return super().__iter__()

    def __contains__(self, item: object) -> bool:
        Counter.ops += 1
        return super().__contains__(item)


def library(kernels: int) -> Listing:
    """Entries of 3 kernels each for every SASS target, PTX for half; sm_120 misses some."""
    entries = []
    for start in range(0, kernels, 3):
        names = [f"_Z6kernel{i}Pf" for i in range(start, min(start + 3, kernels))]
        for target in SASS:
            present = names[1:] if target.number == 120 and start % 2 else names
            entries.append(DeviceEntry(Kind.SASS, target, Counted(present)))
        if start % 2 == 0:
            entries.append(DeviceEntry(Kind.PTX, PTX, Counted(names), ptx_isa=Version(9, 0)))
    return Listing(Counted(entries))


def _ops(work: Callable[[Listing], object], kernels: int) -> tuple[int, int]:
    listing = library(kernels)
    Counter.ops = 0
    work(listing)
    return Counter.ops, len(listing.entries) + kernels


WORK: dict[str, Callable[[Listing], object]] = {
    "predict": lambda lst: [lst.predict(cap) for cap in CAPS],
    "routes": lambda lst: [lst.routes(cap) for cap in CAPS],
    "missing_kernels": lambda lst: lst.missing_kernels(),
    "kernels_for": lambda lst: [lst.kernels_for(Kind.SASS, t) for t in SASS],
    "inspect summary": lambda lst: artifact_json(
        ArtifactReport("lib.so", "ELF", listing=lst), CAPS
    ),
}


@pytest.mark.parametrize("name", sorted(WORK))
def test_linear_in_entries_and_kernels(name: str) -> None:
    small, _ = _ops(WORK[name], 1_500)
    large, large_size = _ops(WORK[name], 6_000)
    # Linear: 4x the input costs about 4x; quadratic would be 16x. And a constant
    # number of looks per entry or kernel, not one per (kernel, entry) pair.
    assert large <= 4.5 * small, (small, large)
    assert large <= 8 * large_size, (large, large_size)


def test_the_counts_are_real() -> None:
    # The quadratic shape this guards against: look into every entry for every kernel.
    def quadratic(lst: Listing) -> None:
        for kernel in lst.kernels():
            _ = [e.target for e in lst.entries if kernel in e.kernels]

    small, _ = _ops(quadratic, 300)
    large, _ = _ops(quadratic, 1_200)
    assert large > 12 * small


def test_routes_count_every_kernel_once_and_name_the_best() -> None:
    listing = library(3_000)
    on_gb10 = listing.routes(Capability(12, 1))
    assert on_gb10.kernels == 3_000
    # sm_120 lacks the first kernel of every odd group of three, and those groups have
    # no PTX: 500 kernels have nothing on GB10, the other 2,500 run from sm_120.
    assert on_gb10.counts == ((Path.COMPATIBLE_SASS, 2_500), (Path.NONE, 500))
    assert on_gb10.best.path is Path.COMPATIBLE_SASS
    assert on_gb10.any_runs
    assert not on_gb10.all_run
    assert listing.routes(Capability(9, 0)).counts == ((Path.EXACT_SASS, 3_000),)
    future = listing.routes(Capability(13, 0))
    assert future.best.path is Path.PTX_JIT
    assert future.any_runs
    assert not future.all_run
    assert future.count(Path.NONE) == future.unusable > 0
    assert routes_line(future).startswith("13.0: 3,000 kernels: ")
    assert " kernels with no code" in routes_line(future)  # never "500 nothing"


def test_headers_only_library_routes_per_target_and_says_so() -> None:
    headers = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_90")),
            DeviceEntry(Kind.PTX, Target.parse("compute_80"), ptx_isa=Version(8, 8)),
        )
    )
    assert headers.has_ptx
    jit = headers.ptx_route(Capability(12, 1))
    assert jit is not None
    assert (str(jit.target), str(jit.min_driver)) == ("compute_80", "12.9")
    assert headers.ptx_route(Capability(7, 5)) is None
    on_gb10 = headers.routes(Capability(12, 1), driver=Version(12, 8))
    assert not on_gb10.per_kernel
    assert on_gb10.best.path is Path.PTX_JIT
    assert not on_gb10.any_runs  # the driver is older than ISA 8.8 needs
    assert "per target" in routes_line(on_gb10)
    assert headers.routes(Capability(9, 0)).any_runs
    assert not Listing().has_ptx
    assert not Listing().routes(Capability(9, 0)).any_runs
