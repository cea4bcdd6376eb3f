"""The records a run record is made of: what the run built, inspected, loaded and ran.

Frozen, filled in by the stages; written to result.json and read back field by field
(:mod:`gate.record.codec`), where :mod:`gate.record.shapes` says how each part's JSON differs.
"""

from __future__ import annotations

from dataclasses import dataclass

# The fields' types are read at run time (gate.record.codec): keep these imports real.
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
    inspector: str = READER
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
