"""The run record: everything one gate run found, as frozen records, and its one JSON form.

``result.json`` (schema ``gate/schemas/result.schema.json``) is written from a
:class:`RunRecord` by :meth:`RunRecord.to_json` and read back only through
:meth:`RunRecord.from_json` / :func:`load`, which check the version and the shape.
Every reader (manifest, verify, store, matrix, GitHub reporting) uses these.

Whether something passed is decided by the decision core (:mod:`gate.rules`) from the
record's own fields: an execution by :class:`gate.rules.causes.RunFacts`, the verdict by
:func:`gate.rules.verdict.decide`; a stored verdict that disagrees with them is not a
record.

Version history: 1 (first release); 2 adds each execution's expected exit status
and cache check (so "passed" can be recomputed instead of guessed from exit 0),
a ranked cause on each failing check, the stages and their status, and, for
loaded libraries, how the device runs them; 3 gives each check one ``state``
(passed, warned, failed, not-run) in place of the two flags ``passed`` and
``skipped``, which stages set differently, and the execution path it stands for,
and records each required target with its form (``requirements``) and what the run
did not do, with no check standing for it (``notes``: no cuobjdump to cross-check
with); 4 adds each entry's ``size`` (bytes of device code) and, for a run compared
with a baseline (``--baseline``), the comparison (``baseline``: gate.comparison); 5
adds the effective release policy (``policy``); 6 records the delivery image a run was
in (``environment.container``: how it ran there, ``runtime`` for ``--image`` or
``inside``, the reference, the manifest digest and where it came from, the image id,
platform, runtime and version, the GPUs passed), where 5 had only ``image`` and
``digest`` (read as an ``inside`` run whose digest came from the environment), and what
the launch recorder showed (``launches``: coverage per artifact and path, runtime
modules; gate.launchsummary), null without it.
Versions 1 and 2 are still read: a check they mark skipped reads as not run, so a
stored run is judged by today's rule (a check that did not run never counts as passed);
their stored verdict is not compared with it. Versions 1 to 3 read with every size 0
(unknown) and no baseline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gate import jsonutil
from gate.comparison import Baseline
from gate.container.info import ContainerInfo
from gate.errors import BadInputError, ConfigError
from gate.fsutil import open_regular
from gate.git import SourceInfo
from gate.launchsummary import Launches
from gate.machine import DriverInfo, ToolkitInfo
from gate.reader.hostelf import Dependency
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.causes import Cause, ExecPath, RunFacts, RuntimeFailure
from gate.rules.compat import Form
from gate.rules.policy import ReleasePolicy
from gate.rules.require import Requirement
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import Check, CheckState, Stage, StageStatus, Verdict, decide

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
class Build:
    """One build command exactly as it ran."""

    name: str
    command: str
    argv: tuple[str, ...]
    cwd: str | None
    returncode: int
    duration: float
    timed_out: bool = False


@dataclass(frozen=True)
class CrossCheck:
    """cuobjdump's view of an artifact compared with ours."""

    tool: str
    disagreements: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        """No disagreement."""
        return not self.disagreements


@dataclass(frozen=True)
class Artifact:
    """One final artifact as inspected."""

    name: str
    path: str
    sha256: str
    size: int
    host_format: str
    elf_machine: str
    dependencies: tuple[Dependency, ...]
    listing: Listing
    inspector: str = "cuda-gate reader"
    cross_check: CrossCheck | None = None


@dataclass(frozen=True)
class LoadedLibrary:
    """A shared library an entry point really loaded that carries device code."""

    path: str
    sha256: str
    declared: bool
    entry_points: tuple[str, ...]
    evidence: str
    listing: Listing
    route: str | None = None  # how the device runs it: "exact SASS (sm_90)", "nothing", ...
    runs: bool | None = None  # whether anything in it can run on the device
    strict: bool = False  # judged per kernel, like the project's own artifacts


@dataclass(frozen=True)
class Execution:
    """One entry point run on one path, with what a good run looks like."""

    entry_point: str
    path: ExecPath
    command: str
    returncode: int | None  # None when killed
    timed_out: bool
    duration: float
    log: str
    log_sha256: str | None
    output_ok: bool
    expected_returncode: int = 0
    cache_clean: bool = True
    failure: RuntimeFailure | None = None  # the CUDA runtime error recognised in the output

    def facts(self) -> RunFacts:
        """What the decision core judges the run by."""
        return RunFacts(
            self.returncode,
            self.timed_out,
            self.expected_returncode,
            self.output_ok,
            self.cache_clean,
            self.failure,
        )

    @property
    def passed(self) -> bool:
        """Whether the run passed (:meth:`gate.rules.causes.RunFacts.passed`)."""
        return self.facts().passed()

    def reason(self) -> str:
        """Why it failed (or ``passed``), in one phrase, from what the record holds."""
        return self.facts().reason()


