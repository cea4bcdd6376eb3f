"""Markdown and console output: what people read (JUnit: tests/test_junit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.render import text as report
from gate.rules.causes import ExecPath
from gate.rules.verdict import Check, CheckState
from tests.records import MIXED_CHECKS, both, execution, make_record

pytestmark = pytest.mark.unit

CHECKS = MIXED_CHECKS


def test_console_table_aligns_and_ends_with_the_verdict() -> None:
    record = make_record(
        CHECKS,
        executions=(
            execution("check", ExecPath.NATIVE),
            execution("check", ExecPath.JIT, passed=False),
        ),
        diagnoses=["check: native passes but..."],
    )
    text = report.console(record, total=100)
    lines = text.splitlines()
    assert lines[0].split() == ["result", "stage", "check", "detail"]
    assert lines[2].split()[:2] == ["PASS", "inspect"]
    assert any(line.startswith("FAIL") for line in lines)
    assert any(line.startswith("SKIP") for line in lines)
    assert "Diagnosis:" in text
    assert lines[-1] == "Verdict: not accepted: check [jit]: forced PTX JIT: no kernel image"


@pytest.mark.parametrize("width", [60, 80, 100, 170])
def test_console_table_fits_the_width_without_cutting_the_reason(width: int) -> None:
    reason = "no SASS for sm_121; SASS targets: sm_80 sm_86 sm_90 sm_100 sm_120 " * 3
    record = make_record(
        [Check("libkernels.so: SASS for sm_121", "gate.inspect", CheckState.FAILED, reason)]
    )
    text = report.console(record, total=width)
    table = text.split("\n\n")[0]
    assert max(len(line) for line in table.splitlines()) <= width
    assert " ".join(table.split()).count("sm_120") == 3  # every word of the reason is there


def test_markdown_summary_escapes_pipes_and_states_the_verdict() -> None:
    md = report.markdown(
        make_record([Check("a|b", "gate.inspect", CheckState.PASSED, "x")], executions=both()),
        [("driver", "NVIDIA H200, 580")],
    )
    assert md.startswith("## cuda-gate: ✅ Passed with the current driver")
    assert "a\\|b" in md
    assert "| driver | NVIDIA H200, 580 |" in md


def test_step_summary_is_appended_when_github_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "summary"
    target.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    assert report.append_step_summary("## ours\n") == target
    assert target.read_text(encoding="utf-8") == "earlier step\n## ours\n"
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert report.append_step_summary("x") is None


def test_a_loaded_library_without_ptx_for_the_device_is_named_as_blocking_forced_jit() -> None:
    from dataclasses import replace

    from gate.reader.listing import DeviceEntry, Kind, Listing
    from gate.record import Device, LoadedLibrary
    from gate.rules.targets import Capability, Target, Version

    def library(name: str, *entries: DeviceEntry) -> LoadedLibrary:
        return LoadedLibrary(
            f"/lib/{name}",
            "0" * 64,
            False,
            ("app",),
            f"loaded/{name}/",
            Listing(entries),
            route="exact SASS (sm_90)",
            runs=True,
        )

    sass = DeviceEntry(Kind.SASS, Target.parse("sm_90"), ("k",))
    ptx = DeviceEntry(Kind.PTX, Target.parse("compute_80"), ("k",), ptx_isa=Version(8, 0))
    record = replace(
        make_record(loaded=[library("libtorch_cuda.so", sass), library("libok.so", sass, ptx)]),
        device=Device(Capability.parse("9.0"), Target.parse("sm_90"), "probe", None),
    )
    said = " ".join(report.console(record).split())
    assert "libtorch_cuda.so: exact SASS (sm_90); no PTX for 9.0: forced JIT cannot run" in said
    assert "libok.so: exact SASS (sm_90) " in said + " "
    assert "libok.so: exact SASS (sm_90); no PTX" not in said
