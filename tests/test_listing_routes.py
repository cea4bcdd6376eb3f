"""Each kernel's route, as the listing works it out by groups, against the rule applied to
that kernel alone.

The listing groups kernels by the places (kind, target, ISA) that hold them and routes
each group once (flashinfer-cubin's 15,970 cubins would be 526,000 kernel routes on two
devices); each kernel must still get the route the rule gives the targets that really
hold it, whatever order the entries and their kernels come in.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.reader.listing import DeviceEntry, Kind, Listing, clear_cache
from gate.rules.routes import Route, route
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit

TARGETS = [
    Target.parse(t)
    for t in ("sm_75", "sm_80", "sm_90", "sm_90a", "sm_100f", "sm_120", "sm_121a", "sm_86")
]
PTX = [Target.parse(t) for t in ("compute_75", "compute_90", "compute_100a", "compute_120")]
ISAS = [Version(8, 0), Version(9, 0)]
CAPS = [Capability(12, 1), Capability(9, 0), Capability(10, 0), Capability(8, 6)]
KERNELS = [f"_Z1k{i}v" for i in range(6)]


def _reference(entries: list[DeviceEntry], cap: Capability) -> dict[str, Route]:
    """Each kernel routed from the entries that hold it, one kernel at a time."""
    out = {}
    for k in sorted({k for e in entries for k in e.kernels if e.kind is not Kind.LTOIR}):
        holding = [e for e in entries if k in e.kernels and e.kind is not Kind.LTOIR]
        sass = tuple(dict.fromkeys(e.target for e in holding if e.kind is Kind.SASS))
        ptx = tuple(dict.fromkeys((e.target, e.ptx_isa) for e in holding if e.kind is Kind.PTX))
        out[k] = route(sass, ptx, cap)
    return out


@st.composite
def listings(draw: st.DrawFn) -> list[DeviceEntry]:
    # Half the listings hold the same kernels in every entry, in any order: one group.
    uniform = draw(st.booleans())
    shared = draw(st.lists(st.sampled_from(KERNELS), min_size=1, max_size=5, unique=True))
    entries = []
    for _ in range(draw(st.integers(1, 7))):
        if uniform:
            kernels = tuple(draw(st.permutations(shared)))
        else:
            kernels = tuple(draw(st.lists(st.sampled_from(KERNELS), max_size=5)))
        kind = draw(st.sampled_from([Kind.SASS, Kind.SASS, Kind.PTX, Kind.LTOIR]))
        if kind is Kind.PTX:
            entry = DeviceEntry(
                kind, draw(st.sampled_from(PTX)), kernels, draw(st.sampled_from(ISAS))
            )
        else:
            entry = DeviceEntry(kind, draw(st.sampled_from(TARGETS)), kernels)
        entries.append(entry)
    return entries


@settings(max_examples=400, deadline=None)
@given(listings(), st.sampled_from(CAPS))
def test_each_kernel_takes_the_route_of_the_targets_that_hold_it(
    entries: list[DeviceEntry], cap: Capability
) -> None:
    clear_cache()
    listing = Listing(tuple(entries))
    expected = _reference(entries, cap)
    got = {p.kernel: p.route for p in listing.predict(cap).kernels}
    assert got == expected
    assert listing.kernels() == tuple(expected)
    # One route per group of kernels (equal ones may repeat), in the order the sorted
    # prediction first meets them.
    distinct = tuple(dict.fromkeys(listing.kernel_routes(cap)))
    assert distinct == tuple(dict.fromkeys(expected.values()))
    counts = listing.routes(cap)
    assert counts.kernels == len(expected)
    assert sum(n for _, n in counts.counts) == len(expected)


def test_the_same_kernels_in_every_entry_in_another_order_are_one_group() -> None:
    # sm_90 and compute_90 both hold both kernels (in two orders): one route each on 12.1
    # (PTX JIT), and on 9.0 (exact SASS); a third kernel only in sm_90 takes SASS alone.
    both = ("_Z1av", "_Z1bv")
    entries = (
        DeviceEntry(Kind.SASS, Target.parse("sm_90"), both),
        DeviceEntry(Kind.PTX, Target.parse("compute_90"), both[::-1], Version(9, 0)),
    )
    listing = Listing(entries)
    assert len(listing.kernel_routes(Capability(12, 1))) == 1
    assert listing.kernel_routes(Capability(12, 1))[0].ptx_isa == Version(9, 0)
    odd = Listing((*entries, DeviceEntry(Kind.SASS, Target.parse("sm_90"), ("_Z1cv",))))
    routes = {p.kernel: p.route for p in odd.predict(Capability(12, 1)).kernels}
    assert routes["_Z1av"].ptx_isa == Version(9, 0)
    assert routes["_Z1cv"].target is None
