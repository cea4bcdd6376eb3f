"""What the launch recorder showed, kept in result.json (version 6) and the signed predicate
(version 4): per artifact and path the kernels launched, with the code that ran each, and
never launched; the runtime modules. Built from the golden v2 records (see
tests/test_launch_routes.py for what they hold)."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.attest import predicate
from gate.attest.manifest import build_statement
from gate.errors import BadInputError
from gate.evidence import EvidenceDir
from gate.launch.coverage import judge
from gate.launch.summary import ArtifactCoverage, KernelLaunch, Launches
from gate.reader.elffile import ElfFile
from gate.record import RESULT_VERSION, RunRecord, load
from gate.rules.causes import ExecPath
from gate.rules.targets import Capability
from tests.launch_golden import GOLDEN, library, run_of
from tests.manifest_evidence import make_evidence
from tests.records import make_record

pytestmark = pytest.mark.unit


def _schema(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        resources.files("gate").joinpath(f"schemas/{name}").read_text(encoding="utf-8")
    )
    return doc


def recorded(tmp_path: Path) -> Launches:
    elf = ElfFile((GOLDEN / "libkernels.so").read_bytes(), "libkernels.so")
    section = elf.section(".nv_fatbin")
    assert section is not None
    evidence = EvidenceDir.create(tmp_path / "ev")
    runs = [run_of(evidence, p, elf.data(section)) for p in ExecPath]
    outcome = judge(
        evidence, runs=runs, artifacts=[library()], capability=Capability.parse("12.0"), required={}
    )
    return outcome.summary()


def test_coverage_keeps_each_launched_kernel_with_the_code_that_ran_it(tmp_path: Path) -> None:
    summary = recorded(tmp_path)
    native, jit = summary.coverage
    assert (native.artifact, native.path, native.carried) == ("libkernels.so", ExecPath.NATIVE, 3)
    assert KernelLaunch("_Z5twicePi", 3, "sm_120 SASS") in native.launched
    assert KernelLaunch("_Z5twicePi", 2, "JIT-compiled (sm_120) from PTX") in jit.launched
    assert jit.path is ExecPath.JIT
    assert native.figures == f"{len(native.launched)}/3"
    (module,) = summary.runtime_modules
    assert (module.kind, module.refused) == ("cubin", None)
    assert "sm_90a SASS" in module.targets
    assert module.evidence.startswith("loaded/runtime-modules/")
    assert module.runs == ("app [native]",)


def test_a_run_record_keeps_the_launches_and_reads_them_back(tmp_path: Path) -> None:
    summary = recorded(tmp_path)
    doc = json.loads(replace(make_record(), launches=summary).dumps())
    jsonschema.Draft202012Validator(_schema("result.schema.json")).validate(doc)
    assert doc["version"] == RESULT_VERSION  # launches since version 6
    assert RunRecord.from_json(doc, "result.json").launches == summary
    assert RunRecord.from_json(json.loads(make_record().dumps()), "r").launches is None


def test_the_signed_predicate_states_the_launches(tmp_path: Path) -> None:
    summary = recorded(tmp_path / "recorded")
    ev = make_evidence(tmp_path)
    record = replace(load(ev.folder), launches=summary)
    (ev.folder / "result.json").write_text(record.dumps(), encoding="utf-8")
    signed = build_statement(ev.folder)["predicate"]
    assert signed["version"] == predicate.PREDICATE_VERSION  # launches since version 4
    assert signed["launches"] == summary.to_json()
    assert predicate.read(signed, "manifest.json").launches == summary


def test_both_schemas_hold_one_launches_form() -> None:
    result = _schema("result.schema.json")["$defs"]["launches"]
    assert _schema("manifest-predicate.schema.json")["$defs"]["launches"] == result


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"coverage": []},
        {"coverage": [{"artifact": "a", "path": "sideways"}], "runtime_modules": []},
        {
            "coverage": [
                {"artifact": "a", "path": "jit", "carried": -1, "launched": [], "never": []}
            ],
            "runtime_modules": [],
        },
    ],
)
def test_malformed_launches_are_one_line_naming_the_file(doc: object) -> None:
    with pytest.raises(BadInputError) as caught:
        Launches.from_json(doc, "result.json")
    assert caught.value.message.startswith("result.json: launches ")
    assert "\n" not in caught.value.message


def test_figures_count_the_kernels_launched_of_those_carried() -> None:
    cov = ArtifactCoverage("a", ExecPath.NATIVE, 5, (KernelLaunch("k", 1, "sm_90 SASS"),), ("j",))
    assert cov.figures == "1/5"