@dataclass(frozen=True)
class RunInfo:
    """Which run this is: its id, the machine, the runner class."""

    run_id: str
    runner: str
    runner_class: str | None


@dataclass(frozen=True)
class Environment:
    """The machine the run happened on."""

    host_arch: str
    os: str
    driver: DriverInfo | None
    toolkit: ToolkitInfo | None
    supported_targets: tuple[Target, ...]
    container: ContainerInfo | None


@dataclass(frozen=True)
class Device:
    """The device the run targeted: probed, or named with ``--target``."""

    capability: Capability | None
    target: Target | None
    source: str | None  # "probe", "--target" or None
    error: str | None


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
        verdict = self.verdict
        return {
            "version": RESULT_VERSION,
            "tool": {"name": "cuda-gate", "version": self.tool_version},
            "started": _iso(self.started),
            "finished": _iso(self.finished),
            "run": {
                "run_id": self.run.run_id,
                "runner": self.run.runner,
                "runner_class": self.run.runner_class,
            },
            "source": {
                "revision": self.source.revision,
                "dirty": self.source.dirty,
                "repository": self.source.repository,
            },
            "environment": _environment_json(self.environment),
            "device": {
                "capability": _str(self.device.capability),
                "target": _str(self.device.target),
                "source": self.device.source,
                "error": self.device.error,
            },
            "stages": [
                {
                    "name": s.name,
                    "status": s.status.value,
                    "detail": s.detail,
                    "duration": round(s.duration, 3),
                    "exit_code": s.exit_code,
                }
                for s in self.stages
            ],
            "builds": [
                {
                    "name": b.name,
                    "command": b.command,
                    "argv": list(b.argv),
                    "cwd": b.cwd,
                    "returncode": b.returncode,
                    "timed_out": b.timed_out,
                    "duration": round(b.duration, 3),
                }
                for b in self.builds
            ],
            "artifacts": [_artifact_json(a) for a in self.artifacts],
            "requirements": [
                {"target": str(r.target), "form": r.form.value} for r in self.requirements
            ],
            "loaded_libraries": [
                {
                    "path": lib.path,
                    "sha256": lib.sha256,
                    "declared": lib.declared,
                    "entry_points": list(lib.entry_points),
                    "evidence": lib.evidence,
                    "listing": listing_json(lib.listing, "cuda-gate reader")
                    if loaded_listings
                    else None,
                    "route": lib.route,
                    "runs": lib.runs,
                    "strict": lib.strict,
                }
                for lib in self.loaded_libraries
            ],
            "executions": [
                {
                    "entry_point": e.entry_point,
                    "path": e.path.value,
                    "command": e.command,
                    "returncode": e.returncode,
                    "expected_returncode": e.expected_returncode,
                    "timed_out": e.timed_out,
                    "duration": round(e.duration, 3),
                    "log": e.log,
                    "log_sha256": e.log_sha256,
                    "output_ok": e.output_ok,
                    "cache_clean": e.cache_clean,
                    "passed": e.passed,
                    "failure": e.failure.text if e.failure else None,
                }
                for e in self.executions
            ],
            "checks": [
                {
                    "name": c.name,
                    "classname": c.classname,
                    "state": c.state.value,
                    "message": c.message,
                    "duration": round(c.duration, 3),
                    "cause": c.cause.value if c.cause else None,
                    "path": c.path.value if c.path else None,
                }
                for c in self.checks
            ],
            "verdict": {
                "accepted": verdict.accepted,
                "statement": verdict.statement,
                "reasons": list(verdict.reasons),
                "cause": verdict.cause.value if verdict.cause else None,
                "exit_code": int(verdict.exit_code),
            },
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
        return _Parser(where).record(data)


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


def listing_json(listing: Listing, inspector: str) -> dict[str, Any]:
    """A listing as result.json holds it."""
    return {
        "inspector": inspector,
        "entries": [
            {
                "kind": e.kind.value,
                "target": str(e.target),
                "ptx_isa": _str(e.ptx_isa),
                "kernels": list(e.kernels),
                "size": e.size,
            }
            for e in listing.entries
        ],
    }


def _artifact_json(a: Artifact) -> dict[str, Any]:
    return {
        "name": a.name,
        "path": a.path,
        "sha256": a.sha256,
        "size": a.size,
        "host_format": a.host_format,
        "elf_machine": a.elf_machine,
        "dependencies": [
            {"name": d.name, "needed_by": d.needed_by, "resolved": d.resolved}
            for d in a.dependencies
        ],
        "listing": listing_json(a.listing, a.inspector),
        "cross_check": None
        if a.cross_check is None
        else {
            "tool": a.cross_check.tool,
            "agrees": a.cross_check.agrees,
            "disagreements": list(a.cross_check.disagreements),
        },
    }


def _environment_json(env: Environment) -> dict[str, Any]:
    return {
        "host_arch": env.host_arch,
        "os": env.os,
        "driver": None
        if env.driver is None
        else {
            "name": env.driver.name,
            "driver_version": env.driver.driver_version,
            "cuda_version": str(env.driver.cuda_version),
        },
        "toolkit": None
        if env.toolkit is None
        else {
            "version": str(env.toolkit.version),
            "release": env.toolkit.release,
            "nvcc": env.toolkit.nvcc,
        },
        "supported_targets": [str(t) for t in env.supported_targets],
        "container": None if env.container is None else env.container.to_json(),
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _str(value: object | None) -> str | None:
    return None if value is None else str(value)


class _Parser:
    """Reads one result.json; every problem is one BadInputError line naming the file."""

    def __init__(self, where: str) -> None:
        self.where = where
        # Targets and versions repeat across thousands of listing entries: parse each once.
        self._parsed: dict[tuple[type, str], Any] = {}

    def fail(self, what: str) -> BadInputError:
        return BadInputError(f"{self.where}: not a cuda-gate run record: {what}")

    def obj(self, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = data.get(key)
        if not isinstance(value, Mapping):
            raise self.fail(f"{key!r} is missing or not an object")
        return value

    def objs(self, data: Mapping[str, Any], key: str, *, default: bool = False) -> list[Any]:
        if default and key not in data:
            return []
        value = data.get(key)
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise self.fail(f"{key!r} is missing or not a list of objects")
        return value

    def text(self, data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:  # noqa: ANN401
        value = data.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise self.fail(f"{key!r} is missing or not a string")
        return value

    def flag(self, data: Mapping[str, Any], key: str, default: bool | None = None) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{key!r} is missing or not true/false")
        return value

    def optional_flag(self, data: Mapping[str, Any], key: str) -> bool | None:
        value = data.get(key)
        if value is not None and not isinstance(value, bool):
            raise self.fail(f"{key!r} is not true, false or null")
        return value

    def number(self, data: Mapping[str, Any], key: str, default: float | None = None) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{key!r} is missing or not a number")
        return float(value)

    def integer(self, data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:  # noqa: ANN401
        value = data.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} is missing or not an integer")
        return value

    def parsed(self, kind: Any, text: str | None) -> Any:  # noqa: ANN401
        if text is None:
            return None
        known = self._parsed.get((kind, text))
        if known is not None:
            return known
        try:
            value = self._parsed[kind, text] = kind.parse(text)
        except ConfigError as e:
            raise self.fail(e.message) from e
        return value

    def when(self, text: str) -> datetime:
        try:
            return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError as e:
            raise self.fail(f"time {text!r} is not YYYY-MM-DDTHH:MM:SSZ") from e

    def record(self, data: object) -> RunRecord:
        if not isinstance(data, Mapping):
            raise self.fail("not a JSON object")
        version = data.get("version")
        if version not in READABLE_VERSIONS:
            raise BadInputError(
                f"{self.where}: run record version {version!r} is not one this cuda-gate "
                f"reads ({', '.join(map(str, READABLE_VERSIONS))})"
            )
        tool = self.obj(data, "tool")
        run = self.obj(data, "run")
        source = self.obj(data, "source")
        device = self.obj(data, "device")
        record = RunRecord(
            tool_version=self.text(tool, "version"),
            started=self.when(self.text(data, "started")),
            finished=self.when(self.text(data, "finished")),
            run=RunInfo(
                self.text(run, "run_id"),
                self.text(run, "runner"),
                self.text(run, "runner_class", optional=True),
            ),
            source=SourceInfo(
                self.text(source, "revision", optional=True),
                self.optional_flag(source, "dirty"),
                self.text(source, "repository", optional=True),
            ),
            environment=self.environment(self.obj(data, "environment")),
            device=Device(
                self.parsed(Capability, self.text(device, "capability", optional=True)),
                self.parsed(Target, self.text(device, "target", optional=True)),
                self.text(device, "source", optional=True),
                self.text(device, "error", optional=True),
            ),
            stages=tuple(self.stage(s) for s in self.objs(data, "stages", default=True)),
            builds=tuple(self.build(b) for b in self.objs(data, "builds")),
            artifacts=tuple(self.artifact(a) for a in self.objs(data, "artifacts")),
            requirements=self.requirements(data, version),
            loaded_libraries=tuple(
                self.loaded(x) for x in self.objs(data, "loaded_libraries", default=True)
            ),
            executions=tuple(self.execution(e, version) for e in self.objs(data, "executions")),
            checks=tuple(self.check(c, version) for c in self.objs(data, "checks")),
            diagnoses=tuple(self.strings(data, "diagnoses")),
            paths_proved=tuple(self.strings(data, "paths_proved")),
            notes=tuple(self.strings(data, "notes")),
            baseline=None
            if data.get("baseline") is None
            else Baseline.from_json(data["baseline"], self.where),
            policy=None
            if data.get("policy") is None
            else ReleasePolicy.from_json(data["policy"], self.where),
            launches=None
            if data.get("launches") is None
            else Launches.from_json(data["launches"], self.where),
        )
        self.same_verdict(self.obj(data, "verdict"), record, version)
        return record

    def strings(self, data: Mapping[str, Any], key: str) -> list[str]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{key!r} is not a list of strings")
        return value

    def environment(self, env: Mapping[str, Any]) -> Environment:
        driver = env.get("driver")
        toolkit = env.get("toolkit")
        container = env.get("container")
        return Environment(
            host_arch=self.text(env, "host_arch"),
            os=self.text(env, "os"),
            driver=None
            if not isinstance(driver, Mapping)
            else DriverInfo(
                self.text(driver, "name"),
                self.text(driver, "driver_version"),
                self.parsed(Version, self.text(driver, "cuda_version")),
            ),
            toolkit=None
            if not isinstance(toolkit, Mapping)
            else ToolkitInfo(
                self.parsed(Version, self.text(toolkit, "version")),
                self.text(toolkit, "release"),
                self.text(toolkit, "nvcc"),
            ),
            supported_targets=tuple(
                self.parsed(Target, t) for t in self.strings(env, "supported_targets")
            ),
            container=None
            if not isinstance(container, Mapping)
            else ContainerInfo.from_json(container, self.where),
        )

    def stage(self, s: Mapping[str, Any]) -> Stage:
        try:
            status = StageStatus(s.get("status"))
        except ValueError as e:
            raise self.fail(f"stage status {s.get('status')!r}") from e
        return Stage(
            self.text(s, "name"),
            status,
            self.text(s, "detail"),
            self.number(s, "duration", 0.0),
            self.integer(s, "exit_code", optional=True),
        )

    def build(self, b: Mapping[str, Any]) -> Build:
        argv = b.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise self.fail("a build's 'argv' is not a list of strings")
        return Build(
            self.text(b, "name"),
            self.text(b, "command"),
            tuple(argv),
            self.text(b, "cwd", optional=True),
            self.integer(b, "returncode"),
            self.number(b, "duration"),
            self.flag(b, "timed_out", default=False),
        )

    def listing(self, data: Mapping[str, Any]) -> Listing:
        entries = []
        for e in self.objs(data, "entries"):
            try:
                kind = Kind(e.get("kind"))
            except ValueError as err:
                raise self.fail(f"entry kind {e.get('kind')!r}") from err
            target_text = self.text(e, "target")
            if kind is Kind.LTOIR and target_text.startswith("lto_"):
                target_text = "sm_" + target_text.removeprefix("lto_")
            kernels = e.get("kernels", [])
            if not isinstance(kernels, list) or not all(isinstance(k, str) for k in kernels):
                raise self.fail("an entry's 'kernels' is not a list of strings")
            size = e.get("size", 0)  # absent before version 4: unknown
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise self.fail("an entry's 'size' is not a number of bytes")
            entries.append(
                DeviceEntry(
                    kind,
                    self.parsed(Target, target_text),
                    tuple(kernels),
                    self.parsed(Version, self.text(e, "ptx_isa", optional=True)),
                    size=size,
                )
            )
        return Listing(tuple(entries))

    def artifact(self, a: Mapping[str, Any]) -> Artifact:
        cross = a.get("cross_check")
        listing = self.obj(a, "listing")
        return Artifact(
            name=self.text(a, "name"),
            path=self.text(a, "path"),
            sha256=self.text(a, "sha256"),
            size=self.integer(a, "size"),
            host_format=self.text(a, "host_format"),
            elf_machine=self.text(a, "elf_machine"),
            dependencies=tuple(
                Dependency(
                    self.text(d, "name"),
                    self.text(d, "needed_by", optional=True) or "",
                    self.text(d, "resolved", optional=True),
                )
                for d in self.objs(a, "dependencies")
            ),
            listing=self.listing(listing),
            inspector=self.text(listing, "inspector"),
            cross_check=None
            if not isinstance(cross, Mapping)
            else CrossCheck(self.text(cross, "tool"), tuple(self.strings(cross, "disagreements"))),
        )

    def loaded(self, x: Mapping[str, Any]) -> LoadedLibrary:
        return LoadedLibrary(
            path=self.text(x, "path"),
            sha256=self.text(x, "sha256"),
            declared=self.flag(x, "declared"),
            entry_points=tuple(self.strings(x, "entry_points")),
            evidence=self.text(x, "evidence"),
            listing=self.listing(self.obj(x, "listing")),
            route=self.text(x, "route", optional=True),
            runs=self.optional_flag(x, "runs"),
            strict=self.flag(x, "strict", default=False),
        )

    def execution(self, e: Mapping[str, Any], version: int) -> Execution:
        try:
            path = ExecPath(e.get("path"))
        except ValueError as err:
            raise self.fail(f"execution path {e.get('path')!r}") from err
        returncode = self.integer(e, "returncode", optional=True)
        timed_out = self.flag(e, "timed_out")
        output_ok = self.flag(e, "output_ok")
        stored = self.flag(e, "passed")
        if version == 1:
            # Version 1 stored only the outcome: recover the expectations it implies.
            expected = returncode if stored and returncode is not None else 0
            clean = stored or timed_out or returncode != expected or not output_ok
        else:
            expected = self.integer(e, "expected_returncode")
            clean = self.flag(e, "cache_clean")
        execution = Execution(
            entry_point=self.text(e, "entry_point"),
            path=path,
            command=self.text(e, "command"),
            returncode=returncode,
            timed_out=timed_out,
            duration=self.number(e, "duration"),
            log=self.text(e, "log"),
            log_sha256=self.text(e, "log_sha256", optional=True),
            output_ok=output_ok,
            expected_returncode=expected,
            cache_clean=clean,
            failure=RuntimeFailure.from_text(self.text(e, "failure", optional=True)),
        )
        if execution.passed != stored:
            raise self.fail(
                f"execution {execution.entry_point} [{path.value}] says passed={stored}, "
                f"its own fields say {execution.passed}"
            )
        return execution

    def requirements(self, data: Mapping[str, Any], version: int) -> tuple[Requirement, ...]:
        if version < 3:  # the targets alone, each of its own form
            targets = self.strings(data, "required_targets")
            return tuple(Requirement.of_target(self.parsed(Target, t)) for t in targets)
        found = []
        for r in self.objs(data, "requirements"):
            try:
                form = Form(r.get("form"))
            except ValueError as e:
                raise self.fail(f"requirement form {r.get('form')!r}") from e
            found.append(Requirement(self.parsed(Target, self.text(r, "target")), form))
        return tuple(found)

    def check(self, c: Mapping[str, Any], version: int) -> Check:
        cause_text = c.get("cause")
        try:
            cause = Cause(cause_text) if cause_text is not None else None
        except ValueError as e:
            raise self.fail(f"check cause {cause_text!r}") from e
        path_text = c.get("path")
        try:
            path = ExecPath(path_text) if path_text is not None else None
        except ValueError as e:
            raise self.fail(f"check path {path_text!r}") from e
        if version < 3:
            passed = self.flag(c, "passed")
            skipped = self.flag(c, "skipped", default=False)
            state = CheckState.NOT_RUN if skipped else CheckState.of(passed)
        else:
            try:
                state = CheckState(c.get("state"))
            except ValueError as e:
                raise self.fail(f"check state {c.get('state')!r}") from e
        return Check(
            name=self.text(c, "name"),
            classname=self.text(c, "classname"),
            state=state,
            message=self.text(c, "message"),
            duration=self.number(c, "duration", 0.0),
            cause=cause,
            path=path,
        )

    def same_verdict(self, stored: Mapping[str, Any], record: RunRecord, version: int) -> None:
        accepted = self.flag(stored, "accepted")
        self.text(stored, "statement")
        if version >= 3 and accepted != record.verdict.accepted:
            raise self.fail(
                f"the stored verdict (accepted={accepted}) disagrees with its own checks "
                f"(accepted={record.verdict.accepted})"
            )
