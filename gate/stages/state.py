"""The state of one gate run: what the user asked for, and what the stages found so far.

Stages read the options and add to the state; the report is built from the state
whatever happened, so nothing a stage found is lost when a later one fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gate import config, proc, store
from gate import machine as environment
from gate.errors import GateError
from gate.evidence import EvidenceDir
from gate.reader.targets import Capability, Target
from gate.stages import build, checks, execute
from gate.stages import inspect as inspection

if TYPE_CHECKING:
    from gate.attest.signing import Signer


@dataclass(frozen=True)
class RunOptions:
    """What the user asked `cuda-gate run` to do."""

    evidence: Path = Path("gate-evidence")
    build_dir: Path | None = None
    project_dir: Path = Path()
    target: Target | None = None
    sass: tuple[Target, ...] | None = None
    ptx: tuple[Target, ...] | None = None
    timeout: float = execute.DEFAULT_TIMEOUT
    stop_after: str | None = None
    dump_sass: str = "auto"
    nvcc: str | None = None
    signer: Signer | None = None
    use_cuobjdump: bool = True
    store_settings: store.StoreSettings | None = None
    project_config: config.Config | None = None


@dataclass
class RunState:
    """What the stages found so far; the report is built from it whatever happened."""

    started: datetime
    evidence: EvidenceDir
    project_dir: Path = Path()
    checks: list[checks.Check] = field(default_factory=list)
    commands: list[proc.Result] = field(default_factory=list)
    host_arch: str = ""
    os: str = ""
    driver: environment.DriverInfo | None = None
    toolkit: environment.ToolkitInfo | None = None
    supported: tuple[Target, ...] = ()
    source: environment.SourceInfo | None = None
    capability: Capability | None = None
    device_error: str | None = None
    target: Target | None = None
    target_source: str | None = None
    builds: list[build.Build] = field(default_factory=list)
    artifacts: list[inspection.InspectedArtifact] = field(default_factory=list)
    executions: list[execute.Execution] = field(default_factory=list)
    required: tuple[Target, ...] = ()
    loaded: list[inspection.LoadedRecord] = field(default_factory=list)
    blocked: GateError | None = None
    stopped_after: str | None = None


def record_command(state: RunState, done: proc.Result) -> proc.Result:
    state.commands.append(done)
    state.evidence.write_text(
        "commands.txt", "".join(f"{r.command_line()}\n" for r in state.commands)
    )
    return done


def toolkit_of(state: RunState) -> environment.ToolkitInfo:
    """The toolkit the environment stage found (internal error if asked too early)."""
    if state.toolkit is None:
        raise GateError("internal error: no toolkit recorded before a stage that needs one")
    return state.toolkit


def target_of(state: RunState) -> Target:
    """The target the probe stage chose (internal error if asked too early)."""
    if state.target is None:
        raise GateError("internal error: no target chosen before a stage that needs one")
    return state.target
