"""The launch recorder's record read, its coverage figures and runtime modules judged (no GPU).

The golden record (tests/golden/launches/launches.4242.json) is written by hand in the
recorder's format (gate/schemas/launches.schema.json): a process that launched two of
libkernels.so's three kernels through the runtime, loaded an sm_90a cubin from memory
and was refused an sm_80 cubin file.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from gate.errors import BadInputError
from gate.launch.coverage import RuntimeModule, module_checks, read_image
from gate.launch.log import launch_counts, read_folder, read_record
from gate.render.wording import coverage_line, never_shown, unmet_line
from gate.rules.causes import ExecPath
from gate.rules.clauses import Load
from gate.rules.coverage import ALL, Unmet, coverage, unmet
from gate.rules.targets import Capability
from gate.scan.walk import read_paths

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests/golden"
RECORD = GOLDEN / "launches/launches.4242.json"
SCHEMA = ROOT / "gate/schemas/launches.schema.json"


def carried() -> tuple[str, ...]:
    (report,) = read_paths([GOLDEN / "libkernels.so"])
    return report.listing.kernels()


def test_golden_record_matches_its_schema_and_reads() -> None:
    doc = json.loads(RECORD.read_text(encoding="utf-8"))
    jsonschema.validate(doc, json.loads(SCHEMA.read_text(encoding="utf-8")))
    record = read_record(RECORD)
    assert (record.pid, record.complete) == (4242, True)
    twice = record.kernels[0]
    assert (twice.name, twice.count, twice.sass, twice.ptx) == (
        "_Z5twicePi",
        4,
        "sm_80",
        "compute_80",
    )
    assert record.kernels[1].binary_version is None  # -1: the driver was not asked
    refused = record.loads[1]
    assert refused.failed
    assert refused.error == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert refused.file == "/opt/app/kernels_sm80.cubin"
    assert not record.loads[0].failed


def test_counts_merge_across_processes(tmp_path: Path) -> None:
    doc = json.loads(RECORD.read_text(encoding="utf-8"))
    (tmp_path / "launches.4242.json").write_text(json.dumps(doc), encoding="utf-8")
    doc["pid"] = 4243
    doc["kernels"] = [dict(doc["kernels"][0], count=3, first_ns=1, binary_version=-1)]
    (tmp_path / "launches.4243.json").write_text(json.dumps(doc), encoding="utf-8")
    merged = launch_counts(read_folder(tmp_path))
    assert merged["_Z5twicePi"].count == 7
    assert merged["_Z5twicePi"].first_ns == 1
    assert merged["_Z5twicePi"].binary_version == 80  # the process that asked the driver
    assert read_folder(tmp_path / "absent") == ()


def test_coverage_names_the_kernels_never_launched_shortest_first() -> None:
    record = read_record(RECORD)
    counts = {k.name: k.count for k in record.kernels}
    cov = coverage(carried(), counts)
    assert cov.figures == "3/3"
    cov = coverage(carried(), {"_Z5twicePi": 4})
    assert cov.figures == "1/3"
    assert cov.never == ("_Z7add_onePi", "_Z11write_valuePi")  # add_one(int*) is shorter
    assert (
        coverage_line(cov)
        == "1 of 3 kernels launched; never launched: add_one(int*), write_value(int*)"
    )
    assert cov.launched == (("_Z5twicePi", 4),)


def test_require_launch_all_and_by_name() -> None:
    cov = coverage(carried(), {"_Z5twicePi": 4})
    (missing,) = unmet(ALL, cov)
    assert missing.kernels == ("_Z7add_onePi", "_Z11write_valuePi")
    assert unmet(("twice",), cov) == ()
    (never,) = unmet(("twice", "add_one"), cov)
    assert unmet_line(never) == "add_one: never launched: add_one(int*)"
    (nothing,) = unmet(("scale",), cov)
    assert unmet_line(nothing) == "scale: names no kernel this artifact carries"
    assert unmet(ALL, coverage(carried(), dict.fromkeys(carried(), 1))) == ()
    # The record as callers read it: a name that names nothing carries no kernels.
    assert unmet(("scale", "add_one"), cov) == (
        Unmet("scale", ()),
        Unmet("add_one", ("_Z7add_onePi",)),
    )


# Six kernels a person reads as k0(int*) ... k5(int*), in that order (same length, by symbol).
SIX = tuple(f"_Z2k{i}Pi" for i in range(6))
FIVE_SHOWN = "k0(int*), k1(int*), k2(int*), k3(int*), k4(int*)"


def test_five_never_launched_kernels_are_named_and_the_rest_counted() -> None:
    assert never_shown(coverage(SIX, {})) == f"{FIVE_SHOWN} and 1 more"
    assert never_shown(coverage(SIX[:5], {})) == FIVE_SHOWN  # exactly five: no count
    assert never_shown(coverage(SIX, {}), limit=2) == "k0(int*), k1(int*) and 4 more"
    assert coverage_line(coverage(SIX, {"_Z2k5Pi": 1})) == (
        f"1 of 6 kernels launched; never launched: {FIVE_SHOWN}"
    )
    (six,) = unmet(ALL, coverage(SIX, {}))
    assert unmet_line(six) == f"all: never launched: {FIVE_SHOWN} and 1 more"
    (five,) = unmet(ALL, coverage(SIX[:5], {}))
    assert unmet_line(five) == f"all: never launched: {FIVE_SHOWN}"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"format": "other"}, "format is 'other'"),
        ({"version": 3}, "version 3 is not one of 1, 2"),
        ({"pid": -3}, "pid: expected a whole number >= 0"),
        ({"kernels": [{"name": ""}]}, "kernels[0]: name is empty"),
        ({"modules": "none"}, "modules: expected a list"),
    ],
)
def test_a_bad_record_is_one_line_naming_the_file(
    tmp_path: Path, change: dict[str, object], problem: str
) -> None:
    doc = json.loads(RECORD.read_text(encoding="utf-8")) | change
    bad = tmp_path / "launches.1.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(BadInputError) as caught:
        read_record(bad)
    assert str(bad) in caught.value.message
    assert problem in caught.value.message
    assert "\n" not in caught.value.message


def test_an_image_name_cannot_leave_the_record_folder(tmp_path: Path) -> None:
    doc = json.loads(RECORD.read_text(encoding="utf-8"))
    doc["loads"][0]["image"] = "../../etc/passwd"
    bad = tmp_path / "launches.1.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(BadInputError, match="not a file name beside the record"):
        read_record(bad)


def test_a_runtime_cubin_is_read_like_an_artifact_and_a_refusal_names_origin_and_targets() -> None:
    data = (GOLDEN / "sm_90a.cubin").read_bytes()
    kind, listing = read_image(data, "ab" * 32)
    assert kind == "cubin"
    assert "_Z11write_valuePi" in listing.kernels()
    module = RuntimeModule(
        "ab" * 32,
        kind,
        "loaded/runtime-modules/abab.cubin",
        "cuModuleLoad of /opt/k.cubin",
        listing,
        (Load("app [native]", ExecPath.NATIVE, 209, "CUDA_ERROR_NO_BINARY_FOR_GPU"),),
    )
    (check,) = module_checks(module, Capability.parse("8.6"))
    assert check.failed
    assert (check.path, check.error) == (ExecPath.NATIVE, 209)
    assert "cuModuleLoad of /opt/k.cubin" in check.message
    assert "sm_90a SASS" in check.message
    assert "nothing for 8.6" in check.message
    assert "CUDA_ERROR_NO_BINARY_FOR_GPU (error 209) in app [native]" in check.message
    loaded = (Load("app [native]", ExecPath.NATIVE),)
    accepted = RuntimeModule(module.sha256, kind, module.kept, module.origin, listing, loaded)
    (fine,) = module_checks(accepted, Capability.parse("9.0"))
    assert not fine.failed
    assert "exact SASS (sm_90a)" in fine.message


def test_ptx_text_modules_are_read_for_target_and_kernels() -> None:
    ptx = (
        b"//\n.version 8.0\n.target sm_80\n.address_size 64\n"
        b".visible .entry rtc_scale(\n)\n{\nret;\n}\n\0"
    )
    kind, listing = read_image(ptx, "cd" * 32)
    assert kind == "PTX"
    (entry,) = listing.entries
    assert str(entry.target) == "compute_80"
    assert entry.kernels == ("rtc_scale",)
