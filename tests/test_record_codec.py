"""The one codec of result.json: what each record's JSON leaves out, round trips, old reads."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from gate.errors import BadInputError
from gate.reader.entries import Kind
from gate.reader.hostelf import Dependency
from gate.reader.listing import DeviceEntry, Listing
from gate.record import (
    Artifact,
    Build,
    CrossCheck,
    Environment,
    Execution,
    LoadedLibrary,
    RunRecord,
)
from gate.record.codec import SHAPES, Reader
from gate.rules.causes import Cause, ExecPath, RuntimeFailure
from gate.rules.compat import Form
from gate.rules.require import Requirement
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import Check, CheckState, Clause, Diagnosed, Stage, StageStatus
from gate.system.machine import DriverInfo, ToolkitInfo
from tests.records import RUN, SOURCE, WHEN, both, make_record

pytestmark = pytest.mark.unit

# The fields result.json does not hold, each for a reason: written inside another key
# (an artifact's inspector in its listing, the tool's version under "tool"), or not part
# of the record's JSON (a check's output goes to JUnit; the entry's finer facts and the
# driver's GPU count are the reader's and the probe's).
LEFT_OUT = {
    (Artifact, "inspector"),
    (RunRecord, "tool_version"),
    (Check, "output"),
    (Check, "remedy"),
    (RunRecord, "devices"),
    (DriverInfo, "gpu_count"),
    *(
        (DeviceEntry, name)
        for name in (
            "section",
            "compression",
            "stored_size",
            "producer",
            "debug",
            "name",
            "traps",
            "empty",
            "sha256",
            "number",  # an unknown fatbin kind's number: result.json lists no such entry yet
        )
    ),
}


def test_only_the_declared_fields_are_left_out_of_result_json() -> None:
    left_out = {
        (cls, f.name)
        for cls, shape in SHAPES.items()
        if shape.keys
        for f in dataclasses.fields(cls)
        if f.name not in shape.keys
    }
    assert left_out == LEFT_OUT


def _entry(kind: Kind, target: str, isa: str | None = None, size: int = 0) -> DeviceEntry:
    ptx = Version.parse(isa) if isa else None
    return DeviceEntry(kind, Target.parse(target), ("_Z1kPf",), ptx, size=size)


def full_record() -> RunRecord:
    """A record with one of every part, each optional one present."""
    listing = Listing(
        (
            _entry(Kind.SASS, "sm_90a", size=10),
            _entry(Kind.PTX, "compute_90", "8.7", 20),
            _entry(Kind.LTOIR, "sm_100"),
        )
    )
    artifact = Artifact(
        "app", "/p/app", "ab" * 32, 123, "ELF 64-bit", "x86-64",
        (Dependency("libcudart.so.13", "/p/app", None),), listing, "cuobjdump",
        CrossCheck("cuobjdump", ("sm_80 missing",)),
    )  # fmt: skip
    library = LoadedLibrary(
        "/l/libt.so", "cd" * 32, False, ("app",), "maps", listing, "exact SASS", True, True
    )
    jit = Execution(
        "app", ExecPath.JIT, "./app", 1, False, 0.12345, "ptx-jit.log", None, False,
        failure=RuntimeFailure.NO_KERNEL_IMAGE,
    )  # fmt: skip
    failed = Check(
        "jit", "gate.execute.jit", CheckState.FAILED, "no kernel image", 0.5,
        output="not in result.json", cause=Cause.NO_KERNEL_IMAGE, path=ExecPath.JIT,
    )  # fmt: skip
    return dataclasses.replace(
        make_record(checks=(failed,), executions=(jit,)),
        environment=Environment(
            "x86_64",
            "Linux",
            DriverInfo("NVIDIA H100", "580.1", Version.parse("13.0")),
            ToolkitInfo(Version.parse("13.0"), "V13.0.88", "/usr/bin/nvcc"),
            (Target.parse("sm_90"), Target.parse("sm_100")),
            None,
        ),
        stages=(Stage("build", StageStatus.RAN, "", 1.23456),),
        builds=(Build("smoke", "nvcc x.cu", ("nvcc", "x.cu"), None, 0, 2.5, timed_out=False),),
        artifacts=(artifact,),
        requirements=(Requirement(Target.parse("sm_90a"), Form.ARCH),),
        loaded_libraries=(library,),
        diagnoses=(
            Diagnosed(
                "app: native fails (x (error 209)) but PTX JIT passes",
                (
                    Clause(
                        "native fails (x (error 209))",
                        "/executions/0",
                        ExecPath.NATIVE,
                        CheckState.FAILED,
                        209,
                    ),
                    Clause("k in app", "/artifacts/0/listing/entries/0", kernel="_Z1kv"),
                ),
            ),
        ),
        notes=("n",),
    )


def test_a_record_reads_back_as_it_was_written() -> None:
    record = full_record()
    doc = json.loads(record.dumps())
    again = RunRecord.from_json(doc, "r")
    assert again.to_json() == doc
    assert again.artifacts == record.artifacts  # every field result.json holds, typed
    assert again.loaded_libraries == record.loaded_libraries
    assert again.executions[0].failure is RuntimeFailure.NO_KERNEL_IMAGE
    assert again.checks[0] == dataclasses.replace(record.checks[0], output="", duration=0.5)
    assert doc["stages"][0]["duration"] == 1.235  # durations to the millisecond
    assert doc["artifacts"][0]["listing"]["inspector"] == "cuobjdump"
    assert doc["artifacts"][0]["cross_check"]["agrees"] is False  # a property, written
    assert doc["executions"][0]["passed"] is False
    assert doc["environment"]["driver"] == {
        "name": "NVIDIA H100",
        "driver_version": "580.1",
        "cuda_version": "13.0",
    }


def test_without_listings_each_loaded_library_has_none() -> None:
    doc = full_record().to_json(loaded_listings=False)
    assert doc["loaded_libraries"][0]["listing"] is None
    assert doc["artifacts"][0]["listing"]["entries"]  # the artifacts' stay


def test_the_key_order_is_the_documents() -> None:
    doc = full_record().to_json()
    assert list(doc)[:4] == ["version", "tool", "started", "finished"]
    assert list(doc["builds"][0]) == [
        "name", "command", "argv", "cwd", "returncode", "timed_out", "duration",
    ]  # fmt: skip
    assert list(doc["artifacts"][0]["listing"]["entries"][0]) == [
        "kind", "target", "ptx_isa", "kernels", "size",
    ]  # fmt: skip


def _doc(**edits: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(full_record().dumps())
    doc.update(edits)
    return doc


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"stages": [{}]}, "stage status None"),  # the status is checked first, as before
        ({"builds": [{}]}, "a build's 'argv' is not a list of strings"),
        ({"artifacts": [{}]}, "'listing' is missing or not an object"),
        ({"checks": [{}]}, "check state None"),
        ({"requirements": [{"target": "sm_90", "form": []}]}, "requirement form []"),
        ({"started": "yesterday"}, "time 'yesterday' is not YYYY-MM-DDTHH:MM:SSZ"),
        ({"device": {"capability": "nine"}}, "not a compute capability"),
    ],
)
def test_a_bad_part_is_one_line_naming_it(edit: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError) as caught:
        RunRecord.from_json(_doc(**edit), "r/result.json")
    assert caught.value.message.startswith("r/result.json: not a cuda-gate run record: ")
    assert message in caught.value.message


def test_version_1_recovers_the_expectations_and_version_2_skipped_checks_do_not_run() -> None:
    doc = json.loads(make_record(executions=both()).dumps())
    doc["version"] = 1
    doc["required_targets"] = ["sm_90a"]
    del doc["requirements"]
    execution = doc["executions"][0]
    del execution["expected_returncode"], execution["cache_clean"]
    execution.update(returncode=3, passed=True)
    doc["checks"] = [
        {"name": "c", "classname": "k", "passed": True, "skipped": True, "message": ""}
    ]
    record = RunRecord.from_json(doc, "r")
    assert record.executions[0].expected_returncode == 3
    assert record.executions[0].cache_clean
    assert record.checks[0].state is CheckState.NOT_RUN
    assert record.requirements == (Requirement(Target.parse("sm_90a"), Form.ARCH),)


def test_an_older_gates_lto_target_reads_as_sm() -> None:
    entry: dict[str, Any] = {"kind": "LTO IR", "target": "lto_90", "ptx_isa": None, "kernels": []}
    read = Reader("r", 3)
    assert read.record(DeviceEntry, entry).target == Target.parse("sm_90")
    assert read.record(DeviceEntry, entry).size == 0  # absent before version 4: unknown


def test_targets_are_parsed_once_per_document() -> None:
    read = Reader("r", 6)
    first = read.parsed(Target, "sm_90a")
    assert read.parsed(Target, "sm_90a") is first
    assert read.parsed(Capability, "9.0") == Capability.parse("9.0")


def test_the_run_and_source_are_field_by_field() -> None:
    doc = make_record().to_json()
    assert doc["run"] == {"run_id": RUN.run_id, "runner": RUN.runner, "runner_class": "h200"}
    assert doc["source"] == {
        "revision": SOURCE.revision,
        "dirty": False,
        "repository": "acme/kernels",
    }
    assert doc["started"] == WHEN.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("code", [-1, 8, 999])
def test_a_stage_exit_status_the_gate_never_uses_is_one_error_line(code: int) -> None:
    from dataclasses import replace

    from gate.errors import BadInputError
    from gate.record import parse
    from gate.rules.verdict import Stage, StageStatus

    record = replace(make_record(), stages=(Stage("probe", StageStatus.FAILED, "x", 0.1, 4),))
    doc = record.to_json()
    assert parse(json.dumps(doc).encode(), "ev/result.json").stages[0].exit_code == 4
    doc["stages"][0]["exit_code"] = code
    with pytest.raises(BadInputError) as raised:
        parse(json.dumps(doc).encode(), "ev/result.json")
    said = f"ev/result.json: not a cuda-gate run record: stage exit_code {code}"
    assert str(raised.value) == said
