"""Tile IR as a route of its own, and fatbin entries of kinds the reader does not know (issue 44).

Table-driven, for the mutation score: the driver a Tile IR bytecode version needs
(``compat.json``'s table), where a Tile IR route stands among SASS and PTX, and a fatbin
whose entry has an invented kind (4096: the only hand-made case; the real Tile IR inputs
are NVIDIA's, in tests/test_tileir_real.py) is listed whole, never refused.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from gate.errors import BadInputError, ConfigError
from gate.reader import fatbin
from gate.reader.entries import DeviceEntry, Kind
from gate.reader.listing import Listing, clear_cache
from gate.reader.read import read_buffer
from gate.rules import compat
from gate.rules.routes import Path as Way
from gate.rules.routes import Route, route, tile_route, tile_support
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
V = Version.parse


@pytest.mark.parametrize(
    ("version", "driver", "runs"),
    [
        ("13.4", "13.4", True),  # the table's row: its own driver
        ("13.4", "13.5", True),
        ("13.4", "13.3", False),
        ("13.4", "13.0", False),  # ground truth: H100, driver 580 (13.0) gives 209
        ("13.1", "13.1", True),
        ("13.1", "13.0", False),
        ("13.2", "13.1", False),
        ("13.9", "13.9", None),  # a version the table does not hold: unknown, never "runs"
        ("13.9", "13.0", False),  # ... but a driver before any Tile IR compiles none
        ("14.0", "13.1", None),
        (None, "13.4", None),
        ("13.4", None, None),  # no driver known (inspect): unknown
    ],
)
def test_the_driver_a_tile_ir_version_needs(
    version: str | None, driver: str | None, runs: bool | None
) -> None:
    assert tile_support(V(version) if version else None, V(driver) if driver else None) is runs


TILE_134 = Route(Way.TILE_IR, None, V("13.4"), V("13.4"))


@pytest.mark.parametrize(
    ("tile", "expected"),
    [
        ((), None),
        ((None,), Route(Way.TILE_IR)),  # version unknown: no minimum driver
        ((V("13.4"),), TILE_134),
        ((V("13.4"), V("13.2")), Route(Way.TILE_IR, None, V("13.2"), V("13.2"))),  # oldest
        ((None, V("13.4")), TILE_134),
        ((V("13.9"),), Route(Way.TILE_IR, None, V("13.9"), None)),
    ],
)
def test_the_tile_ir_route(tile: tuple[Version | None, ...], expected: Route | None) -> None:
    assert tile_route(tile) == expected


SM_90A = Target.parse("sm_90a")
SM_120 = Target.parse("sm_120")
PTX_80 = ((Target.parse("compute_80"), V("8.0")),)
CAP_90, CAP_121 = Capability(9, 0), Capability(12, 1)


@pytest.mark.parametrize(
    ("sass", "ptx", "cap", "path"),
    [
        ((SM_90A,), (), CAP_90, Way.EXACT_SASS),  # SASS before Tile IR
        ((SM_90A,), (), CAP_121, Way.TILE_IR),  # sm_90a is not for 12.1: Tile IR is
        ((SM_120,), (), CAP_121, Way.COMPATIBLE_SASS),
        ((), PTX_80, CAP_121, Way.PTX_JIT),  # the PTX JIT before the Tile IR compiler
        ((), (), CAP_90, Way.TILE_IR),
    ],
)
def test_tile_ir_comes_after_sass_and_ptx(
    sass: tuple[Target, ...], ptx: tuple[tuple[Target, Version], ...], cap: Capability, path: Way
) -> None:
    assert route(sass, ptx, cap, (V("13.4"),)).path is path


def test_without_tile_ir_an_arch_specific_build_is_for_other_devices() -> None:
    assert route((SM_90A,), (), CAP_121).path is Way.OTHER_DEVICES
    assert route((SM_90A,), (), CAP_121, (V("13.4"),)).path is Way.TILE_IR


@pytest.mark.parametrize(
    ("driver", "usable"), [(None, False), (V("13.0"), False), (V("13.4"), True), (V("13.5"), True)]
)
def test_a_tile_ir_route_is_usable_only_where_the_driver_is_known_to_compile_it(
    driver: Version | None, usable: bool
) -> None:
    assert TILE_134.usable(driver) is usable
    assert Route(Way.TILE_IR, None, V("13.9")).usable(driver) is False  # unknown: never


def test_a_tile_ir_route_says_its_version_and_driver() -> None:
    assert TILE_134.describe() == "Tile IR (bytecode 13.4, driver >= 13.4)"
    unknown = Route(Way.TILE_IR, None, V("13.9")).describe()
    assert unknown == "Tile IR (bytecode 13.9, driver support unknown)"
    assert (
        Route(Way.TILE_IR).describe()
        == "Tile IR (bytecode version unknown, driver support unknown)"
    )


def _listing(*entries: DeviceEntry) -> Listing:
    clear_cache()
    return Listing(entries)


def test_a_kernel_in_a_cutile_cubin_and_tile_ir_takes_the_cubin_where_it_runs() -> None:
    listing = _listing(
        DeviceEntry(Kind.SASS, SM_90A, ("k",)),
        DeviceEntry(Kind.TILEIR, Target.parse("compute_80"), ("k",), V("13.4")),
    )
    assert listing.predict(CAP_90).kernels[0].route.path is Way.EXACT_SASS
    assert listing.predict(CAP_121).kernels[0].route == TILE_134
    assert listing.predict(CAP_121, V("13.0")).runnable is False  # 209 on a 13.0 driver
    assert listing.predict(CAP_121, V("13.4")).runnable is True
    assert listing.target_route(CAP_121) == TILE_134  # headers only: the same route
    assert listing.has_tile
    assert not listing.has_ptx  # Tile IR is no PTX: forced JIT has nothing to compile
    assert listing.missing_kernels() == {}  # Tile IR is no target a kernel is missing from


def test_an_unknown_kind_is_listed_and_never_routed() -> None:
    strange = DeviceEntry(Kind.UNKNOWN, Target.parse("sm_90"), (), number=4096)
    listing = _listing(DeviceEntry(Kind.SASS, SM_90A, ("k",)), strange)
    assert listing.unknown() == (strange,)
    assert listing.kernels() == ("k",)
    assert listing.predict(CAP_90).kernels[0].route.path is Way.EXACT_SASS
    assert not Kind.UNKNOWN.routed
    assert not Kind.LTOIR.routed
    assert all(k.routed for k in (Kind.SASS, Kind.PTX, Kind.TILEIR))


def _with_kind(data: bytes, entry: int, kind: int) -> bytes:
    """``data`` (a real fatbin) with its ``entry``-th entry's kind rewritten to ``kind``."""
    container = fatbin.parse_container(data, 0, len(data), "seed")
    out = bytearray(data)
    struct.pack_into("<H", out, container.entries[entry].offset, kind)
    return bytes(out)


