"""The run record: everything one gate run found, as frozen records, and its one JSON form.

``result.json`` (schema ``gate/schemas/result.schema.json``) is written from a
:class:`RunRecord` by :meth:`RunRecord.to_json` and read back only through
:meth:`RunRecord.from_json` / :func:`load`, which check the version and the shape.
Every reader (manifest, verify, store, matrix, GitHub reporting) uses these.

Whether something passed is decided once, here, from the record's own fields:

* an execution passed when it was not killed, exited with the expected status,
  printed the expected output and left its JIT cache folder empty;
* the verdict follows from the stages, the checks and the executions (see
  :func:`decide`); a stored verdict that disagrees with them is not a record.

Version history: 1 (first release); 2 adds each execution's expected exit status
and cache check (so "passed" can be recomputed instead of guessed from exit 0),
a ranked cause on each failing check, the stages and their status, and, for
loaded libraries, how the device runs them.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gate import jsonutil
from gate.errors import BadInputError, ConfigError, ExitCode
from gate.git import SourceInfo
from gate.machine import ContainerInfo, DriverInfo, ToolkitInfo
from gate.reader.hostelf import Dependency
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.reader.targets import Capability, Target, Version

RESULT_FILE = "result.json"
RESULT_VERSION = 2
READABLE_VERSIONS = (1, 2)
ACCEPTED_STATEMENT = "Passed with the current driver, current artifacts, and tested entry points."
NOT_EXECUTED = "execution not verified"
STAGES = ("environment", "probe", "build", "inspect", "execute", "report", "manifest", "store")


class ExecPath(enum.Enum):
    """The two execution paths the gate proves separately."""

    NATIVE = "native"
    JIT = "jit"

    @property
    def log_name(self) -> str:
        """The seed's log file name for this path."""
        return "native.log" if self is ExecPath.NATIVE else "ptx-jit.log"

    @property
    def title(self) -> str:
        """Human name of the path."""
        return "native SASS (PTX JIT disabled)" if self is ExecPath.NATIVE else "forced PTX JIT"


class Cause(enum.Enum):
    """Why a check failed, most fundamental first: the verdict's headline is the first one.

    The order is the ranking (a missing target explains a failed run, not the other
    way round); the value is the JUnit failure ``type``.
    """

    HOST_ARCH = "wrong-host-arch"
    TOOLCHAIN = "toolchain"
    WRONG_TARGET = "wrong-target"
    MISSING_SASS = "missing-sass"
    MISSING_PTX = "missing-ptx"
    MISSING_KERNEL = "missing-kernel"
    NO_DEVICE_CODE = "no-device-code"
    LOADED_LIBRARY = "loaded-library"
    DRIVER_TOO_OLD = "driver-too-old"
    NO_KERNEL_IMAGE = "no-kernel-image"
    JIT_DISABLED = "jit-disabled"
    UNSUPPORTED_PTX = "unsupported-ptx"
    INVALID_PTX = "invalid-ptx"
    TIMEOUT = "timeout"
    EXIT_STATUS = "exit-status"
    OUTPUT = "unexpected-output"
    JIT_CACHE = "jit-cache-written"
    PTX_LOAD = "ptx-load-failed"
    PREDICTION = "prediction-mismatch"
    CROSS_CHECK = "cross-check"
    EVIDENCE = "evidence-incomplete"
    INTERNAL = "internal-error"

    @property
    def rank(self) -> int:
        """Position in the ranking: lower explains more."""
        return _RANK[self]


_RANK = {cause: i for i, cause in enumerate(Cause)}


@dataclass(frozen=True)
class Check:
    """One check of the run: one JUnit test case.

    ``cause`` says why a failed check failed (None for passed and skipped ones);
    ``output`` is the log shown in JUnit's system-out, not part of result.json.
    """

    name: str
    classname: str
    passed: bool
    message: str
    duration: float = 0.0
    output: str = ""
    skipped: bool = False
    cause: Cause | None = None

    @property
    def failed(self) -> bool:
        """Neither passed nor skipped."""
        return not self.passed and not self.skipped

    @property
    def status(self) -> str:
        """``PASS``, ``FAIL`` or ``SKIP``."""
        if self.skipped:
            return "SKIP"
        return "PASS" if self.passed else "FAIL"


