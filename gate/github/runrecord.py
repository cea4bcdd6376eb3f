"""Reading a finished run's record (``result.json``) for the reports built on it.

The pipeline writes ``result.json`` (schema ``result.schema.json``); the GitHub
reporting and ``cuda-gate matrix`` only need its verdict, its checks and its
executions. This parses just those, tolerating extra keys, into frozen records.
When no result.json exists (the gate crashed early), the JUnit file is the
fallback for failed checks.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.errors import BadInputError

RESULT = "result.json"
JUNIT = "junit.xml"


@dataclass(frozen=True)
class Check:
    """One check of the run: passed, failed or skipped, with its message."""

    name: str
    classname: str
    passed: bool
    skipped: bool = False
    message: str = ""


@dataclass(frozen=True)
class Execution:
    """One entry point run on one path (native or jit)."""

    entry_point: str
    path: str
    returncode: int | None
    timed_out: bool
    output_ok: bool

    @property
    def passed(self) -> bool:
        """Exit status 0, not killed, expected output seen."""
        return self.returncode == 0 and not self.timed_out and self.output_ok


@dataclass(frozen=True)
class RunRecord:
    """What reports need from one run: who ran what on which revision, and the verdict."""

    revision: str | None
    repository: str | None
    runner: str
    runner_class: str
    accepted: bool
    statement: str
    reasons: tuple[str, ...]
    checks: tuple[Check, ...]
    executions: tuple[Execution, ...]

    @property
    def failed_checks(self) -> tuple[Check, ...]:
        """Checks that neither passed nor were skipped."""
        return tuple(c for c in self.checks if not c.passed and not c.skipped)


def parse_record(data: Mapping[str, Any], source: str) -> RunRecord:
    """A RunRecord from result.json's parsed content; BadInputError names ``source``."""
    try:
        run = data["run"]
        verdict = data["verdict"]
        src = data.get("source") or {}
        checks = tuple(
            Check(
                name=str(c["name"]),
                classname=str(c.get("classname", "")),
                passed=bool(c["passed"]),
                skipped=bool(c.get("skipped", False)),
                message=str(c.get("message") or ""),
            )
            for c in data.get("checks", ())
        )
        executions = tuple(
            Execution(
                entry_point=str(x["entry_point"]),
                path=str(x["path"]),
                returncode=x.get("returncode"),
                timed_out=bool(x.get("timed_out", False)),
                output_ok=bool(x.get("output_ok", False)),
            )
            for x in data.get("executions", ())
        )
        return RunRecord(
            revision=src.get("revision"),
            repository=src.get("repository"),
            runner=str(run.get("runner", "")),
            runner_class=str(run.get("runner_class") or ""),
            accepted=verdict["accepted"] is True,
            statement=str(verdict.get("statement", "")),
            reasons=tuple(str(r) for r in verdict.get("reasons", ())),
            checks=checks,
            executions=executions,
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise BadInputError(f"{source}: not a cuda-gate run record: missing or bad {e}") from e


def load_record(evidence: Path) -> RunRecord:
    """The run record in an evidence folder; BadInputError when absent or malformed."""
    path = evidence / RESULT
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise BadInputError(f"{path}: no run record (did the gate run?)") from e
    except OSError as e:
        raise BadInputError(f"{path}: cannot read: {e.strerror}") from e
    except ValueError as e:
        raise BadInputError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: not a cuda-gate run record: not a JSON object")
    return parse_record(data, str(path))


def junit_failures(path: Path) -> tuple[Check, ...]:
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
        failed.append(
            Check(
                name=case.get("name", "?"),
                classname=case.get("classname", ""),
                passed=False,
                message=message,
            )
        )
    return tuple(failed)
