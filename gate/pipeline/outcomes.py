"""The outcomes of the steps between the stages' own, and what the run record gets of
them all (:func:`found`, a function of the outcomes, computed once at the end)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gate.config import EntryPoint, ResolvedArtifact
from gate.launch.recorder import Recorder
from gate.launch.summary import Launches
from gate.pipeline.beside import Beside
from gate.pipeline.fold import Outcomes
from gate.pipeline.options import RunOptions
from gate.reader.hostelf import Dependency, HostFormat
from gate.record import Artifact, Build, Device, Environment, Execution, LoadedLibrary
from gate.render.live import Counter
from gate.rules.require import Requirement
from gate.rules.verdict import Check, Diagnosed
from gate.stages.build import BuildOutcome
from gate.stages.environment import EnvironmentOutcome
from gate.stages.inspect import InspectOutcome
from gate.stages.probe import ProbeOutcome
from gate.system import git, machine

if TYPE_CHECKING:
    from gate.stages import inimage
    from gate.stages.execute import ExecuteOutcome


@dataclass(frozen=True)
class Prepared:
    """Before the build: what ``{nvcc}``/``{python}`` stand for, the requirement the
    device in front sets, what was started beside, and what a run in the image skips."""

    tools: dict[str, str]
    first: Requirement
    beside: Beside
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImageRead:
    """The inspect stage begun: in the image, its artifacts and its loader's dependencies."""

    began: float
    count: Counter
    files: inimage.ImageFiles | None = None
    from_image: tuple[tuple[ResolvedArtifact, str], ...] | None = None
    deps_of: Callable[[Path, HostFormat], tuple[Dependency, ...]] | None = None


@dataclass(frozen=True)
class Ready:
    """The execute stage begun: the entry points, the launch recorder and what it says."""

    began: float
    points: tuple[EntryPoint, ...]
    recorder: Recorder | None
    notes: tuple[str, ...] = ()
    missing: tuple[Check, ...] = ()  # entry points whose program is not there: not run


@dataclass(frozen=True)
class Found:
    """What stages 1-5 found, as the run record's fields."""

    source: git.SourceInfo
    environment: Environment
    device: Device
    builds: tuple[Build, ...] = ()
    requirements: tuple[Requirement, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    executions: tuple[Execution, ...] = ()
    loaded_libraries: tuple[LoadedLibrary, ...] = ()
    diagnoses: tuple[Diagnosed, ...] = ()
    paths_proved: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    launches: Launches | None = None


def found(done: Outcomes, options: RunOptions) -> Found:
    """What the run record gets of the outcomes (the defaults for a stage that never ended)."""
    from gate.stages.execute import ExecuteOutcome  # noqa: PLC0415 - preloaded (selfcheck)

    env = done.result("environment", EnvironmentOutcome)
    probed = done.result("probe", ProbeOutcome)
    built = done.result("build", BuildOutcome)
    inspected = done.result("inspect", InspectOutcome)
    ran = done.result("execute", ExecuteOutcome)
    prepared, ready = done.get(Prepared), done.get(Ready)
    notes = (
        *(prepared.notes if prepared is not None else ()),
        *_cross_check_notes(inspected),
        *(ready.notes if ready is not None else ()),
    )
    before = Found(
        env.source if env is not None else git.SourceInfo(None, None, None),
        env.environment if env is not None else _no_environment(),
        _device(probed, options),
        builds=built.builds if built is not None else (),
        requirements=built.required if built is not None else (),
        artifacts=tuple(a.record() for a in inspected.artifacts) if inspected else (),
        notes=notes,
    )
    return before if ran is None else _with_runs(before, ran)


def _no_environment() -> Environment:
    return Environment(machine.host_arch(), machine.os_description(), None, None, (), None)


def _device(probed: ProbeOutcome | None, options: RunOptions) -> Device:
    if probed is None:
        return Device(None, options.target, "--target" if options.target else None, None)
    return Device(probed.capability, probed.target, probed.target_source, probed.device_error)


def _cross_check_notes(inspected: InspectOutcome | None) -> tuple[str, ...]:
    if inspected is None:
        return ()
    notes = (a.cross_check_note for a in inspected.artifacts if a.cross_check_note)
    return tuple(dict.fromkeys(notes))


def _with_runs(before: Found, ran: ExecuteOutcome) -> Found:
    return replace(
        before,
        executions=ran.executions,
        loaded_libraries=ran.loaded,
        diagnoses=ran.diagnoses,
        paths_proved=ran.paths_proved,
        launches=ran.launches.summary() if ran.launches is not None else None,
    )