class StageStatus(enum.Enum):
    """How a stage ended."""

    RAN = "ran"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: whether it ran, and why not or what stopped it."""

    name: str
    status: StageStatus
    detail: str = ""
    duration: float = 0.0
    exit_code: int | None = None  # a failed stage's exit status (gate.errors.ExitCode)


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
    failure: str | None = None  # the CUDA runtime error recognised in the output

    @property
    def passed(self) -> bool:
        """Not killed, the expected exit status and output, and no JIT cache left behind."""
        return (
            not self.timed_out
            and self.returncode == self.expected_returncode
            and self.output_ok
            and self.cache_clean
        )


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
class Verdict:
    """Accepted or not, the statement, the reasons ranked by cause."""

    accepted: bool
    statement: str
    reasons: tuple[str, ...]
    cause: Cause | None = None
    exit_code: ExitCode = ExitCode.OK

    @property
    def headline(self) -> str:
        """The statement without its ``not accepted:`` prefix."""
        return self.statement.removeprefix("not accepted: ")


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
    required_targets: tuple[Target, ...] = ()
    loaded_libraries: tuple[LoadedLibrary, ...] = ()
    executions: tuple[Execution, ...] = ()
    checks: tuple[Check, ...] = ()
    diagnoses: tuple[str, ...] = ()
    paths_proved: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict:
        """The verdict, decided from the record itself (see :func:`decide`)."""
        return decide(self.stages, self.checks, self.executions)

    @property
    def failed_checks(self) -> tuple[Check, ...]:
        """Checks that neither passed nor were skipped."""
        return tuple(c for c in self.checks if c.failed)

    def to_json(self) -> dict[str, Any]:
        """The result.json document."""
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
            "required_targets": [str(t) for t in self.required_targets],
            "loaded_libraries": [
                {
                    "path": lib.path,
                    "sha256": lib.sha256,
                    "declared": lib.declared,
                    "entry_points": list(lib.entry_points),
                    "evidence": lib.evidence,
                    "listing": listing_json(lib.listing, "cuda-gate reader"),
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
                    "failure": e.failure,
                }
                for e in self.executions
            ],
            "checks": [
                {
                    "name": c.name,
                    "classname": c.classname,
                    "passed": c.passed,
                    "skipped": c.skipped,
                    "message": c.message,
                    "duration": round(c.duration, 3),
                    "cause": c.cause.value if c.cause else None,
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
        }

    def dumps(self) -> str:
        """result.json's text: sorted keys, two-space indent, trailing newline."""
        return jsonutil.dumps(self.to_json())

    @classmethod
    def from_json(cls, data: object, where: str) -> RunRecord:
        """Parse a result.json document; BadInputError naming ``where`` when it is not one."""
        return _Parser(where).record(data)


def load(evidence_dir: Path) -> RunRecord:
    """The run record of an evidence folder; BadInputError when absent or malformed."""
    path = evidence_dir / RESULT_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise BadInputError(f"{path}: no run record (did the gate run?)") from e
    except (OSError, UnicodeDecodeError) as e:
        raise BadInputError(f"{path}: cannot read the run record: {e}") from e
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise BadInputError(f"{path}: not valid JSON: {e}") from e
    return RunRecord.from_json(data, str(path))


