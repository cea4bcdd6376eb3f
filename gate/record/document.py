"""The whole run record and result.json, its one JSON form: written, read, checked.

:meth:`RunRecord.to_json` puts the document together from its parts' own ``to_json``;
:meth:`RunRecord.from_json` reads it back through :class:`gate.record.decode.Reader`,
checking the version and the shape; :func:`load` reads an evidence folder's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from gate import jsonutil
from gate.baseline.comparison import Baseline
from gate.errors import BadInputError
from gate.fsutil import open_regular
from gate.launch.summary import Launches
from gate.record.decode import Reader
from gate.record.parts import (
    Artifact,
    Build,
    Device,
    Environment,
    Execution,
    LoadedLibrary,
    RunInfo,
    iso,
)
from gate.rules.policy import ReleasePolicy
from gate.rules.require import Requirement
from gate.rules.targets import Capability, Target
from gate.rules.verdict import Check, Stage, Verdict, decide
from gate.system.git import SourceInfo

RESULT_FILE = "result.json"
LOADED_LIST = "loaded-libraries.txt"  # every library the runs loaded, how each runs here
RESULT_VERSION = 6
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)
STAGES = ("environment", "probe", "build", "inspect", "execute", "report", "manifest", "store")
# The most of result.json any command reads back (diff, run --baseline, sign, upload):
# it is read whole, then parsed. Runs write far less (the torch example's, 40,000 loaded
# library entries, is 3.8 MB), but an artifact's listing names each kernel per target,
# and libtorch_cuda.so's kernel names alone are about 74 MB (benchmarks/RESULTS.md);
# 256 MiB leaves room for a run gating that, while a broken or hostile file costs no more.
MAX_RESULT_BYTES = 256 * jsonutil.MIB


@dataclass(frozen=True)
class RunRecord:
    """One whole gate run."""

    tool_version: str
    started: datetime
    finished: datetime
    run: RunInfo
    source: SourceInfo
    environment: Environment
    device: Device
    stages: tuple[Stage, ...] = ()
    builds: tuple[Build, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    requirements: tuple[Requirement, ...] = ()
    loaded_libraries: tuple[LoadedLibrary, ...] = ()
    executions: tuple[Execution, ...] = ()
    checks: tuple[Check, ...] = ()
    diagnoses: tuple[str, ...] = ()
    paths_proved: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what the run did not do, and why (no check stands for it)
    baseline: Baseline | None = None  # what --baseline compared the run with, and found
    policy: ReleasePolicy | None = None  # the effective [policy]; None before version 5
    launches: Launches | None = None  # what the launch recorder showed; None without it

    @property
    def verdict(self) -> Verdict:
        """The verdict, decided from the record itself (:func:`gate.rules.verdict.decide`)."""
        return decide(self.stages, self.checks, [(e.entry_point, e.path) for e in self.executions])

    @property
    def failed_checks(self) -> tuple[Check, ...]:
        """Checks that ran and failed."""
        return tuple(c for c in self.checks if c.failed)

    def to_json(self, *, loaded_listings: bool = True) -> dict[str, Any]:
        """The result.json document; without ``loaded_listings``, each loaded library's
        listing is left out (the signed predicate names none, and torch's libraries hold
        tens of thousands of entries)."""
        return {
            "version": RESULT_VERSION,
            "tool": {"name": "cuda-gate", "version": self.tool_version},
            "started": iso(self.started),
            "finished": iso(self.finished),
            "run": self.run.to_json(),
            "source": _source_json(self.source),
            "environment": self.environment.to_json(),
            "device": self.device.to_json(),
            "stages": [_stage_json(s) for s in self.stages],
            "builds": [b.to_json() for b in self.builds],
            "artifacts": [a.to_json() for a in self.artifacts],
            "requirements": [
                {"target": str(r.target), "form": r.form.value} for r in self.requirements
            ],
            "loaded_libraries": [
                lib.to_json(listing=loaded_listings) for lib in self.loaded_libraries
            ],
            "executions": [e.to_json() for e in self.executions],
            "checks": [_check_json(c) for c in self.checks],
            "verdict": _verdict_json(self.verdict),
            "diagnoses": list(self.diagnoses),
            "paths_proved": list(self.paths_proved),
            "notes": list(self.notes),
            "baseline": None if self.baseline is None else self.baseline.to_json(),
            "policy": None if self.policy is None else self.policy.to_json(),
            "launches": None if self.launches is None else self.launches.to_json(),
        }

    def dumps(self) -> str:
        """result.json's text: sorted keys, two-space indent, trailing newline."""
        return jsonutil.dumps(self.to_json())

    @classmethod
    def from_json(cls, data: object, where: str) -> RunRecord:
        """Parse a result.json document; BadInputError naming ``where`` when it is not one."""
        read = Reader(where)
        doc, version = read.document(data, READABLE_VERSIONS)
        tool = read.obj(doc, "tool")
        run = read.obj(doc, "run")
        source = read.obj(doc, "source")
        device = read.obj(doc, "device")
        record = cls(
            tool_version=read.text(tool, "version"),
            started=read.when(read.text(doc, "started")),
            finished=read.when(read.text(doc, "finished")),
            run=RunInfo(
                read.text(run, "run_id"),
                read.text(run, "runner"),
                read.text(run, "runner_class", optional=True),
            ),
            source=SourceInfo(
                read.text(source, "revision", optional=True),
                read.optional_flag(source, "dirty"),
                read.text(source, "repository", optional=True),
            ),
            environment=read.environment(read.obj(doc, "environment")),
            device=Device(
                read.parsed(Capability, read.text(device, "capability", optional=True)),
                read.parsed(Target, read.text(device, "target", optional=True)),
                read.text(device, "source", optional=True),
                read.text(device, "error", optional=True),
            ),
            stages=tuple(read.stage(s) for s in read.objs(doc, "stages", default=True)),
            builds=tuple(read.build(b) for b in read.objs(doc, "builds")),
            artifacts=tuple(read.artifact(a) for a in read.objs(doc, "artifacts")),
            requirements=read.requirements(doc, version),
            loaded_libraries=tuple(
                read.loaded(x) for x in read.objs(doc, "loaded_libraries", default=True)
            ),
            executions=tuple(read.execution(e, version) for e in read.objs(doc, "executions")),
            checks=tuple(read.check(c, version) for c in read.objs(doc, "checks")),
            diagnoses=tuple(read.strings(doc, "diagnoses")),
            paths_proved=tuple(read.strings(doc, "paths_proved")),
            notes=tuple(read.strings(doc, "notes")),
            baseline=None
            if doc.get("baseline") is None
            else Baseline.from_json(doc["baseline"], where),
            policy=None
            if doc.get("policy") is None
            else ReleasePolicy.from_json(doc["policy"], where),
            launches=None
            if doc.get("launches") is None
            else Launches.from_json(doc["launches"], where),
        )
        read.same_verdict(read.obj(doc, "verdict"), record.verdict, version)
        return record


