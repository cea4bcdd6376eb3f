"""The whole run record and result.json, its one JSON form: written, read, checked.

:meth:`RunRecord.to_json` and :meth:`RunRecord.from_json` go through the one codec
(:mod:`gate.record.codec`), field by field, where the document's own shape (below) and its
parts' (:mod:`gate.record.shapes`) say how it differs; :meth:`RunRecord.from_json` checks
the version first. :func:`load` reads an evidence folder's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

# The fields' types are read at run time (gate.record.codec): keep these imports real.
from gate import jsonutil
from gate.baseline.comparison import Baseline
from gate.errors import BadInputError
from gate.fsutil import open_regular
from gate.launch.summary import Launches
from gate.record import shapes as _shapes  # noqa: F401 (declares the parts' shapes)
from gate.record.codec import Key, Reader, Shape, Writer, declare
from gate.record.parts import (
    Artifact,
    Build,
    Device,
    Environment,
    Execution,
    LoadedLibrary,
    RunInfo,
)
from gate.rules.policy import ReleasePolicy
from gate.rules.require import Requirement
from gate.rules.targets import Capability, Target
from gate.rules.verdict import Check, Diagnosed, Stage, Verdict, decide
from gate.system.git import SourceInfo

RESULT_FILE = "result.json"
LOADED_LIST = "loaded-libraries.txt"  # every library the runs loaded, how each runs here
RESULT_VERSION = 8
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8)
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
    diagnoses: tuple[Diagnosed, ...] = ()  # each with its clauses' records (version 8)
    paths_proved: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what the run did not do, and why (no check stands for it)
    baseline: Baseline | None = None  # what --baseline compared the run with, and found
    policy: ReleasePolicy | None = None  # the effective [policy]; None before version 5
    launches: Launches | None = None  # what the launch recorder showed; None without it
    # The configuration's ``devices``: the console and summary.md say how each artifact
    # reaches each; not part of result.json (each artifact's listing there gives it).
    devices: tuple[Capability, ...] = ()

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
        return Writer(listings=loaded_listings).record(self)

    def dumps(self) -> str:
        """result.json's text: sorted keys, two-space indent, trailing newline."""
        return jsonutil.dumps(self.to_json())

    @classmethod
    def from_json(cls, data: object, where: str) -> RunRecord:
        """Parse a result.json document; BadInputError naming ``where`` when it is not one."""
        if not isinstance(data, Mapping):
            raise Reader(where).fail("not a JSON object")
        version = data.get("version")
        if version not in READABLE_VERSIONS:
            raise BadInputError(
                f"{where}: run record version {version!r} is not one this cuda-gate "
                f"reads ({', '.join(map(str, READABLE_VERSIONS))})"
            )
        record: RunRecord = Reader(where, version).record(cls, data)
        return record


def _tool(read: Reader, doc: Mapping[str, Any]) -> str:
    return read.text(read.obj(doc, "tool"), "version")  # type: ignore[no-any-return]


def _requirements(read: Reader, doc: Mapping[str, Any]) -> tuple[Requirement, ...]:
    """``requirements`` (before version 3: ``required_targets``, each of its own form)."""
    if read.version < 3:  # the version that gave each requirement a form
        targets = read.strings(doc, "required_targets")
        return tuple(Requirement.of_target(read.parsed(Target, t)) for t in targets)
    return read.records(Requirement, read.objs(doc, "requirements"))


def _diagnoses(read: Reader, doc: Mapping[str, Any]) -> tuple[Diagnosed, ...]:
    """``diagnoses`` (before version 8: their texts alone, no clause naming its record)."""
    if read.version < 8:  # the version that gave each diagnosis its clauses
        return tuple(Diagnosed(text) for text in read.strings(doc, "diagnoses"))
    return read.records(Diagnosed, read.objs(doc, "diagnoses"))


def _same_verdict(read: Reader, doc: Mapping[str, Any], record: RunRecord) -> None:
    """The stored ``verdict`` is the one the record's own fields decide (version 3 on;
    before, a skipped check read as not run, so the old verdict is not compared)."""
    stored = read.obj(doc, "verdict")
    accepted = read.flag(stored, "accepted")
    read.text(stored, "statement")
    if read.version >= 3 and accepted != record.verdict.accepted:
        raise read.fail(
            f"the stored verdict (accepted={accepted}) disagrees with its own checks "
            f"(accepted={record.verdict.accepted})"
        )


declare(
    RunRecord,
    Shape(
        keys=(
            "version",
            "tool",
            "started",
            "finished",
            "run",
            "source",
            "environment",
            "device",
            "stages",
            "builds",
            "artifacts",
            "requirements",
            "loaded_libraries",
            "executions",
            "checks",
            "verdict",
            "diagnoses",
            "paths_proved",
            "notes",
            "baseline",
            "policy",
            "launches",
        ),
        absent=frozenset({"stages", "loaded_libraries"}),
        before=lambda r, doc: [r.obj(doc, key) for key in ("tool", "run", "source", "device")],
        special={
            "version": Key(write=lambda _r, _w: RESULT_VERSION),
            "tool": Key(
                write=lambda r, _w: {"name": "cuda-gate", "version": r.tool_version},
                read=_tool,
                field="tool_version",
            ),
            "requirements": Key(read=_requirements),
            "diagnoses": Key(read=_diagnoses),
        },
        check=_same_verdict,
    ),
)


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
