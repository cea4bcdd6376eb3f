"""The cuobjdump cross-check: any disagreement on what cuobjdump can show is reported."""

from __future__ import annotations

import pytest

from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.targets import Target, Version
from gate.stages.crosscheck import compare

pytestmark = pytest.mark.unit

K = "_Z11write_valuePi"


def sass(target: str, *kernels: str, section: str = ".nv_fatbin") -> DeviceEntry:
    return DeviceEntry(Kind.SASS, Target.parse(target), kernels, section=section)


def ptx(target: str, isa: Version, *kernels: str) -> DeviceEntry:
    return DeviceEntry(Kind.PTX, Target.parse(target), kernels, ptx_isa=isa)


OURS = Listing((sass("sm_100f", K), sass("sm_90"), ptx("compute_90", Version(9, 0), K)))
THEIRS = Listing((sass("sm_100", K), sass("sm_90"), ptx("compute_90", Version(9, 0), K)))


def test_same_listing_agrees_and_f_is_only_ours() -> None:
    assert compare(OURS, THEIRS) == ()


def test_containers_outside_the_primary_section_are_ours_alone() -> None:
    extra = Listing((*OURS.entries, sass("sm_90", "_Z5otherv", section=".ldata")))
    assert compare(extra, THEIRS) == ()


@pytest.mark.parametrize(
    ("theirs", "expected"),
    [
        (
            Listing((*THEIRS.entries[:1], *THEIRS.entries[2:])),
            "SASS: cuda-gate lists 2 entries, cuobjdump 1",
        ),
        (
            Listing((THEIRS.entries[1], THEIRS.entries[0], THEIRS.entries[2])),
            "SASS entry 1: cuda-gate sm_100, cuobjdump sm_90",
        ),
        (
            Listing((sass("sm_100", "_Z5otherv"), *THEIRS.entries[1:])),
            "SASS entry 1 (sm_100): kernels differ",
        ),
        (
            Listing((*THEIRS.entries[:2], ptx("compute_90", Version(8, 8), K))),
            "PTX entry 1 (compute_90): ISA 9.0 vs cuobjdump 8.8",
        ),
        (
            Listing((*THEIRS.entries[:2], ptx("compute_90a", Version(9, 0), K))),
            "PTX entry 1: cuda-gate compute_90, cuobjdump compute_90a",
        ),
    ],
)
def test_every_kind_of_disagreement_is_named(theirs: Listing, expected: str) -> None:
    found = compare(OURS, theirs)
    assert any(d.startswith(expected) for d in found), found
