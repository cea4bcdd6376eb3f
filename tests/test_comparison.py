"""Listings into the facts the baseline rules compare (gate.baseline.comparison), the comparison's
one JSON form, and which stored run a reference picks (gate.baseline.resolve.choose)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from gate.baseline.comparison import Baseline, diff_from_json, diff_json, facts
from gate.baseline.resolve import Which, choose, looks_like_folder
from gate.errors import BadInputError
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.baseline import Policy, Rule, TargetCode, compare
from gate.rules.targets import Target, Version
from gate.store.records import RunIndex, RunMeta, RunSummary, Verdict

pytestmark = pytest.mark.unit

SCHEMAS = Path(__file__).resolve().parent.parent / "gate" / "schemas"
SM90, SM121 = Target.parse("sm_90"), Target.parse("sm_121")


def entry(
    kind: Kind, target: Target, kernels: tuple[str, ...], size: int, isa: str | None = None
) -> DeviceEntry:
    return DeviceEntry(
        kind, target, kernels, Version.parse(isa) if isa else None, stored_size=size, size=size
    )


def test_entries_merge_per_target_and_lto_ir_is_left_out() -> None:
    listing = Listing(
        (
            entry(Kind.SASS, SM90, ("a",), 100),
            entry(Kind.SASS, SM90, ("b",), 50),  # a second cubin of the same target
            entry(Kind.PTX, SM90.as_ptx(), ("a", "b"), 30, "8.8"),
            entry(Kind.PTX, SM90.as_ptx(), ("c",), 20, "9.0"),
            entry(Kind.LTOIR, SM121, ("a",), 999),
        )
    )
    (lib,) = facts([("libk.so", listing)])
    assert lib.name == "libk.so"
    assert set(lib.targets) == {
        TargetCode(False, SM90, frozenset({"a", "b"}), None, 150),
        TargetCode(True, SM90.as_ptx(), frozenset({"a", "b", "c"}), Version.parse("9.0"), 50),
    }


def test_a_size_of_zero_means_unknown_bytes() -> None:
    listing = Listing((entry(Kind.SASS, SM90, ("a",), 100), entry(Kind.SASS, SM90, ("b",), 0)))
    (lib,) = facts([("libk.so", listing)])
    assert lib.targets[0].size is None
    assert lib.size() is None


def test_artifacts_of_one_name_are_told_apart_in_order() -> None:
    one = Listing((entry(Kind.SASS, SM90, ("a",), 1),))
    two = Listing((entry(Kind.SASS, SM121, ("a",), 1),))
    found = facts([("libk.so", one), ("libk.so", two), ("other.so", one)])
    assert [f.name for f in found] == ["libk.so", "libk.so#2", "other.so"]
    assert found[1].targets[0].target == SM121


def _baseline() -> Baseline:
    old = facts(
        [
            (
                "libk.so",
                Listing((entry(Kind.SASS, SM90, ("a",), 9), entry(Kind.SASS, SM121, ("a",), 9))),
            )
        ]
    )
    new = facts([("libk.so", Listing((entry(Kind.SASS, SM90, ("a",), 9),)))])
    diff = compare(old, new, Policy(frozenset({Rule.LOST_NATIVE_ROUTE})))
    return Baseline("v1", "s3://b/ci/acme/k/rev/r/1", "a" * 64, diff, "b" * 40, "r", "1")


def test_the_comparison_round_trips_and_matches_the_schemas() -> None:
    compared = _baseline()
    doc = json.loads(json.dumps(compared.to_json()))
    assert Baseline.from_json(doc, "result.json") == compared
    assert (doc["regressions"], doc["warnings"]) == (1, 1)
    result = json.loads((SCHEMAS / "result.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(
        {**result["$defs"]["baseline"], "$defs": result["$defs"]}
    )
    validator.validate(doc)
    assert diff_from_json(diff_json(compared.diff)) == compared.diff
    assert compared.describe() == "v1 (run 1 of r at bbbbbbbbbbbb)"


def test_a_malformed_comparison_names_the_file() -> None:
    with pytest.raises(BadInputError, match=r"result\.json: the baseline comparison is malformed"):
        Baseline.from_json({"reference": "v1"}, "result.json")
    with pytest.raises(BadInputError, match=r"result\.json: the baseline comparison is not an"):
        Baseline.from_json([], "result.json")


def _run(
    run_id: str, runner: str, klass: str | None, accepted: bool | None, when: str
) -> RunSummary:
    meta = RunMeta("acme", "k", "c" * 40, runner, run_id, runner_class=klass)
    verdict = None if accepted is None else Verdict(accepted, "x")
    index = RunIndex(meta, (), verdict, "0.1", finished=when)
    return RunSummary(runner, run_id, index, revision="c" * 40)


RUNS = (
    _run("1", "spark-01", "spark", True, "2026-11-01T00:00:00Z"),
    _run("2", "spark-02", "spark", True, "2026-11-03T00:00:00Z"),
    _run("3", "spark-01", "spark", False, "2026-11-04T00:00:00Z"),
    _run("4", "h200-01", "h200", True, "2026-11-05T00:00:00Z"),
    RunSummary("spark-01", "5", None, revision="c" * 40),  # incomplete: never chosen
)


@pytest.mark.parametrize(
    ("which", "accepted", "run_id"),
    [
        (Which(runner_class="spark"), True, "2"),
        (Which(runner_class="spark"), False, "3"),
        (Which(runner="spark-01"), True, "1"),
        (Which(runner="spark-01"), False, "3"),
        (Which(runner_class="h200"), True, "4"),
        (Which(runner_class="spark", runner="h200-01"), False, None),
        (Which(runner_class="b200"), False, None),
    ],
)
def test_the_newest_run_of_the_class_or_runner_is_chosen(
    which: Which, accepted: bool, run_id: str | None
) -> None:
    chosen = choose(RUNS, which, accepted=accepted)
    assert (chosen.run_id if chosen else None) == run_id


@pytest.mark.parametrize(
    ("reference", "folder"),
    [("./ev", True), ("/tmp/ev", True), ("ev/", True), ("v1.2", False), ("latest-accepted", False)],
)
def test_a_reference_written_as_a_path_is_a_folder(reference: str, folder: bool) -> None:
    assert looks_like_folder(reference) is folder