def _source_json(source: SourceInfo) -> dict[str, Any]:
    return {"revision": source.revision, "dirty": source.dirty, "repository": source.repository}


def _stage_json(stage: Stage) -> dict[str, Any]:
    return {
        "name": stage.name,
        "status": stage.status.value,
        "detail": stage.detail,
        "duration": round(stage.duration, 3),
        "exit_code": stage.exit_code,
    }


def _check_json(check: Check) -> dict[str, Any]:
    return {
        "name": check.name,
        "classname": check.classname,
        "state": check.state.value,
        "message": check.message,
        "duration": round(check.duration, 3),
        "cause": check.cause.value if check.cause else None,
        "path": check.path.value if check.path else None,
    }


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    return {
        "accepted": verdict.accepted,
        "statement": verdict.statement,
        "reasons": list(verdict.reasons),
        "cause": verdict.cause.value if verdict.cause else None,
        "exit_code": int(verdict.exit_code),
    }


def load(evidence_dir: Path) -> RunRecord:
    """The run record of an evidence folder; BadInputError when absent, malformed, or not
    a plain file within :data:`MAX_RESULT_BYTES` (:func:`read_result`)."""
    return parse(read_result(evidence_dir), str(evidence_dir / RESULT_FILE))


def read_result(evidence_dir: Path) -> bytes:
    """The bytes of an evidence folder's result.json, read as evidence is read.

    Never through a symbolic link (one to another run's record, or out of the folder),
    never blocking (a FIFO is refused, not waited on), never past
    :data:`MAX_RESULT_BYTES` (refused by its size before it is read): each a
    BadInputError naming the file, as is a file that cannot be read.
    """
    path = evidence_dir / RESULT_FILE
    try:
        with open_regular(path) as stream:
            return jsonutil.read_stream(stream, MAX_RESULT_BYTES, path)
    except FileNotFoundError as e:
        raise BadInputError(f"{path}: no run record (did the gate run?)") from e
    except OSError as e:
        raise BadInputError(f"{path}: cannot read the run record: {e.strerror or e}") from e


def parse(data: bytes, where: str) -> RunRecord:
    """The run record ``data`` (result.json's bytes) holds; BadInputError naming ``where``."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise BadInputError(f"{where}: cannot read the run record: {e}") from e
    except (ValueError, RecursionError) as e:
        raise BadInputError(f"{where}: not valid JSON: {e}") from e
    return RunRecord.from_json(doc, where)
