"""Stage 6, report: the run record, JUnit, the Markdown summary and result.json.

``result.json`` (gate.record, schema ``gate/schemas/result.schema.json``) is what the
manifest, the store and the GitHub reporting read; it is written last, atomically.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from gate.evidence import EvidenceDir
from gate.record import RESULT_FILE, RunInfo, RunRecord
from gate.render import diff, junit, text
from gate.system import ci


def run_info(started: datetime) -> RunInfo:
    """Which run this is: its id, this machine, the runner class (gate.system.ci)."""
    env = os.environ
    return RunInfo(ci.run_id(env, started), ci.runner_name(env), ci.runner_class(env))


def facts(record: RunRecord) -> list[tuple[str, str]]:
    """The summary's fact table."""
    env = record.environment
    found = [("host", f"{env.host_arch}, {env.os}")]
    if env.driver:
        found.append(
            (
                "driver",
                f"{env.driver.name}, {env.driver.driver_version}, CUDA {env.driver.cuda_version}",
            )
        )
    if env.toolkit:
        found.append(("toolkit", f"nvcc {env.toolkit.release}"))
    device = record.device
    found.append(
        (
            "device",
            str(device.capability)
            if device.capability
            else f"none ({device.error or 'not probed'})",
        )
    )
    if device.target:
        found.append(("target", f"{device.target} (from {device.source})"))
    if record.source.revision:
        dirty = " (dirty)" if record.source.dirty else ""
        found.append(("revision", f"{record.source.revision}{dirty}"))
    found += [(f"artifact {a.name}", f"sha256 {a.sha256}") for a in record.artifacts]
    return found


def write(
    evidence: EvidenceDir,
    record: RunRecord,
    config_file: Path | None = None,
    *,
    junit_file_attribute: bool = False,
) -> None:
    """JUnit, summary.md (also to $GITHUB_STEP_SUMMARY), verdict.txt and result.json.

    ``config_file``: the project's config file, named in JUnit by the checks of what it asks
    where ``junit_file_attribute`` (``--junit-file-attribute``) puts ``file=`` on the cases.
    """
    suite = junit.suite_of(record, config_file)
    evidence.write_text(junit.JUNIT_FILE, junit.to_xml(suite, file_attribute=junit_file_attribute))
    extra = []
    if record.baseline is not None:
        against = record.baseline.describe()
        extra.append(("Baseline", diff.markdown(record.baseline.diff, against)))
    summary = text.markdown(record, facts(record), extra)
    evidence.write_text("summary.md", summary)
    text.append_step_summary(summary)
    evidence.write_text("verdict.txt", record.verdict.statement + "\n")
    evidence.write_text(RESULT_FILE, record.dumps())
