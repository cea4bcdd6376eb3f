"""junit.xml as Jenkins' xUnit plugin and GitHub's reporters read it: valid, with texts, files."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from junitparser import Failure, JUnitXml

from gate.reader.listing import Listing
from gate.record import Artifact, LoadedLibrary, RunInfo, load
from gate.render import junit
from gate.rules.causes import Cause
from gate.rules.verdict import Check, CheckState
from tests.records import make_record, write_record

# The xUnit plugin's junit-10.xsd today, and its revision that allowed `file` on <testcase>
# (tests/schemas/README.md); junit.xml has `file` only with --junit-file-attribute.
XSD = Path(__file__).resolve().parent / "schemas" / "junit-10-ae25da5.xsd"
XSD_WITH_FILE = Path(__file__).resolve().parent / "schemas" / "junit-10-0c37522.xsd"
CHECKS = (
    Check("libk.so: SASS for sm_90", "gate.inspect", CheckState.PASSED, "SASS for sm_90 present"),
    Check(
        "libk.so: kernel scale in sm_100",
        "gate.inspect",
        CheckState.FAILED,
        "no SASS for sm_100 and no PTX to JIT",
        cause=Cause.MISSING_SASS,
    ),
    Check(
        "loaded libcublas.so.13: device code for 9.0",
        "gate.loaded",
        CheckState.FAILED,
        "nothing runs on 9.0: /opt/cuda/lib/libcublas.so.13",
        cause=Cause.LOADED_LIBRARY,
    ),
    Check(
        "smoke [native]",
        "gate.execute.native",
        CheckState.FAILED,
        "native: exit status 1",
        0.5,
        output="FAIL\n",
        cause=Cause.EXIT_STATUS,
    ),
    Check("smoke [jit]", "gate.execute.jit", CheckState.NOT_RUN, "not run: native failed"),
    Check("driver", "gate.environment", CheckState.WARNED, "driver version not read"),
    Check("report stage", "gate.report", CheckState.FAILED, "KeyError: 'x'", cause=Cause.INTERNAL),
)


def _record_file(folder: Path, runner_class: str, *, file_attribute: bool = True) -> Path:
    """junit.xml of a run record read back from result.json, as `cuda-gate run` writes it
    (with ``file=``, as the composite action asks, unless ``file_attribute`` is off)."""
    artifact = Artifact(
        "libk.so", str(folder / "build" / "libk.so"), "0" * 64, 1, "ELF", "x86-64", (), Listing()
    )
    library = LoadedLibrary(
        str(folder / "venv" / "libcublas.so.13"), "1" * 64, False, ("smoke",), "ld", Listing()
    )
    record = make_record(CHECKS, run=RunInfo("r1", f"{runner_class}-01", runner_class))
    record = dataclasses.replace(record, artifacts=(artifact,), loaded_libraries=(library,))
    record = load(write_record(folder / "evidence" / runner_class, record))
    path = folder / "evidence" / runner_class / junit.JUNIT_FILE
    suite = junit.suite_of(record, folder / "cuda-gate.toml")
    path.write_text(junit.to_xml(suite, file_attribute=file_attribute), encoding="utf-8")
    return path


def _files(path: Path) -> dict[str, str | None]:
    root = ET.parse(path).getroot()  # noqa: S314 - our own document
    return {
        c.get("classname", "") + "/" + c.get("name", ""): c.get("file")
        for c in root.iter("testcase")
    }


@pytest.mark.unit
def test_junit_of_a_mixed_run_is_valid_junit_10(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _record_file(tmp_path, "h200", file_attribute=False)
    xmlschema.XMLSchema(str(XSD)).validate(str(path))
    assert set(_files(path).values()) == {None}
    [suite] = list(JUnitXml.fromfile(str(path)))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (7, 3, 1, 1)
    xmlschema.XMLSchema(str(XSD_WITH_FILE)).validate(str(_record_file(tmp_path, "h200")))


@pytest.mark.unit
def test_failures_carry_their_reason_as_text_and_the_file_they_are_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _record_file(tmp_path, "h200")
    [suite] = list(JUnitXml.fromfile(str(path)))
    for case in suite:
        for result in case.result:
            if isinstance(result, Failure):
                assert result.text == result.message
    # Paths relative to the checkout, never a gate source file; the machine's and the
    # gate's own checks name none.
    assert _files(path) == {
        "h200.gate.inspect/libk.so: SASS for sm_90": "build/libk.so",
        "h200.gate.inspect/libk.so: kernel scale in sm_100": "build/libk.so",
        "h200.gate.loaded/loaded libcublas.so.13: device code for 9.0": "venv/libcublas.so.13",
        "h200.gate.execute.native/smoke [native]": "cuda-gate.toml",
        "h200.gate.execute.jit/smoke [jit]": "cuda-gate.toml",
        "h200.gate.environment/driver": None,
        "h200.gate.report/report stage": None,
    }


@pytest.mark.unit
def test_a_merged_report_of_two_classes_keeps_the_files_and_stays_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    parts = [_record_file(tmp_path, c) for c in ("dgx-spark", "h200")]
    # Merged as junit-report-merger does: every file's suites under one <testsuites>,
    # the root's counts summed.
    merged = ET.Element("testsuites", name="merged")
    for part in parts:
        root = ET.parse(part).getroot()  # noqa: S314 - our own document
        merged.extend(root.findall("testsuite"))
        for key in ("tests", "failures", "errors"):
            merged.set(key, str(int(merged.get(key, "0")) + int(root.get(key, "0"))))
    path = tmp_path / "merged.xml"
    ET.ElementTree(merged).write(path, encoding="utf-8", xml_declaration=True)
    xmlschema.XMLSchema(str(XSD_WITH_FILE)).validate(str(path))
    files = _files(path)
    assert len(files) == 14
    for runner_class in ("dgx-spark", "h200"):
        assert files[f"{runner_class}.gate.inspect/libk.so: kernel scale in sm_100"] == (
            "build/libk.so"
        )
        assert files[f"{runner_class}.gate.execute.native/smoke [native]"] == "cuda-gate.toml"
    suites = list(JUnitXml.fromfile(str(path)))
    assert [s.name for s in suites] == ["cuda-gate/dgx-spark", "cuda-gate/h200"]


@pytest.mark.integration
@pytest.mark.parametrize("file_attribute", [False, True], ids=["default", "file"])
def test_a_real_run_writes_valid_junit_naming_the_artifact_and_the_config(
    tmp_path: Path, file_attribute: bool
) -> None:
    nvcc = shutil.which("nvcc")
    assert nvcc is not None, "nvcc is needed (the CI machine has it)"
    (tmp_path / "k.cu").write_text("__global__ void k(int *p) { *p = 7; }\n", encoding="utf-8")
    subprocess.run(
        [nvcc, "-shared", "-Xcompiler", "-fPIC", "-o", "libk.so", "k.cu",
         "-gencode", "arch=compute_90,code=[sm_90,compute_90]"],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    config = 'targets = ["sm_90a"]\n[[artifact]]\npath = "libk.so"\n'
    (tmp_path / "cuda-gate.toml").write_text(config, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store",
         "--evidence", "ev", *(["--junit-file-attribute"] if file_attribute else [])],
        cwd=tmp_path, env=os.environ.copy(), capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    path = tmp_path / "ev" / junit.JUNIT_FILE
    xmlschema.XMLSchema(str(XSD_WITH_FILE if file_attribute else XSD)).validate(str(path))
    root = ET.parse(path).getroot()  # noqa: S314 - our own document
    cases = {c.get("name"): c for c in root.iter("testcase")}
    sass = cases["libk.so: SASS for sm_90a"]
    failure = sass.find("failure")
    assert failure is not None
    assert failure.text == failure.get("message")
    assert str(failure.text).startswith("no SASS for sm_90a")
    if not file_attribute:
        assert set(_files(path).values()) == {None}
        return
    assert sass.get("file") == "libk.so"
    files = {c.get("file") for c in root.iter("testcase")} - {None}
    # The project's artifact, the gate's own smoke binary it built here, the config file;
    # never a gate source file.
    assert files == {"libk.so", "gate-build/smoke", "cuda-gate.toml"}, files
