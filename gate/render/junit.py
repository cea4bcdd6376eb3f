"""JUnit XML for the gate's checks: one testcase per check, ``time`` on every case.

Native and JIT cases carry different classnames (gate.execute.native / .jit) so CI
reporters group them; logs go to system-out.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from junit_xml import TestCase, TestSuite, to_xml_report_string

from gate.stages.checks import Check


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
            case.add_failure_info(message=check.message, output=check.output or None)
        cases.append(case)
    text = str(to_xml_report_string([TestSuite(suite, cases, hostname=hostname or None)]))
    return _time_on_every_case(text)


def _time_on_every_case(text: str) -> str:
    """junit-xml drops ``time`` when it is 0; reporters need it on every testcase."""
    root = ET.fromstring(text)  # noqa: S314  (our own document)
    for case in root.iter("testcase"):
        case.set("time", case.get("time") or "0.000000")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
