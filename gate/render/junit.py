"""JUnit XML for the gate's checks: one testcase per check, ``time`` on every case.

Native and JIT cases carry different classnames (gate.execute.native / .jit) so CI
reporters group them; logs go to system-out.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from junit_xml import TestCase, TestSuite, to_xml_report_string

from gate.errors import BadInputError
from gate.record import Check

JUNIT_FILE = "junit.xml"


def to_xml(checks: Sequence[Check], *, suite: str = "cuda-gate", hostname: str = "") -> str:
    """The JUnit XML document for ``checks``."""
    cases = []
    for check in checks:
        case = TestCase(
            name=check.name,
            classname=check.classname,
            elapsed_sec=round(check.duration, 6),
            stdout=check.output or check.message,
        )
        if check.skipped:
            case.add_skipped_info(check.message)
        elif not check.passed:
            case.add_failure_info(
                message=check.message,
                output=check.output or None,
                failure_type=check.cause.value if check.cause else "failure",
            )
        cases.append(case)
    text = str(to_xml_report_string([TestSuite(suite, cases, hostname=hostname or None)]))
    return _time_on_every_case(text)


def _time_on_every_case(text: str) -> str:
    """junit-xml drops ``time`` when it is 0; reporters need it on every testcase."""
    root = ET.fromstring(text)  # noqa: S314  (our own document)
    for case in root.iter("testcase"):
        case.set("time", case.get("time") or "0.000000")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def read_failures(path: Path) -> tuple[Check, ...]:
    """Failed and errored test cases of a JUnit file, as checks."""
    try:
        root = ET.parse(path).getroot()  # noqa: S314 - our own gate's output, not remote input
    except FileNotFoundError as e:
        raise BadInputError(f"{path}: no JUnit file") from e
    except (OSError, ET.ParseError) as e:
        raise BadInputError(f"{path}: not valid JUnit XML: {e}") from e
    failed: list[Check] = []
    for case in root.iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            continue
        message = problem.get("message") or (problem.text or "").strip()
        failed.append(Check(case.get("name", "?"), case.get("classname", ""), False, message))
    return tuple(failed)
