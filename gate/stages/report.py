"""The report stage: verdict, diagnosis, JUnit, Markdown summary and result.json.

``result.json`` (schema ``gate/schemas/result.schema.json``) is the run record the
manifest, the store and the GitHub reporting read; it is written last, atomically.
"""

from __future__ import annotations

import os
import platform
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gate import __version__
from gate.errors import ExitCode
from gate.evidence import sha256_file
from gate.machine import container_info
from gate.reader.listing import DeviceEntry, Listing
from gate.render import junit
from gate.render import text as report
from gate.stages import checks

if TYPE_CHECKING:
    from gate.stages.inspect import InspectedArtifact
    from gate.stages.state import RunState

RESULT_VERSION = 1


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_id(started: datetime) -> str:
    """GitHub's run id and attempt when set, else a timestamp with a random suffix."""
    gh_run = os.environ.get("GITHUB_RUN_ID")
    if gh_run:
        return f"{gh_run}-{os.environ.get('GITHUB_RUN_ATTEMPT', '1')}"
    return f"{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def entry_json(entry: DeviceEntry) -> dict[str, Any]:
    """One device-code entry as JSON."""
    return {
        "kind": entry.kind.value,
        "target": str(entry.target),
        "ptx_isa": str(entry.ptx_isa) if entry.ptx_isa else None,
        "kernels": list(entry.kernels),
    }


def listing_json(listing: Listing, inspector: str) -> dict[str, Any]:
    """A listing as JSON."""
    return {"inspector": inspector, "entries": [entry_json(e) for e in listing.entries]}


def artifact_json(artifact: InspectedArtifact) -> dict[str, Any]:
    """One inspected artifact as JSON."""
    return {
        "name": artifact.name,
        "path": str(artifact.path),
        "sha256": artifact.sha256,
        "size": artifact.size,
        "host_format": artifact.host.description,
        "elf_machine": artifact.host.machine_text,
        "dependencies": [
            {"name": d.name, "needed_by": d.needed_by, "resolved": d.resolved}
            for d in artifact.dependencies
        ],
        "listing": listing_json(artifact.listing, artifact.inspector),
        "cross_check": None
        if artifact.cross_check is None
        else {
            "tool": artifact.cross_check.tool,
            "agrees": not artifact.cross_check.disagreements,
            "disagreements": list(artifact.cross_check.disagreements),
        },
    }


def to_json(state: RunState, verdict: checks.Verdict, finished: datetime) -> dict[str, Any]:
    """The whole run record."""
    ev = state.evidence
    container = container_info()
    return {
        "version": RESULT_VERSION,
        "tool": {"name": "cuda-gate", "version": __version__},
        "started": _iso(state.started),
        "finished": _iso(finished),
        "run": {
            "run_id": run_id(state.started),
            "runner": os.environ.get("RUNNER_NAME") or platform.node(),
            "runner_class": os.environ.get("CUDA_GATE_RUNNER_CLASS"),
        },
        "source": {
            "revision": state.source.revision if state.source else None,
            "dirty": state.source.dirty if state.source else None,
            "repository": state.source.repository if state.source else None,
        },
        "environment": {
            "host_arch": state.host_arch,
            "os": state.os,
            "driver": None
            if state.driver is None
            else {
                "name": state.driver.name,
                "driver_version": state.driver.driver_version,
                "cuda_version": str(state.driver.cuda_version),
            },
            "toolkit": None
            if state.toolkit is None
            else {
                "version": str(state.toolkit.version),
                "release": state.toolkit.release,
                "nvcc": state.toolkit.nvcc,
            },
            "supported_targets": [str(t) for t in state.supported],
            "container": None
            if container is None
            else {
                "image": container.image,
                "digest": container.digest,
            },
        },
        "device": {
            "capability": str(state.capability) if state.capability else None,
            "target": str(state.target) if state.target else None,
            "source": state.target_source,
            "error": state.device_error,
        },
        "builds": [
            {
                "name": b.name,
                "command": b.result.command_line(),
                "argv": list(b.result.argv),
                "cwd": b.result.cwd,
                "returncode": b.result.returncode,
                "duration": round(b.result.duration, 3),
            }
            for b in state.builds
        ],
        "artifacts": [artifact_json(a) for a in state.artifacts],
        "required_targets": [str(t) for t in state.required],
        "loaded_libraries": [
            {
                "path": str(lib.path),
                "sha256": lib.sha256,
                "declared": lib.declared,
                "entry_points": list(lib.entry_points),
                "evidence": lib.evidence_prefix,
                "listing": listing_json(lib.listing, "cuda-gate reader"),
            }
            for lib in state.loaded
        ],
        "executions": [
            {
                "entry_point": e.entry_point.name,
                "path": e.path.value,
                "command": e.result.command_line(),
                "returncode": None if e.result.timed_out else e.result.returncode,
                "timed_out": e.result.timed_out,
                "duration": round(e.result.duration, 3),
                "log": e.log_name,
                "log_sha256": sha256_file(ev.path(e.log_name))
                if ev.path(e.log_name).exists()
                else None,
                "output_ok": e.output_ok,
                "passed": e.passed,
                "failure": e.failure.text if e.failure else None,
            }
            for e in state.executions
        ],
        "checks": [
            {
                "name": c.name,
                "classname": c.classname,
                "passed": c.passed,
                "skipped": c.skipped,
                "message": c.message,
                "duration": round(c.duration, 3),
            }
            for c in state.checks
        ],
        "verdict": {
            "accepted": verdict.accepted,
            "statement": verdict.statement,
            "reasons": list(verdict.reasons),
        },
    }