def decide(
    stages: Sequence[Stage], checks: Sequence[Check], executions: Sequence[Execution]
) -> Verdict:
    """The verdict: accepted only when every stage ran, every check passed, both paths ran.

    The headline (and the first reason) is what stopped the pipeline, else the failing
    check whose cause ranks first, else "execution not verified" with why. The exit
    status follows the headline: a failed stage's own status, 1 for a failed check, 4
    when only the missing device kept an otherwise clean run from being accepted.
    """
    failing = sorted((c for c in checks if c.failed), key=_check_rank)
    reasons = [f"{c.name}: {c.message}" for c in failing]
    execute = next((s for s in stages if s.name == "execute"), None)
    skipped = execute is not None and execute.status is StageStatus.SKIPPED
    if skipped or not _executed(executions):
        why = execute.detail if skipped and execute is not None and execute.detail else ""
        reasons.append(f"{NOT_EXECUTED} ({why})" if why else NOT_EXECUTED)
    failed_stage = next((s for s in stages if s.status is StageStatus.FAILED), None)
    if failed_stage is not None:
        detail = failed_stage.detail or f"the {failed_stage.name} stage failed"
        own = [c for c in failing if c.classname.startswith(f"gate.{failed_stage.name}")]
        cause = own[0].cause if own else None
        code = ExitCode(failed_stage.exit_code or ExitCode.NOT_ACCEPTED)
        rest = tuple(r for r in reasons if not r.endswith(detail))
        return Verdict(False, f"not accepted: {detail}", (detail, *rest), cause, code)
    if failing:
        first = failing[0]
        return Verdict(
            False, f"not accepted: {reasons[0]}", tuple(reasons), first.cause, ExitCode.NOT_ACCEPTED
        )
    if reasons:
        no_device = skipped and execute is not None and execute.exit_code == ExitCode.NO_DEVICE
        code = ExitCode.NO_DEVICE if no_device else ExitCode.NOT_ACCEPTED
        return Verdict(False, f"not accepted: {reasons[0]}", tuple(reasons), None, code)
    return Verdict(True, ACCEPTED_STATEMENT, (), None, ExitCode.OK)


def _check_rank(check: Check) -> int:
    return check.cause.rank if check.cause else len(_RANK)


def _executed(executions: Sequence[Execution]) -> bool:
    """Both paths ran for every entry point that ran at all (and at least one did)."""
    paths: dict[str, set[ExecPath]] = {}
    for e in executions:
        paths.setdefault(e.entry_point, set()).add(e.path)
    return bool(paths) and all(p == set(ExecPath) for p in paths.values())


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
        "container": None
        if env.container is None
        else {"image": env.container.image, "digest": env.container.digest},
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
            required_targets=tuple(
                self.parsed(Target, t) for t in self.strings(data, "required_targets")
            ),
            loaded_libraries=tuple(
                self.loaded(x) for x in self.objs(data, "loaded_libraries", default=True)
            ),
            executions=tuple(self.execution(e, version) for e in self.objs(data, "executions")),
            checks=tuple(self.check(c) for c in self.objs(data, "checks")),
            diagnoses=tuple(self.strings(data, "diagnoses")),
            paths_proved=tuple(self.strings(data, "paths_proved")),
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
            else ContainerInfo(
                self.text(container, "image"), self.text(container, "digest", optional=True)
            ),
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
            entries.append(
                DeviceEntry(
                    kind,
                    self.parsed(Target, target_text),
                    tuple(kernels),
                    self.parsed(Version, self.text(e, "ptx_isa", optional=True)),
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
            failure=self.text(e, "failure", optional=True),
        )
        if execution.passed != stored:
            raise self.fail(
                f"execution {execution.entry_point} [{path.value}] says passed={stored}, "
                f"its own fields say {execution.passed}"
            )
        return execution

    def check(self, c: Mapping[str, Any]) -> Check:
        cause_text = c.get("cause")
        try:
            cause = Cause(cause_text) if cause_text is not None else None
        except ValueError as e:
            raise self.fail(f"check cause {cause_text!r}") from e
        return Check(
            name=self.text(c, "name"),
            classname=self.text(c, "classname"),
            passed=self.flag(c, "passed"),
            message=self.text(c, "message"),
            duration=self.number(c, "duration", 0.0),
            skipped=self.flag(c, "skipped", default=False),
            cause=cause,
        )

    def same_verdict(self, stored: Mapping[str, Any], record: RunRecord, version: int) -> None:
        accepted = self.flag(stored, "accepted")
        self.text(stored, "statement")
        if version >= 2 and accepted != record.verdict.accepted:
            raise self.fail(
                f"the stored verdict (accepted={accepted}) disagrees with its own checks "
                f"(accepted={record.verdict.accepted})"
            )
