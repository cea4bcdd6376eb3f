"""The records a run record is made of, each with its part of result.json (:meth:`to_json`).

What the run built, inspected, loaded and ran, and where: frozen, filled in by the stages,
written by :meth:`gate.record.RunRecord.to_json` and read back by
:class:`gate.record.decode.Reader`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gate.container.info import ContainerInfo
from gate.reader.hostelf import Dependency
from gate.reader.listing import Listing
from gate.rules.causes import ExecPath, RunFacts, RuntimeFailure
from gate.rules.targets import Capability, Target
from gate.system.machine import DriverInfo, ToolkitInfo

# The reader's name for a listing a loaded library's JSON gives (they are all ours).
READER = "cuda-gate reader"


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

    def to_json(self) -> dict[str, Any]:
        """The build as result.json's ``builds`` holds it."""
        return {
            "name": self.name,
            "command": self.command,
            "argv": list(self.argv),
            "cwd": self.cwd,
            "returncode": self.returncode,
            "timed_out": self.timed_out,
            "duration": round(self.duration, 3),
        }


@dataclass(frozen=True)
class CrossCheck:
    """cuobjdump's view of an artifact compared with ours."""

    tool: str
    disagreements: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        """No disagreement."""
        return not self.disagreements

    def to_json(self) -> dict[str, Any]:
        """The cross-check as an artifact's ``cross_check`` holds it."""
        return {
            "tool": self.tool,
            "agrees": self.agrees,
            "disagreements": list(self.disagreements),
        }


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
    inspector: str = READER
    cross_check: CrossCheck | None = None

    def to_json(self) -> dict[str, Any]:
        """The artifact as result.json's ``artifacts`` holds it."""
        return {
            "name": self.name,
            "path": self.path,
            "sha256": self.sha256,
            "size": self.size,
            "host_format": self.host_format,
            "elf_machine": self.elf_machine,
            "dependencies": [
                {"name": d.name, "needed_by": d.needed_by, "resolved": d.resolved}
                for d in self.dependencies
            ],
            "listing": listing_json(self.listing, self.inspector),
            "cross_check": None if self.cross_check is None else self.cross_check.to_json(),
        }


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

    def to_json(self, *, listing: bool = True) -> dict[str, Any]:
        """The library as result.json's ``loaded_libraries`` holds it; without ``listing``,
        its listing is null."""
        return {
            "path": self.path,
            "sha256": self.sha256,
            "declared": self.declared,
            "entry_points": list(self.entry_points),
            "evidence": self.evidence,
            "listing": listing_json(self.listing, READER) if listing else None,
            "route": self.route,
            "runs": self.runs,
            "strict": self.strict,
        }


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

    def to_json(self) -> dict[str, Any]:
        """The run as result.json's ``executions`` holds it (``passed`` as decided)."""
        return {
            "entry_point": self.entry_point,
            "path": self.path.value,
            "command": self.command,
            "returncode": self.returncode,
            "expected_returncode": self.expected_returncode,
            "timed_out": self.timed_out,
            "duration": round(self.duration, 3),
            "log": self.log,
            "log_sha256": self.log_sha256,
            "output_ok": self.output_ok,
            "cache_clean": self.cache_clean,
            "passed": self.passed,
            "failure": self.failure.text if self.failure else None,
        }


@dataclass(frozen=True)
class RunInfo:
    """Which run this is: its id, the machine, the runner class."""

    run_id: str
    runner: str
    runner_class: str | None

    def to_json(self) -> dict[str, Any]:
        """result.json's ``run``."""
        return {"run_id": self.run_id, "runner": self.runner, "runner_class": self.runner_class}


@dataclass(frozen=True)
class Environment:
    """The machine the run happened on."""

    host_arch: str
    os: str
    driver: DriverInfo | None
    toolkit: ToolkitInfo | None
    supported_targets: tuple[Target, ...]
    container: ContainerInfo | None

    def to_json(self) -> dict[str, Any]:
        """result.json's ``environment``."""
        return {
            "host_arch": self.host_arch,
            "os": self.os,
            "driver": None if self.driver is None else _driver_json(self.driver),
            "toolkit": None if self.toolkit is None else _toolkit_json(self.toolkit),
            "supported_targets": [str(t) for t in self.supported_targets],
            "container": None if self.container is None else self.container.to_json(),
        }


@dataclass(frozen=True)
class Device:
    """The device the run targeted: probed, or named with ``--target``."""

    capability: Capability | None
    target: Target | None
    source: str | None  # "probe", "--target" or None
    error: str | None

    def to_json(self) -> dict[str, Any]:
        """result.json's ``device``."""
        return {
            "capability": text_or_none(self.capability),
            "target": text_or_none(self.target),
            "source": self.source,
            "error": self.error,
        }


def listing_json(listing: Listing, inspector: str) -> dict[str, Any]:
    """A listing as result.json holds it."""
    return {
        "inspector": inspector,
        "entries": [
            {
                "kind": e.kind.value,
                "target": str(e.target),
                "ptx_isa": text_or_none(e.ptx_isa),
                "kernels": list(e.kernels),
                "size": e.size,
            }
            for e in listing.entries
        ],
    }


def _driver_json(driver: DriverInfo) -> dict[str, Any]:
    return {
        "name": driver.name,
        "driver_version": driver.driver_version,
        "cuda_version": str(driver.cuda_version),
    }


def _toolkit_json(toolkit: ToolkitInfo) -> dict[str, Any]:
    return {"version": str(toolkit.version), "release": toolkit.release, "nvcc": toolkit.nvcc}


def iso(moment: datetime) -> str:
    """A time as result.json writes it: UTC, to the second (``2026-11-29T18:00:00Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def text_or_none(value: object | None) -> str | None:
    """``str(value)``, or None for None."""
    return None if value is None else str(value)
