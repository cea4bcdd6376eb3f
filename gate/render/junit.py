"""JUnit XML for the gate's checks, laid out so CI reporters count and group them right.

The layout (:data:`LAYOUT_VERSION` 2; schema: the Jenkins xUnit plugin's ``junit-10.xsd``
as the plugin ships it today, checked in the tests; with ``file`` on, its 2018-04-30
revision, which allowed ``file``):

* one ``<testsuite>`` per runner class, named ``cuda-gate/<class>`` (``default`` when the
  run names none), with the class, runner, run id and revision in its ``<properties>``;
  files from several classes merge (junit-report-merger, EnricoMi's publisher) without
  two suites or two cases colliding;
* every classname starts with the runner class (``dgx-spark.gate.execute.native``), so a
  reporter that keys cases by classname and name keeps both classes' cases apart; native
  and JIT cases keep distinct classnames;
* counts on every suite (``tests``, ``failures``, ``errors``, ``skipped``, ``time``) and
  on the root all of them but ``skipped``: junit-10.xsd has no ``skipped`` on
  ``<testsuites>``, and Jenkins' xUnit plugin rejects a file that has one;
* a failure's ``type`` names its kind: the check's ranked cause (``missing-sass``,
  ``no-kernel-image``, ``timeout``, ...); an internal error of the gate is an ``<error>``;
  its one-line reason is both its ``message`` and its text (reporters that show only
  one of them, dorny's test-reporter and mikepenz's action-junit-report, both show it);
* ``file`` on a case whose check is about a file, only when asked (``file_attribute``;
  ``cuda-gate run --junit-file-attribute``, which the composite action passes): the
  artifact or loaded library its name starts with, else the project's config file for a
  check of what the config asks (build, inspect, predict, execute, loaded libraries);
  GitHub's reporters put their annotations on that file, never on the gate's own sources.
  Off by default because the xUnit plugin's junit-10.xsd since 2018-12-15 has no ``file``
  on ``<testcase>`` and refuses a file that has one (pytest's ``junit_family`` makes the
  same choice: xunit2, its default, leaves ``file`` out; xunit1 keeps it);
* ``time`` on every case; a case's log appears once, in ``<system-out>``.

Written with ElementTree: junit-xml (the former writer) copies a failure's output into
both ``<failure>`` and ``<system-out>``.
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
    files: tuple[str | None, ...] = ()  # each check's file (see file_of), in check order

    @property
    def name(self) -> str:
        """``cuda-gate/<class>``."""
        return f"{ROOT_NAME}/{self.runner_class}"


def suite_of(record: RunRecord, config_file: Path | None = None) -> Suite:
    """The suite of one run: its class (``default`` when none), its machine and its checks.

    ``config_file``: the project's config file the run read, for the checks of what it
    asks (None when the defaults applied).
    """
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
        files=tuple(file_of(c, record, config_file) for c in record.checks),
    )


# Checks of what the project's config asks for; the others (environment, probe, report)
# are about the machine or the gate itself.
_CONFIGURED = ("gate.build", "gate.inspect", "gate.predict", "gate.execute", "gate.loaded")


def file_of(check: Check, record: RunRecord, config_file: Path | None = None) -> str | None:
    """The file a check is about: its artifact or loaded library, else the config file.

    A check about one file is named ``<artifact name>: ...`` or ``loaded <name>: ...``;
    an internal error of the gate names no file of the project.
    """
    if check.cause is Cause.INTERNAL:
        return None
    subject = check.name.partition(": ")[0] if ": " in check.name else None
    for artifact in record.artifacts:
        if subject == artifact.name:
            return _shown(Path(artifact.path))
    for library in record.loaded_libraries:
        if subject == f"loaded {Path(library.path).name}":
            return _shown(Path(library.path))
    if config_file is not None and check.classname.startswith(_CONFIGURED):
        return _shown(config_file)
    return None


def _shown(path: Path) -> str:
    """``path`` relative to the working folder (the checkout, in CI) when inside it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def to_xml(suites: Suite | Iterable[Suite], *, file_attribute: bool = False) -> str:
    """The JUnit XML document: one ``<testsuite>`` per suite under one ``<testsuites>``.

    ``file_attribute``: put each case's file (:attr:`Suite.files`) in ``file=``, for the
    GitHub reporters that read it; today's junit-10.xsd refuses it (module docstring).
    """
    suites = (suites,) if isinstance(suites, Suite) else tuple(suites)
    root = ET.Element("testsuites", name=ROOT_NAME)
    totals = _Counts()
    for index, suite in enumerate(suites):
        counts = _Counts.of(suite.checks)
        totals = totals + counts
        root.append(_suite_element(suite, counts, index, file_attribute=file_attribute))
    totals.set_on(root, skipped=False)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


_ROOT_COUNTS = ("tests", "failures", "errors")  # junit-10.xsd: no `skipped` on <testsuites>


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

    def set_on(self, element: ET.Element, *, skipped: bool = True) -> None:
        for key in ("tests", "failures", "errors", "skipped") if skipped else _ROOT_COUNTS:
            element.set(key, str(getattr(self, key)))
        element.set("time", _time(self.time))


def _suite_element(
    suite: Suite, counts: _Counts, index: int, *, file_attribute: bool
) -> ET.Element:
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
    files = suite.files if suite.files and file_attribute else (None,) * len(suite.checks)
    for check, file in zip(suite.checks, files, strict=True):
        element.append(_case_element(check, suite.runner_class, file))
    return element


def _case_element(check: Check, runner_class: str, file: str | None) -> ET.Element:
    case = ET.Element(
        "testcase",
        classname=classname_of(check.classname, runner_class),
        name=check.name,
        time=_time(_seconds(check)),
    )
    if file:
        case.set("file", file)
    if check.state is CheckState.NOT_RUN:
        ET.SubElement(case, "skipped", message=check.message)
    elif check.failed:
        problem = ET.SubElement(case, "error" if _is_error(check) else "failure")
        problem.set("message", check.message)
        if check.cause is not None:
            problem.set("type", check.cause.value)
        problem.text = check.message
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
