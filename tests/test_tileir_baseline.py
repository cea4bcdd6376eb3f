"""Tile IR against a baseline (issue 44): ``cuda-gate diff`` and ``run --baseline`` compare an
artifact's Tile IR as they compare a PTX target. Lost, it is a loss (``dropped_target``);
added, it is reported; its kernels are compared like a target's; a bytecode version that
needs a newer driver is ``newer_driver``. Before, Tile IR was left out of the comparison: a
release that lost its only Tile IR passed.

The integration tests compare records whose artifacts are NVIDIA's real cuTile output
(tests/tileir_inputs.py): a fatbin of an sm_90a cubin and Tile IR, and the cubin alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.baseline.comparison import diff_from_json, diff_json, facts
from gate.cli import main
from gate.errors import ToolError
from gate.reader.entries import DeviceEntry, Kind
from gate.reader.listing import Listing
from gate.reader.read import read_buffer
from gate.record import Artifact
from gate.rules.baseline import (
    TILE_LABEL,
    Change,
    CodeFacts,
    Level,
    Policy,
    Row,
    Rule,
    TargetCode,
    TileCode,
    compare,
    tile_needs_newer_driver,
)
from gate.rules.compat import DATA, CompatRules, load
from gate.rules.routes import Path as RoutePath
from gate.rules.routes import Route
from gate.rules.targets import Capability, Target, Version
from tests.records import make_record, write_record
from tests.tileir_inputs import inputs

F32 = "vector_add_Kt1_A1f32_1l0_A1f32_1l0_A1f32_1l0"
V131, V134 = Version(13, 1), Version(13, 4)
SM90 = TargetCode(False, Target.parse("sm_90"), frozenset({"k"}), None, 100)
GB10 = Capability(12, 1)
DEFAULT = Policy()


def _facts(tile: TileCode | None, *targets: TargetCode) -> CodeFacts:
    return CodeFacts("lib.so", targets or (SM90,), tile)


def _changes(
    old: TileCode | None,
    new: TileCode | None,
    policy: Policy = DEFAULT,
    devices: tuple[Capability, ...] = (),
) -> list[Change]:
    return list(compare([_facts(old)], [_facts(new)], policy, devices).changes)


def _tile_rows(old: TileCode | None, new: TileCode | None) -> list[Row]:
    rows = compare([_facts(old)], [_facts(new)]).rows
    return [r for r in rows if r.quantity.startswith(TILE_LABEL)]


@pytest.mark.unit
def test_lost_tile_ir_is_a_lost_target() -> None:
    tile = TileCode(frozenset({"k"}), V134, 700)
    assert _changes(tile, None, devices=(GB10,)) == [
        Change("lib.so", Level.FAIL, "Tile IR dropped", Rule.DROPPED_TARGET),
        Change("lib.so", Level.INFO,
               "device 12.1: Tile IR (bytecode 13.4, driver >= 13.4) -> nothing"),
    ]  # fmt: skip
    assert _tile_rows(tile, None) == [Row("lib.so", "Tile IR", "13.4", "none", "dropped")]
    # Configured to warn, as a lost PTX target is.
    warned = _changes(tile, None, Policy(frozenset({Rule.DROPPED_TARGET})))
    assert warned[0] == Change("lib.so", Level.WARN, "Tile IR dropped", Rule.DROPPED_TARGET)


@pytest.mark.unit
def test_added_tile_ir_is_reported_never_judged() -> None:
    tile = TileCode(frozenset({"k"}), None, 700)
    changes = _changes(None, tile)
    assert changes[0] == Change("lib.so", Level.INFO, "Tile IR added")
    assert all(c.level is Level.INFO for c in changes)
    assert _tile_rows(None, tile) == [Row("lib.so", "Tile IR", "none", "version unknown", "added")]


@pytest.mark.unit
def test_without_tile_ir_on_either_side_nothing_is_said_of_it() -> None:
    assert _tile_rows(None, None) == []
    assert _changes(None, None) == []
    plain = compare([_facts(None)], [_facts(None)]).rows
    assert [r.quantity for r in plain] == [
        "SASS targets", "PTX targets", "device code bytes", "route on 9.0",
    ]  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize(
    ("old", "new", "row", "changes"),
    [
        # The same version: a row, no change.
        (V134, V134, "-", []),
        # A newer version the rules know needs a newer driver: a loss.
        (V131, V134, "13.1 -> 13.4",
         [Change("lib.so", Level.FAIL, "Tile IR bytecode 13.1 -> 13.4 needs driver >= 13.4",
                 Rule.NEWER_DRIVER)]),
        # Newer than every rule: a driver newer than every known one.
        (V134, Version(99, 0), "13.4 -> 99.0",
         [Change("lib.so", Level.FAIL,
                 "Tile IR bytecode 13.4 -> 99.0 needs a driver newer than every known one",
                 Rule.NEWER_DRIVER)]),
        # An older version needs no newer driver: reported.
        (V134, V131, "13.4 -> 13.1",
         [Change("lib.so", Level.INFO, "Tile IR bytecode 13.4 -> 13.1")]),
        # An unknown version on either side makes no claim.
        (None, V134, "version unknown -> 13.4", []),
        (V134, None, "13.4 -> version unknown", []),
    ],
)  # fmt: skip
def test_a_tile_ir_bytecode_version_that_needs_a_newer_driver_is_a_loss(
    old: Version | None, new: Version | None, row: str, changes: list[Change]
) -> None:
    was, now = TileCode(version=old), TileCode(version=new)
    (found,) = _tile_rows(was, now)
    before, after = (("version unknown" if v is None else str(v)) for v in (old, new))
    assert found == Row("lib.so", TILE_LABEL, before, after, row)  # the whole row, as printed
    said = [c for c in _changes(was, now) if "Tile IR bytecode" in c.what]
    assert said == changes


@pytest.mark.unit
def test_a_newer_tile_ir_version_warns_where_configured() -> None:
    warned = _changes(TileCode(version=V131), TileCode(version=V134),
                      Policy(frozenset({Rule.NEWER_DRIVER})))  # fmt: skip
    assert [c.level for c in warned if c.rule is Rule.NEWER_DRIVER] == [Level.WARN]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("old", "new", "needs"),
    [
        (V131, V134, True),
        (Version(13, 2), Version(13, 3), True),
        (V134, V134, False),  # the same
        (V134, V131, False),  # older
        (V134, Version(13, 5), True),  # past the table: past every known driver
        (Version(99, 0), Version(99, 0), False),  # the same, past the table
        (Version(12, 0), V131, False),  # the old one older than every rule: no claim
        (Version(12, 0), Version(12, 5), False),  # both older than every rule
    ],
)
def test_which_tile_ir_version_needs_a_newer_driver(
    old: Version, new: Version, needs: bool
) -> None:
    assert tile_needs_newer_driver(old, new) is needs


def _rules(table: dict[str, str] | None) -> CompatRules:
    """The shipped rules with another Tile IR table (None: without one)."""
    doc: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    if table is None:
        del doc["tileir_min_driver"]
    else:
        doc["tileir_min_driver"]["table"] = table
    return load(json.dumps(doc))


@pytest.mark.unit
def test_without_a_tile_ir_table_no_version_claims_a_newer_driver() -> None:
    assert not tile_needs_newer_driver(V131, V134, _rules(None))
    assert not tile_needs_newer_driver(V134, Version(99, 0), _rules(None))


@pytest.mark.unit
def test_two_tile_ir_versions_one_driver_compiles_need_no_newer_one() -> None:
    shared = _rules({"13.1": "13.1", "13.2": "13.1", "13.3": "13.3"})
    assert not tile_needs_newer_driver(V131, Version(13, 2), shared)
    assert tile_needs_newer_driver(Version(13, 2), Version(13, 3), shared)


@pytest.mark.unit
def test_tile_ir_kernels_and_bytes_are_compared_like_a_target() -> None:
    was = TileCode(frozenset({"a", "b"}), V134, 700)
    now = TileCode(frozenset({"b", "c"}), V134, 800)
    changes = _changes(was, now)
    assert (
        Change("lib.so", Level.FAIL, "lost kernel a from Tile IR", Rule.DROPPED_KERNEL, "a")
        in changes
    )
    assert Change("lib.so", Level.INFO, "gained kernel c in Tile IR", kernel="c") in changes
    assert Change("lib.so", Level.INFO, "Tile IR +100 bytes (+14.3%)") in changes
    rows = _tile_rows(was, now)
    assert Row("lib.so", "Tile IR kernels", "2", "2", "-1 +1") in rows
    assert Row("lib.so", "Tile IR bytes", "700", "800", "+100 bytes (+14.3%)") in rows
    # A kernel in both SASS and Tile IR, lost from both: one loss naming both places.
    sass = TargetCode(False, Target.parse("sm_90"), frozenset({"a"}), None, 100)
    emptied = replace(sass, kernels=frozenset())
    lost = compare([_facts(TileCode(frozenset({"a"}), V134, 1), sass)],
                   [_facts(TileCode(frozenset(), V134, 1), emptied)])  # fmt: skip
    assert [c.what for c in lost.failed] == ["lost kernel a from sm_90, Tile IR"]


@pytest.mark.unit
def test_tile_ir_bytes_count_in_the_artifact_and_its_route() -> None:
    assert _facts(TileCode(size=700)).size() == 800
    assert _facts(TileCode(size=None)).size() is None
    assert _facts(None).size() == 100
    assert _facts(TileCode(version=V134)).route(GB10) == Route(RoutePath.TILE_IR, None, V134, V134)
    assert _facts(None).route(GB10) == Route(RoutePath.NONE)
    # Tile IR names no device of its own to compare routes on: only the SASS target's.
    rows = compare([_facts(TileCode(version=V134))], [_facts(TileCode(version=V134))]).rows
    assert [r.quantity for r in rows if r.quantity.startswith("route")] == ["route on 9.0"]


@pytest.mark.unit
def test_facts_merge_every_tile_ir_entry_of_an_artifact() -> None:
    def tile(version: Version | None, kernels: tuple[str, ...], size: int) -> DeviceEntry:
        return DeviceEntry(Kind.TILEIR, Target.parse("sm_80"), kernels, version, size=size)

    listing = Listing((tile(V131, ("a",), 10), tile(V134, ("b",), 20), tile(None, (), 5)))
    ((_, found),) = [(f.name, f) for f in facts([("x", listing)])]
    assert found.targets == ()
    assert found.tile == TileCode(frozenset({"a", "b"}), V134, 35)
    unsized = facts([("x", Listing((tile(V134, (), 0),)))])[0]
    assert unsized.tile == TileCode(frozenset(), V134, None)
    assert facts([("x", Listing())])[0].tile is None


@pytest.fixture(scope="module")
def made() -> Path:
    try:
        return inputs()
    except ToolError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot make the cuTile inputs: {e.one_line()}")
        pytest.skip(f"cannot make the cuTile inputs: {e.one_line()}")


def _listing(path: Path) -> Listing:
    data = path.read_bytes()
    return read_buffer(data, 0, len(data), path.name, names=True).listing


def _run(folder: Path, listing: Listing) -> Path:
    art = Artifact("libvadd", "libvadd.fatbin", "0" * 64, 1, "fatbin", "", (), listing)
    return write_record(folder, replace(make_record(), artifacts=(art,)))


@pytest.mark.integration
def test_diff_reports_a_release_that_lost_its_tile_ir(
    made: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    both = _run(tmp_path / "v1", _listing(made / "cubin_tile.fatbin"))
    cubin = _run(tmp_path / "v2", _listing(made / "vadd_sm_90.cubin"))
    code = main(["diff", str(both), str(cubin)])
    out = capsys.readouterr().out
    assert code == 1, out
    (row,) = [line.split() for line in out.splitlines() if line.startswith("libvadd   Tile IR")]
    assert row[-4:] == ["IR", "13.4", "none", "dropped"]
    assert "FAIL libvadd: Tile IR dropped" in out.splitlines()
    code = main(["diff", str(both), str(cubin), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    text = resources.files("gate").joinpath("schemas/diff.schema.json").read_text("utf-8")
    jsonschema.validate(doc, json.loads(text))
    assert doc["version"] == 2  # the shape is unchanged: Tile IR is one more row and change
    assert {(c["rule"], c["what"]) for c in doc["changes"] if c["level"] == "fail"} == {
        ("dropped_target", "Tile IR dropped")
    }
    assert {"artifact": "libvadd", "quantity": "Tile IR", "before": "13.4", "after": "none",
            "change": "dropped"} in doc["rows"]  # fmt: skip
    assert diff_from_json(doc) == diff_from_json(diff_json(diff_from_json(doc)))
    # The other way round Tile IR is added: reported, never a failure.
    code = main(["diff", str(cubin), str(both)])
    out = capsys.readouterr().out
    assert code == 0, out
    (row,) = [line.split() for line in out.splitlines() if line.startswith("libvadd   Tile IR")]
    assert row[-3:] == ["none", "13.4", "added"]
    # Compared with itself: the Tile IR row, and no change.
    assert main(["diff", str(both), str(both)]) == 0
    assert F32 in str(facts([("x", _listing(made / "tile_only.fatbin"))])[0].tile)
