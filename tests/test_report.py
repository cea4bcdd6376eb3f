"""Markdown and console output: what people read (JUnit: tests/test_junit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.record import LoadedLibrary
from gate.render import text as report
from gate.render.nextsteps import count_line, device_lines
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
    text = report.console(record, total=100, verbose=True)
    lines = text.splitlines()
    assert lines[0].split() == ["result", "stage", "check", "detail"]
    assert lines[2].split()[:2] == ["PASS", "inspect"]
    assert any(line.startswith("FAIL") for line in lines)
    assert any(line.startswith("SKIP") for line in lines)
    assert "Diagnosis:" in text
    assert lines[-1] == "Verdict: not accepted: check [jit]: forced PTX JIT: no kernel image"
    # By default only what needs a person's eyes: the failed and warned rows, then one
    # count line and the verdict, once.
    short = report.console(record, total=100).splitlines()
    rows = [line.split()[0] for line in short[2:] if line[:4] in ("PASS", "FAIL", "WARN", "SKIP")]
    assert set(rows) <= {"FAIL", "WARN"}
    assert "FAIL" in rows
    assert short[-2] == count_line(record.checks)
    assert short[-1] == lines[-1]
    assert "\n".join(short).count("Verdict:") == 1


def test_a_run_without_failures_prints_no_table() -> None:
    record = make_record([Check("a: SASS for sm_90", "gate.inspect", CheckState.PASSED, "ok")])
    assert report.console(record, total=100).splitlines() == [
        "1 passed",
        f"Verdict: {record.verdict.statement}",
    ]


def test_the_count_line_counts_every_state_in_pytests_order() -> None:
    def checks(state: CheckState, n: int) -> list[Check]:
        return [Check(f"c{i}", "gate.inspect", state, "") for i in range(n)]

    every = [
        *checks(CheckState.PASSED, 41),
        *checks(CheckState.NOT_RUN, 2),
        *checks(CheckState.FAILED, 6),
        *checks(CheckState.WARNED, 1),
    ]
    assert count_line(every) == "6 failed, 41 passed, 1 warned, 2 skipped"
    assert count_line(checks(CheckState.PASSED, 1200)) == "1,200 passed"
    assert count_line([]) == "no checks"


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
    assert (
        "libtorch_cuda.so: runs from exact SASS (sm_90); no PTX for 9.0: forced JIT cannot run "
        "its kernels"
    ) in said
    assert "libok.so: runs from exact SASS (sm_90) " in said + " "
    assert "libok.so: runs from exact SASS (sm_90); no PTX" not in said


def _golden(name: str, path: str, *, runs: bool, declared: bool = False) -> LoadedLibrary:
    """A loaded library as the run records it, its listing read from a golden file."""
    from gate.reader.read import read_artifact

    listing = read_artifact(Path(__file__).parent / "golden" / name).listing
    return LoadedLibrary(path, "0" * 64, declared, ("app",), "loaded/x/", listing, runs=runs)


def test_many_loaded_libraries_are_counted_once_and_those_that_matter_named() -> None:
    from dataclasses import replace

    from gate.reader.listing import DeviceEntry, Kind, Listing
    from gate.record import Device
    from gate.rules.targets import Capability, Target

    # On 9.0: sm_90a.cubin runs from exact SASS and has no PTX (as torch's libraries);
    # multi.o is the project's; an sm_75-only library has nothing for 9.0.
    vendors = [_golden("sm_90a.cubin", f"/site/lib{i}.so", runs=True) for i in range(37)]
    turing = Listing((DeviceEntry(Kind.SASS, Target.parse("sm_75"), ("k",)),))
    old = LoadedLibrary(
        "/site/libold.so", "1" * 64, False, ("app",), "loaded/y/", turing, runs=False
    )
    record = replace(
        make_record(
            loaded=[
                *vendors,
                old,
                _golden("multi.o", "/site/_C.so", runs=True, declared=True),
            ]
        ),
        device=Device(Capability.parse("9.0"), Target.parse("sm_90"), "probe", None),
    )
    console = report.console(record, total=100)
    section = console.split("Loaded libraries with device code:\n")[1].split("\n\n")[0]
    said = [" ".join(item.split()) for item in section.split("  - ")[1:]]
    assert said[0] == "libold.so: NOTHING RUNS HERE (no code for 9.0); SASS sm_75; PTX none"
    assert said[1].startswith("_C.so (project): runs from exact SASS (sm_90)")
    assert said[2] == (
        "37 other libraries run here: 37 from exact SASS (sm_90a); all 37 ship no PTX for 9.0 "
        "(lib0.so, lib1.so, lib10.so and 34 more): forced JIT cannot run their kernels "
        "(loaded-libraries.txt lists each)"
    )
    assert len(said) == 3
    assert "lib5.so" not in console  # counted, not listed
    markdown = report.markdown(record, [])
    for text in (console, markdown):  # each says it once
        assert " ".join(text.split()).count("37 other libraries run here") == 1
        assert text.count("Loaded libraries with device code") == 1


def test_each_configured_device_gets_one_line_of_routes() -> None:
    from dataclasses import replace

    from gate.reader.listing import DeviceEntry, Kind, Listing
    from gate.record import Artifact
    from gate.rules.targets import Capability, Target, Version

    def artifact(name: str, *entries: DeviceEntry) -> Artifact:
        return Artifact(name, f"/p/{name}", "0" * 64, 1, "ELF", "x86-64", (), Listing(entries))

    def sm(target: str) -> DeviceEntry:
        return DeviceEntry(Kind.SASS, Target.parse(target), ("k",))

    ptx = DeviceEntry(Kind.PTX, Target.parse("compute_90"), ("k",), ptx_isa=Version(8, 0))
    record = replace(
        make_record(),
        artifacts=(
            artifact("smoke", sm("sm_90")),
            artifact("ap", sm("sm_121"), sm("sm_90")),
            artifact("libk.so", sm("sm_120"), ptx),
            artifact("libold.so", sm("sm_75")),
            artifact("host-only.so"),
        ),
        devices=(Capability(12, 1), Capability(9, 0)),
    )
    spark, hopper = device_lines(record)
    assert spark == (
        "12.1: 1 from exact SASS (sm_121): ap; 1 from compatible SASS (sm_120): libk.so; "
        "1 with no code: libold.so"
    )
    assert hopper == (
        "9.0: 1 from exact SASS (sm_90): ap; 1 through PTX JIT (compute_90, ISA 8.0, driver "
        ">= 12.0): libk.so; 1 with no code: libold.so"
    )
    said = " ".join(report.console(record).split())
    assert "Routes on the configured devices: - 12.1: 1 from exact SASS (sm_121): ap;" in said
    assert "### Routes on the configured devices" in report.markdown(record, [])
    assert device_lines(replace(record, devices=())) == []
