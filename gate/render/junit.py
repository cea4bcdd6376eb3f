"""JUnit XML for the gate's checks, laid out so CI reporters count and group them right.

The layout (:data:`LAYOUT_VERSION` 2; schema: the Jenkins xUnit plugin's ``junit-10.xsd``,
checked in the tests):

* one ``<testsuite>`` per runner class, named ``cuda-gate/<class>`` (``default`` when the
  run names none), with the class, runner, run id and revision in its ``<properties>``;
  files from several classes merge (junit-report-merger, EnricoMi's publisher) without
  two suites or two cases colliding;
* every classname starts with the runner class (``dgx-spark.gate.execute.native``), so a
  reporter that keys cases by classname and name keeps both classes' cases apart; native
  and JIT cases keep distinct classnames;
* counts on every suite and on the root: ``tests``, ``failures``, ``errors``, ``skipped``,
  ``time`` (junit-10.xsd lists no ``skipped`` on ``<testsuites>``; readers such as
  test-results-parser and junitparser take it from there, so it is written);
* a failure's ``type`` names its kind: the check's ranked cause (``missing-sass``,
  ``no-kernel-image``, ``timeout``, ...); an internal error of the gate is an ``<error>``;
* ``time`` on every case; a case's log appears once, in ``<system-out>``; the failure
  carries the one-line reason as its ``message``.

Written with ElementTree: junit-xml (the former writer) cannot put ``skipped`` on the
root and copies a failure's output into both ``<failure>`` and ``<system-out>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gate.errors import BadInputError
from gate.record import RunRecord
from gate.rules.causes import Cause
from gate.rules.verdict import Check, CheckState

JUNIT_FILE = "junit.xml"
LAYOUT_VERSION = 2
ROOT_NAME = "cuda-gate"
DEFAULT_CLASS = "default"
CLASS_PROPERTY = "runner-class"


@dataclass(frozen=True)
class Suite:
    """One runner class's checks and where they ran: one ``<testsuite>``."""

    runner_class: str
    checks: tuple[Check, ...]
    hostname: str = ""
    timestamp: datetime | None = None
    properties: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        """``cuda-gate/<class>``."""
        return f"{ROOT_NAME}/{self.runner_class}"


def suite_of(record: RunRecord) -> Suite:
    """The suite of one run: its class (``default`` when none), its machine and its checks."""
    runner_class = record.run.runner_class or DEFAULT_CLASS
    properties = [
        (CLASS_PROPERTY, runner_class),
        ("runner", record.run.runner),
        ("run-id", record.run.run_id),
        ("cuda-gate-version", record.tool_version),
        ("junit-layout-version", str(LAYOUT_VERSION)),
        ("verdict", "accepted" if record.verdict.accepted else "not accepted"),
    ]
    if record.source.revision:
        properties.append(("revision", record.source.revision))
    return Suite(
        runner_class,
        record.checks,
        hostname=record.run.runner,
        timestamp=record.started,
        properties=tuple(properties),
    )