@pytest.mark.parametrize("names", [False, True])
def test_an_entry_of_an_invented_kind_is_listed_with_the_rest_of_the_file(names: bool) -> None:
    real = (GOLDEN / "debug.fatbin").read_bytes()
    before = read_buffer(real, 0, len(real), "debug.fatbin", names=names).listing.entries
    data = _with_kind(real, 0, 4096)
    after = read_buffer(data, 0, len(data), "debug.fatbin", names=names).listing.entries
    assert len(after) == len(before)
    assert after[0].kind is Kind.UNKNOWN
    assert after[0].number == 4096
    assert after[0].kernels == ()  # never decoded
    assert after[0].stored_size == before[0].stored_size
    assert after[0].name == before[0].name  # its ident
    assert tuple(after[1:]) == tuple(before[1:])


def test_a_header_that_does_not_hold_together_is_still_corruption() -> None:
    real = (GOLDEN / "debug.fatbin").read_bytes()
    container = fatbin.parse_container(real, 0, len(real), "seed")
    data = bytearray(_with_kind(real, 0, 4096))
    struct.pack_into("<I", data, container.entries[0].offset + 4, 8)  # header size 8
    with pytest.raises(BadInputError, match=r"corrupted fatbin entry at 0x10 .header size 8."):
        read_buffer(bytes(data), 0, len(data), "debug.fatbin", names=False)
    struct.pack_into("<I", data, container.entries[0].offset + 4, 80)
    struct.pack_into("<Q", data, container.entries[0].offset + 8, 1 << 40)  # past its container
    with pytest.raises(BadInputError, match="past its container"):
        read_buffer(bytes(data), 0, len(data), "debug.fatbin", names=False)


def test_the_tile_ir_table_is_cited_and_ordered() -> None:
    rules = compat.rules()
    assert rules.tile_min_driver(V("13.4")) == V("13.4")
    assert rules.tile_min_driver(V("13.9")) is None
    assert rules.first_tile_driver() == V("13.1")
    assert rules.tile_source in rules.sources
    text = (Path(compat.__file__).with_name("compat.json")).read_text()
    broken = text.replace('"13.2": "13.2"', '"13.2": "13.0"')
    with pytest.raises(ConfigError, match=r"Tile IR 13\.2 needs an older driver"):
        compat.load(broken)
    uncited = text.replace('"source": "tileir_min_driver"', '"source": "nowhere"')
    with pytest.raises(ConfigError, match="nowhere"):
        compat.load(uncited)