def _facts(state: RunState) -> list[tuple[str, str]]:
    facts = [("host", f"{state.host_arch}, {state.os}")]
    if state.driver:
        facts.append(
            (
                "driver",
                (
                    f"{state.driver.name}, {state.driver.driver_version}, "
                    f"CUDA {state.driver.cuda_version}"
                ),
            )
        )
    if state.toolkit:
        facts.append(("toolkit", f"nvcc {state.toolkit.release}"))
    facts.append(
        (
            "device",
            str(state.capability)
            if state.capability
            else f"none ({state.device_error or 'not probed'})",
        )
    )
    if state.target:
        facts.append(("target", f"{state.target} (from {state.target_source})"))
    if state.source and state.source.revision:
        dirty = " (dirty)" if state.source.dirty else ""
        facts.append(("revision", f"{state.source.revision}{dirty}"))
    facts += [(f"artifact {a.name}", f"sha256 {a.sha256}") for a in state.artifacts]
    return facts


@dataclass(frozen=True)
class Report:
    """The verdict of a run, its exit status, and the one line to print when it failed."""

    verdict: checks.Verdict
    exit_code: ExitCode
    headline: str | None
    diagnoses: tuple[str, ...]


def finish(state: RunState) -> Report:
    """Decide the verdict and write JUnit, summary.md and result.json."""
    executed = bool(state.executions) and all(
        {e.path.value for e in state.executions if e.entry_point.name == name} == {"native", "jit"}
        for name in {e.entry_point.name for e in state.executions}
    )
    blocked = state.blocked.one_line() if state.blocked else None
    if state.stopped_after and not blocked:
        blocked = f"stopped after the {state.stopped_after} stage"
    verdict = checks.verdict(state.checks, executed, blocked)
    artifact = state.artifacts[0] if state.artifacts else None
    diagnoses = checks.diagnose(
        state.executions,
        artifact.listing if artifact else None,
        state.capability,
        state.driver.cuda_version if state.driver else None,
    )
    ev = state.evidence
    ev.write_text("junit.xml", junit.to_xml(state.checks, hostname=platform.node()))
    summary = report.markdown(state.checks, verdict, diagnoses, _facts(state))
    ev.write_text("summary.md", summary)
    report.append_step_summary(summary)
    ev.write_text("verdict.txt", verdict.statement + "\n")
    ev.write_json("result.json", to_json(state, verdict, datetime.now(UTC)))
    if verdict.accepted:
        code, headline = ExitCode.OK, None
    elif state.blocked:
        code, headline = state.blocked.exit_code, state.blocked.one_line()
    elif state.device_error:
        code, headline = ExitCode.NO_DEVICE, state.device_error
    else:
        code, headline = ExitCode.NOT_ACCEPTED, verdict.statement
    return Report(verdict, code, headline, tuple(diagnoses))
