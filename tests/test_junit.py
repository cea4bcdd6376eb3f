"""JUnit XML as CI reporters read it: junitparser for the counts, junit-10.xsd for the shape."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml, Skipped, TestCase

from gate.record import RunInfo
from gate.render import junit
from gate.rules.causes import Cause
from gate.rules.verdict import Check, CheckState
from tests.records import MIXED_CHECKS, RUN, make_record

pytestmark = pytest.mark.unit

XSD = Path(__file__).resolve().parent / "schemas" / "junit-10.xsd"
LOG = "no kernel image is available for execution on the device\n"
CHECKS = (
    *MIXED_CHECKS,
    Check("other [jit]", "gate.execute.jit", CheckState.NOT_RUN, "not run: no device"),
    Check("report stage", "gate.report", CheckState.FAILED, "KeyError: 'x'", cause=Cause.INTERNAL),
)


def _suite(runner_class: str | None) -> junit.Suite:
    run = RunInfo(RUN.run_id, f"host-{runner_class}", runner_class)
    return junit.suite_of(make_record(CHECKS, run=run))


def _write(tmp_path: Path, name: str, *suites: junit.Suite) -> Path:
    path = tmp_path / name
    path.write_text(junit.to_xml(suites), encoding="utf-8")
    return path


def test_a_two_class_run_reads_as_two_suites_with_the_right_counts(tmp_path: Path) -> None:
    path = _write(tmp_path, "j.xml", _suite("dgx-spark"), _suite("h200"))
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    classes = [
        p.get("value")
        for p in ET.parse(path).getroot().iter("property")  # noqa: S314 - our own document
        if p.get("name") == "runner-class"
    ]
    assert classes == ["dgx-spark", "h200"]
    assert [s.name for s in suites] == ["cuda-gate/dgx-spark", "cuda-gate/h200"]
    for suite, runner_class in zip(suites, ("dgx-spark", "h200"), strict=True):
        assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (6, 1, 1, 2)
        assert suite.time == pytest.approx(0.76)
        assert suite.hostname == f"host-{runner_class}"
    # The root's counts are complete: 4 passed, 4 skipped, not 8 "passed".
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (12, 2, 2, 4)
    assert xml.time == pytest.approx(1.52)
    # No two cases share classname and name, so reporters keep all 12.
    keys = {(c.classname, c.name) for s in suites for c in s}
    assert len(keys) == 12
    assert ("h200.gate.execute.jit", "check [jit]") in keys


def test_files_of_two_classes_merge_without_collapsing(tmp_path: Path) -> None:
    a = JUnitXml.fromfile(str(_write(tmp_path, "a.xml", _suite("dgx-spark"))))
    b = JUnitXml.fromfile(str(_write(tmp_path, "b.xml", _suite("h200"))))
    merged = a + b
    merged.update_statistics()
    assert len(list(merged)) == 2
    assert (merged.tests, merged.failures, merged.errors, merged.skipped) == (12, 2, 2, 4)


def test_failure_types_name_the_kind_and_the_log_appears_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "j.xml", _suite(None))
    text = path.read_text(encoding="utf-8")
    assert text.count("no kernel image is available") == 1
    [suite] = list(JUnitXml.fromfile(str(path)))
    assert suite.name == "cuda-gate/default"
    cases: dict[str, TestCase] = {c.name: c for c in suite}
    [failure] = cases["check [jit]"].result
    assert isinstance(failure, Failure)
    assert (failure.type, failure.message) == ("no-kernel-image", "forced PTX JIT: no kernel image")
    # The reason is also the body (reporters that show only the text show it), not the log.
    assert failure.text == "forced PTX JIT: no kernel image"
    assert cases["check [jit]"].system_out == LOG
    assert cases["check [jit]"].classname == "default.gate.execute.jit"
    [error] = cases["report stage"].result
    assert isinstance(error, Error)
    assert error.type == "internal-error"
    assert isinstance(cases["other [jit]"].result[0], Skipped)
    # A passed check without a log shows what it found; every case has a time.
    assert cases["check: SASS for sm_90"].system_out == "SASS for sm_90 present"
    root = ET.fromstring(text)  # noqa: S314 - our own document
    assert all(case.get("time") for case in root.iter("testcase"))
    assert [c.get("time") for c in root.iter("testcase")][:3] == ["0.010", "0.250", "0.500"]


def test_the_document_follows_junit_10_xsd(tmp_path: Path) -> None:
    path = _write(tmp_path, "j.xml", _suite("dgx-spark"), _suite("h200"))
    xmlschema.XMLSchema(str(XSD)).validate(str(path))
    root = ET.parse(path).getroot()  # noqa: S314 - our own document
    assert "skipped" not in root.attrib  # junit-10.xsd rejects it on <testsuites>


def test_read_failures_gives_back_the_checks_classnames(tmp_path: Path) -> None:
    failed = junit.read_failures(_write(tmp_path, "j.xml", _suite("dgx-spark")))
    assert [(c.classname, c.name, c.message) for c in failed] == [
        ("gate.execute.jit", "check [jit]", "forced PTX JIT: no kernel image"),
        ("gate.report", "report stage", "KeyError: 'x'"),
    ]


def test_a_record_without_checks_is_an_empty_suite() -> None:
    root = ET.fromstring(junit.to_xml(junit.suite_of(make_record())))  # noqa: S314
    assert (root.get("tests"), root.get("time")) == ("0", "0.000")
    [suite] = root.findall("testsuite")
    assert suite.get("skipped") == "0"
    assert suite.get("name") == "cuda-gate/h200"
