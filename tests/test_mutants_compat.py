"""The Tile IR table of ``compat.json`` as :func:`gate.rules.compat.load` reads it: optional,
checked field by field, each problem naming its place. Written to kill the mutants of
``_tile_table`` and ``first_tile_driver`` that benchmarks/MUTATION.md reported."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gate.errors import ConfigError
from gate.rules.compat import DATA, load
from gate.rules.targets import Version

pytestmark = pytest.mark.unit


def _doc() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def _refused(doc: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        load(json.dumps(doc), "compat.json")
    return info.value.one_line()


def test_rules_without_a_tile_ir_table_know_no_tile_ir_driver() -> None:
    doc = _doc()
    del doc["tileir_min_driver"]
    compat = load(json.dumps(doc))
    assert dict(compat.tile_table) == {}
    assert compat.tile_source == ""  # no table, so nothing is cited for it
    assert compat.first_tile_driver() is None
    assert compat.tile_min_driver(Version(13, 4)) is None


def test_the_shipped_table_cites_its_source_and_starts_with_cuda_13_1() -> None:
    compat = load(DATA.read_text(encoding="utf-8"))
    assert compat.tile_source == "tileir_min_driver"
    assert compat.tile_source in compat.sources
    assert compat.first_tile_driver() == Version(13, 1)


def test_a_driver_may_take_two_bytecode_versions() -> None:
    doc = _doc()
    doc["tileir_min_driver"]["table"] = {"13.1": "13.1", "13.2": "13.1", "13.3": "13.3"}
    compat = load(json.dumps(doc))
    assert compat.tile_min_driver(Version(13, 2)) == Version(13, 1)


def test_an_unknown_field_of_the_tile_ir_table_is_refused() -> None:
    doc = _doc()
    doc["tileir_min_driver"]["sorce"] = "tileir_min_driver"
    line = _refused(doc)
    assert line.startswith("compat.json: tileir_min_driver: ")
    assert "unknown field(s) sorce" in line


def test_a_bytecode_version_that_is_no_version_is_refused_naming_its_place() -> None:
    doc = _doc()
    doc["tileir_min_driver"]["table"]["thirteen"] = "13.4"
    line = _refused(doc)
    assert line.startswith("compat.json: tileir_min_driver.table.thirteen key: ")
    assert "MAJOR.MINOR" in line
