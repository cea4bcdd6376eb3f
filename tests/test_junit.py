"""JUnit XML as CI reporters read it: junitparser for the counts, junit-10.xsd for the shape.

Two revisions of the Jenkins xUnit plugin's junit-10.xsd (tests/schemas/README.md): the one
it ships today (commit ae25da5, 2018-12-15), which the default document must pass, and the
2018-04-30 one (commit 0c37522), which allowed ``file`` on ``<testcase>``, for the document
written with ``file_attribute`` (``cuda-gate run --junit-file-attribute``).
"""

from __future__ import annotations

import dataclasses
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

SCHEMAS = Path(__file__).resolve().parent / "schemas"
XSD = SCHEMAS / "junit-10-ae25da5.xsd"  # the xUnit plugin's today: no `file` on <testcase>
XSD_WITH_FILE = SCHEMAS / "junit-10-0c37522.xsd"  # its 2018-04-30 revision: `file` allowed
LOG = "no kernel image is available for execution on the device\n"
CHECKS = (
    *MIXED_CHECKS,
    Check("other [jit]", "gate.execute.jit", CheckState.NOT_RUN, "not run: no device"),
    Check("report stage", "gate.report", CheckState.FAILED, "KeyError: 'x'", cause=Cause.INTERNAL),
)


def _suite(runner_class: str | None) -> junit.Suite:
    run = RunInfo(RUN.run_id, f"host-{runner_class}", runner_class)
    return junit.suite_of(make_record(CHECKS, run=run))


def _write(tmp_path: Path, name: str, *suites: junit.Suite, file_attribute: bool = False) -> Path:
    path = tmp_path / name
    path.write_text(junit.to_xml(suites, file_attribute=file_attribute), encoding="utf-8")
    return path


def _with_files(suite: junit.Suite) -> junit.Suite:
    """``suite`` with a file named for every check but the last (an internal error)."""
    files = tuple(f"build/{i}.so" for i in range(len(suite.checks) - 1))
    return dataclasses.replace(suite, files=(*files, None))


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


def test_the_document_follows_todays_junit_10_xsd_without_file(tmp_path: Path) -> None:
    suites = (_with_files(_suite("dgx-spark")), _with_files(_suite("h200")))
    path = _write(tmp_path, "j.xml", *suites)
    xmlschema.XMLSchema(str(XSD)).validate(str(path))
    root = ET.parse(path).getroot()  # noqa: S314 - our own document
    assert "skipped" not in root.attrib  # junit-10.xsd rejects it on <testsuites>
    assert all(case.get("file") is None for case in root.iter("testcase"))


def test_with_the_file_attribute_it_follows_the_revision_that_allows_file(
    tmp_path: Path,
) -> None:
    suites = (_with_files(_suite("dgx-spark")), _with_files(_suite("h200")))
    path = _write(tmp_path, "j.xml", *suites, file_attribute=True)
    xmlschema.XMLSchema(str(XSD_WITH_FILE)).validate(str(path))
    cases = list(ET.parse(path).getroot().iter("testcase"))  # noqa: S314 - our own document
    assert [c.get("file") for c in cases[:2]] == ["build/0.so", "build/1.so"]
    assert cases[len(CHECKS) - 1].get("file") is None  # a check about no file names none
    # Today's revision refuses it: the reason the attribute is off by default.
    with pytest.raises(xmlschema.XMLSchemaValidationError, match="file"):
        xmlschema.XMLSchema(str(XSD)).validate(str(path))
    # Otherwise the two documents are the same.
    without = _write(tmp_path, "k.xml", *suites)
    for case in cases:
        case.attrib.pop("file", None)
    assert [c.attrib for c in cases] == [
        c.attrib
        for c in ET.parse(without).getroot().iter("testcase")  # noqa: S314 - our own document
    ]


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