def to_xml(suites: Suite | Iterable[Suite]) -> str:
    """The JUnit XML document: one ``<testsuite>`` per suite under one ``<testsuites>``."""
    suites = (suites,) if isinstance(suites, Suite) else tuple(suites)
    root = ET.Element("testsuites", name=ROOT_NAME)
    totals = _Counts()
    for index, suite in enumerate(suites):
        counts = _Counts.of(suite.checks)
        totals = totals + counts
        root.append(_suite_element(suite, counts, index))
    totals.set_on(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


@dataclass(frozen=True)
class _Counts:
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    time: float = 0.0

    @classmethod
    def of(cls, checks: Sequence[Check]) -> _Counts:
        errors = sum(1 for c in checks if c.failed and _is_error(c))
        return cls(
            tests=len(checks),
            failures=sum(1 for c in checks if c.failed) - errors,
            errors=errors,
            skipped=sum(1 for c in checks if c.state is CheckState.NOT_RUN),
            time=sum(_seconds(c) for c in checks),
        )

    def __add__(self, other: _Counts) -> _Counts:
        return _Counts(
            self.tests + other.tests,
            self.failures + other.failures,
            self.errors + other.errors,
            self.skipped + other.skipped,
            self.time + other.time,
        )

    def set_on(self, element: ET.Element) -> None:
        for key in ("tests", "failures", "errors", "skipped"):
            element.set(key, str(getattr(self, key)))
        element.set("time", _time(self.time))


def _suite_element(suite: Suite, counts: _Counts, index: int) -> ET.Element:
    element = ET.Element("testsuite", name=suite.name, id=str(index))
    counts.set_on(element)
    if suite.timestamp is not None:
        element.set("timestamp", suite.timestamp.strftime("%Y-%m-%dT%H:%M:%S"))
    if suite.hostname:
        element.set("hostname", suite.hostname)
    properties = ET.SubElement(element, "properties")
    pairs = list(suite.properties)
    if CLASS_PROPERTY not in {name for name, _ in pairs}:
        pairs.insert(0, (CLASS_PROPERTY, suite.runner_class))
    for name, value in pairs:
        ET.SubElement(properties, "property", name=name, value=value)
    for check in suite.checks:
        element.append(_case_element(check, suite.runner_class))
    return element


def _case_element(check: Check, runner_class: str) -> ET.Element:
    case = ET.Element(
        "testcase",
        classname=classname_of(check.classname, runner_class),
        name=check.name,
        time=_time(_seconds(check)),
    )
    if check.state is CheckState.NOT_RUN:
        ET.SubElement(case, "skipped", message=check.message)
    elif check.failed:
        problem = ET.SubElement(case, "error" if _is_error(check) else "failure")
        problem.set("message", check.message)
        if check.cause is not None:
            problem.set("type", check.cause.value)
    # The log once, here; a passed check without a log shows what it found, a warned one
    # says so first (JUnit has no "passed with a warning").
    out = check.output or (check.message if check.ok else "")
    if check.state is CheckState.WARNED:
        out = f"WARNING: {check.message}\n{check.output}" if check.output else f"WARNING: {out}"
    if out:
        ET.SubElement(case, "system-out").text = out
    return case


def classname_of(classname: str, runner_class: str) -> str:
    """A check's JUnit classname: the runner class, then the check's own classname."""
    return f"{runner_class}.{classname}"


def _is_error(check: Check) -> bool:
    """The gate itself broke (an internal error), as opposed to a check that failed."""
    return check.cause is Cause.INTERNAL


def _seconds(check: Check) -> float:
    return max(0.0, check.duration)


def _time(seconds: float) -> str:
    return f"{seconds:.3f}"


def read_failures(path: Path) -> tuple[Check, ...]:
    """Failed and errored test cases of a JUnit file, as checks (classnames without the class)."""
    try:
        root = ET.parse(path).getroot()  # noqa: S314 - our own gate's output, not remote input
    except FileNotFoundError as e:
        raise BadInputError(f"{path}: no JUnit file") from e
    except (OSError, ET.ParseError) as e:
        raise BadInputError(f"{path}: not valid JUnit XML: {e}") from e
    failed: list[Check] = []
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite")) or [root]
    for suite in suites:
        prefix = _class_of(suite)
        for case in suite.findall("testcase"):
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            if problem is None:
                continue
            message = problem.get("message") or (problem.text or "").strip()
            classname = case.get("classname", "")
            if prefix and classname.startswith(f"{prefix}."):
                classname = classname.removeprefix(f"{prefix}.")
            failed.append(Check(case.get("name", "?"), classname, CheckState.FAILED, message))
    return tuple(failed)


def _class_of(suite: ET.Element) -> str | None:
    """The runner class a suite's properties name, if any."""
    for prop in suite.iter("property"):
        if prop.get("name") == CLASS_PROPERTY:
            return prop.get("value")
    return None
