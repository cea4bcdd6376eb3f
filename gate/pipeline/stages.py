"""Stages 1-5 (environment, probe, build, inspect, execute) in order, each recorded as it
ends: ran, failed or skipped, with what it found kept for the run record."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gate import proc
from gate.config import Config, EntryPoint, ResolvedArtifact
from gate.container.info import of_place
from gate.container.place import HOST, InImage, Place
from gate.errors import ExitCode, GateError, Interrupted, NoDeviceError
from gate.evidence import EvidenceDir
from gate.launch import recorder
from gate.launch.summary import Launches
from gate.pipeline.options import RunOptions, records_launches, tools
from gate.pipeline.progress import StageProgress, beat_interval
from gate.reader.hostelf import Dependency, HostFormat
from gate.record import (
    STAGES,
    Artifact,
    Build,
    Device,
    Environment,
    Execution,
    LoadedLibrary,
)
from gate.render.live import REDRAW_EVERY, Counter
from gate.rules.causes import Cause
from gate.rules.hosts import host_for
from gate.rules.require import Requirement
from gate.rules.verdict import Check, Stage, StageStatus
from gate.stages import build, environment, inspect, probe
from gate.stages.build import SMOKE_KERNEL
from gate.stages.runs import RunsIn
from gate.system import ci, git, machine

if TYPE_CHECKING:
    from gate.stages import execute, inimage

# In the evidence folder when a stage raised instead of failing: the traceback.
INTERNAL_ERROR_FILE = "internal-error.txt"


@dataclass(frozen=True)
class Found:
    """What stages 1-5 found, as the run record's fields; replaced, never changed."""

    source: git.SourceInfo
    environment: Environment
    device: Device
    builds: tuple[Build, ...] = ()
    requirements: tuple[Requirement, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    executions: tuple[Execution, ...] = ()
    loaded_libraries: tuple[LoadedLibrary, ...] = ()
    diagnoses: tuple[str, ...] = ()
    paths_proved: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    launches: Launches | None = None


class Stages:
    """Stages 1-5 in order; every stage ends up in the progress: ran, failed or skipped."""

    def __init__(
        self,
        options: RunOptions,
        config: Config,
        evidence: EvidenceDir,
        workdir: Path,
        p: StageProgress,
        *,
        before_project: Callable[[], None],
    ) -> None:
        self.options, self.config, self.evidence, self.workdir, self.p = (
            options,
            config,
            evidence,
            workdir,
            p,
        )
        self.before_project = before_project  # called before the project's first command
        self.remaining = list(STAGES[:5])
        # In the delivery image: every command in containers of it, the work folder mounted.
        self.place: Place = (
            HOST if options.image is None else replace(options.image, mounts=(workdir,))
        )
        self.files: inimage.ImageFiles | None = None  # the image's files, once read
        self.deferred: inspect.Deferred | None = None  # SASS dumps running beside execute
        self.smoke_ahead: execute.SmokeAhead | None = None  # until the execute stage takes it
        self.inspect_checks_end = 0
        self.found = Found(
            git.SourceInfo(None, None, None),
            Environment(machine.host_arch(), machine.os_description(), None, None, (), None),
            Device(None, options.target, "--target" if options.target else None, None),
        )

    def finish(
        self,
        name: str,
        began: float,
        outcome: StageResult,
        cause: Cause = Cause.TOOLCHAIN,
    ) -> bool:
        """Record one stage's outcome; True when the next stage may run."""
        p = self.p
        self.remaining.remove(name)
        p.commands += getattr(outcome, "commands", ())
        p.checks += outcome.checks
        self.evidence.write_text(
            "commands.txt", "".join(f"{r.command_line()}\n" for r in p.commands)
        )
        p.done(name, began, outcome.failure)
        if outcome.failure is not None:
            p.failed_check(name, outcome.failure, cause)
            return False
        return self.options.stop_after != name

    def take_smoke_ahead(self) -> execute.SmokeAhead | None:
        """The smoke program's runs started beside the build, handed over once."""
        ahead, self.smoke_ahead = self.smoke_ahead, None
        return ahead

    def skip_rest(self, stage: str, exit_code: ExitCode | None = None) -> None:
        """Every stage not run yet, skipped with the reason; the runs too, in JUnit."""
        reason = (
            f"stopped after the {stage} stage (--stop-after)"
            if self.options.stop_after == stage
            else f"the {stage} stage failed"
        )
        if "execute" in self.remaining:
            from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.guard.selfcheck)

            names = execute.entry_names(self.config)
            self.p.checks += execute.skipped_checks(names, f"not run: {reason}")
        for name in self.remaining:
            self.p.skip(name, reason, exit_code)
        self.remaining.clear()

    def run(self) -> Found:
        """Environment, then probe, then the rest (stopping where a stage says so)."""
        options, found = self.options, self.found
        began = self.p.start("environment")
        place = self.place
        env = environment.run(
            self.evidence,
            nvcc=options.nvcc,
            project_dir=options.project_dir,
            place=place,
            container=of_place(place) if isinstance(place, InImage) else None,
        )
        if isinstance(place, InImage):
            start = (place.runtime.version_command, place.image.command)
            env = replace(env, commands=(*(c for c in start if c is not None), *env.commands))
        found = self.found = replace(found, environment=env.environment, source=env.source)
        if not self.finish("environment", began, env):
            self.skip_rest("environment")
            return found
        assert env.environment.toolkit is not None  # noqa: S101 - no failure means a toolkit
        began = self.p.start("probe")
        probed = probe.run(
            self.evidence,
            nvcc=env.environment.toolkit.nvcc,
            supported=env.environment.supported_targets,
            workdir=self.workdir,
            explicit_target=options.target,
            use_cache=options.use_cache,
            place=place,
        )
        found = self.found = replace(
            found,
            device=Device(
                probed.capability, probed.target, probed.target_source, probed.device_error
            ),
        )
        no_device = isinstance(probed.failure, NoDeviceError)
        cause = Cause.TOOLCHAIN if no_device else Cause.WRONG_TARGET
        if not self.finish("probe", began, probed, cause):
            self.skip_rest("probe", ExitCode.NO_DEVICE if no_device else None)
            return found
        return self.build_to_execute(env.environment, probed)

    def build_to_execute(self, env: Environment, probed: probe.ProbeOutcome) -> Found:
        """Build, inspect and execute for the probed (or named) target."""
        self.before_project()
        assert probed.target is not None  # noqa: S101 - the probe stage ran
        assert env.toolkit is not None  # noqa: S101 - the environment stage ran
        tool_paths, pending = self.prepare(env.toolkit.nvcc, probed)
        # The device in front needs code built for it; a target named with --target
        # keeps its own form (sm_90a needs sm_90a).
        first = (
            Requirement.of_device(probed.capability)
            if probed.target_source == "probe" and probed.capability is not None
            else Requirement.of_target(probed.target)
        )
        built = self.run_build(probed, first, tool_paths, pending)
        if built is None:
            return self.found
        inspected = self.run_inspect(env, probed, built, first)
        if inspected is None:
            return self.found
        return self.run_execute(env, probed, built, inspected, prepared=(tool_paths, pending))

    def run_build(
        self,
        probed: probe.ProbeOutcome,
        first: Requirement,
        tool_paths: dict[str, str],
        pending: recorder.PendingBuild | None,
    ) -> build.BuildOutcome | None:
        """Stage 3: the smoke program and the project's builds; None when the run stops."""
        assert probed.target is not None  # noqa: S101 - the probe stage ran
        options = self.options
        began = self.p.start("build")
        built = build.run(
            self.evidence,
            config=self.config,
            target=probed.target,
            requirement=first,
            workdir=self.workdir,
            tools=tool_paths,
            sass=options.sass,
            ptx=options.ptx,
            use_cache=options.use_cache,
            prebuilt=options.prebuilt,
            on_smoke=self.smoke_starter(probed, pending),
            place=self.place,
        )
        self.found = replace(self.found, builds=built.builds, requirements=built.required)
        if not self.finish("build", began, built):
            self.skip_rest("build")
            return None
        return built

    def run_inspect(
        self,
        env: Environment,
        probed: probe.ProbeOutcome,
        built: build.BuildOutcome,
        first: Requirement,
    ) -> inspect.InspectOutcome | None:
        """Stage 4: the final artifacts and what they carry; None when the run stops."""
        assert probed.target is not None  # noqa: S101 - the probe stage ran
        options, config = self.options, self.config
        began = self.p.start("inspect")
        self.inspect_checks_end = len(self.p.checks)
        device = probed.capability or probed.target.capability
        count = Counter(self.p.where(), say=self.p.say, live=self.p.live)
        try:
            from_image, deps_of = self.image_artifacts()
        except GateError as e:
            count.clear()
            self.finish("inspect", began, inspect.InspectOutcome((), (), e), Cause.EVIDENCE)
            self.skip_rest("inspect")
            return None
        inspected = inspect.run(
            self.evidence,
            config=config,
            smoke=built.smoke,
            smoke_kernels=(SMOKE_KERNEL,),
            smoke_requirement=first,
            required=built.required,
            capability=probed.capability,
            driver_cuda=env.driver.cuda_version if env.driver else None,
            host=host_for(device, configured=config.host, here=env.host_arch),
            host_arch=env.host_arch,
            workdir=self.workdir,
            built_since=built.built_since,
            dump_sass=options.dump_sass,
            use_cuobjdump=options.use_cuobjdump,
            use_cache=options.use_cache,
            progress=count,
            runner_class=ci.runner_class(os.environ),
            from_image=from_image,
            deps_of=deps_of,
        )
        count.clear()
        self.deferred = inspected.deferred
        notes = tuple(
            dict.fromkeys(a.cross_check_note for a in inspected.artifacts if a.cross_check_note)
        )
        found = self.found
        self.found = replace(
            found,
            artifacts=tuple(a.record() for a in inspected.artifacts),
            notes=(*found.notes, *notes),
        )
        inspected_ok = self.finish("inspect", began, inspected, Cause.EVIDENCE)
        self.inspect_checks_end = len(self.p.checks)  # the SASS dump checks go here later
        if not inspected_ok:
            self.skip_rest("inspect")
            return None
        return inspected

    def run_execute(
        self,
        env: Environment,
        probed: probe.ProbeOutcome,
        built: build.BuildOutcome,
        inspected: inspect.InspectOutcome,
        *,
        prepared: tuple[dict[str, str], recorder.PendingBuild | None],
    ) -> Found:
        """Stage 5: every entry point on both paths (skipped without a device); ``prepared``:
        what ``{nvcc}``/``{python}`` stand for, and the launch recorder being built."""
        from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.guard.selfcheck)

        tool_paths, pending = prepared

        config, place = self.config, self.place
        points = execute.entry_points(config, built.smoke, self.options.timeout, tool_paths)
        if isinstance(place, InImage):
            points = [in_image(entry, config, place) for entry in points]
        if probed.capability is None:
            self.p.checks += execute.skipped(
                self.evidence, points, inspected.artifacts, "not run: no CUDA device"
            )
            self.remaining.remove("execute")
            self.p.skip("execute", "no CUDA device; see the probe stage", ExitCode.NO_DEVICE)
            return self.found
        began = self.p.start("execute")
        launch_recorder = pending.result() if pending is not None else None
        if launch_recorder is not None:
            # Said once: no CUPTI, or the user's own injection library kept in place.
            _, unused = launch_recorder.env_for(self.workdir, {})
            if launch_recorder.library is None or unused:
                note = unused or launch_recorder.note
                self.found = replace(self.found, notes=(*self.found.notes, note))
        ran = execute.run(
            self.evidence,
            config=config,
            points=points,
            artifacts=inspected.artifacts,
            capability=probed.capability,
            driver_cuda=env.driver.cuda_version if env.driver else None,
            use_cache=self.options.use_cache,
            side_by_side=probed.shared,
            recorder=launch_recorder,
            smoke_ahead=self.take_smoke_ahead(),
            runs_in=self.runs_in(),
        )
        self.finish("execute", began, ran, Cause.INTERNAL)
        return replace(
            self.found,
            executions=ran.executions,
            loaded_libraries=ran.loaded,
            diagnoses=ran.diagnoses,
            paths_proved=ran.paths_proved,
            launches=ran.launches.summary() if ran.launches is not None else None,
        )

    def smoke_starter(
        self, probed: probe.ProbeOutcome, pending: recorder.PendingBuild | None
    ) -> Callable[[Path], None] | None:
        """What starts the smoke program's runs as soon as it is built, or None.

        On a device in the default compute mode both paths run then, beside the project's
        build, which is no GPU work; not in the delivery image (no build there, and the runs
        need its files read first), nor when the run stops before execute.
        """
        if (
            probed.capability is None
            or not probed.shared
            or self.place.in_image
            or self.options.stop_after in ("build", "inspect")
        ):
            return None
        from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.guard.selfcheck)

        timeout, evidence = self.options.timeout, self.evidence

        def start(smoke: Path) -> None:
            self.smoke_ahead = execute.SmokeAhead(
                execute.smoke_entry(smoke, timeout),
                evidence,
                pending.result if pending is not None else lambda: None,
            )

        return start

    def prepare(
        self, nvcc: str, probed: probe.ProbeOutcome
    ) -> tuple[dict[str, str], recorder.PendingBuild | None]:
        """What ``{nvcc}`` and ``{python}`` stand for, and the launch recorder started."""
        options, config, place = self.options, self.config, self.place
        tool_paths = tools(nvcc, options.python, config.python, in_image=place.in_image)
        if place.in_image:
            found = self.found
            self.found = replace(found, notes=(*found.notes, *image_notes(config)))
            return tool_paths, None
        # The launch recorder compiles while the project builds and is inspected.
        wanted = records_launches(options, config) and probed.capability is not None
        pending = (
            recorder.PendingBuild(nvcc, self.workdir, use_cache=options.use_cache)
            if wanted
            else None
        )
        return tool_paths, pending

    def image_artifacts(
        self,
    ) -> tuple[
        tuple[tuple[ResolvedArtifact, str], ...] | None,
        Callable[[Path, HostFormat], tuple[Dependency, ...]] | None,
    ]:
        """In the image: its artifacts read from its layers, and its loader's dependencies."""
        place = self.place
        if not isinstance(place, InImage):
            return None, None
        from gate.stages import inimage  # noqa: PLC0415 - only a run in an image reads one

        self.files = inimage.ImageFiles.open(place, self.workdir / "image")
        found = self.files.artifacts(self.config)
        shown = {resolved.path: label for resolved, label in found}
        return found, inimage.image_dependencies(place, shown)

    def runs_in(self) -> RunsIn:
        """Where the entry points run: here, or in containers of the image."""
        if not isinstance(self.place, InImage) or self.files is None:
            return RunsIn()
        scratch = self.workdir / "runs"
        scratch.mkdir(parents=True, exist_ok=True)
        return RunsIn(self.place, scratch, self.files.host_paths, self.files.exists)

    def close(self) -> None:
        """The image's saved archive closed (its files go with the build folder)."""
        if self.files is not None:
            self.files.close()
            self.files = None


def image_notes(config: Config) -> tuple[str, ...]:
    """What a run in the image does not do, and why."""
    notes = []
    if config.builds:
        notes.append(
            f"the image is the build's product: the {len(config.builds)} build command(s) of "
            f"{config.label} were not run; its artifacts are gated as the image ships them"
        )
    notes.append("kernel launches not recorded: the launch recorder does not run inside an image")
    return tuple(notes)


def in_image(entry: EntryPoint, config: Config, place: InImage) -> EntryPoint:
    """An entry point's folder as the image has it: the project's folder is the image's
    working folder (``cwd = "bin"`` is ``WORKDIR/bin``); a path outside it is the image's."""
    if entry.cwd is None:
        return entry
    cwd = Path(entry.cwd)
    if cwd.is_relative_to(config.project_dir):
        inside = Path(place.image.working_dir) / cwd.relative_to(config.project_dir)
        return replace(entry, cwd=str(inside))
    return entry


class StageResult(Protocol):
    """What every stage outcome has."""

    @property
    def checks(self) -> tuple[Check, ...]: ...

    @property
    def failure(self) -> GateError | None: ...


def run_stages(
    options: RunOptions,
    config: Config,
    evidence: EvidenceDir,
    workdir: Path,
    p: StageProgress,
    *,
    before_project: Callable[[], None],
) -> tuple[Found, Interrupted | None]:
    """Stages 1-5; an exception from a stage (a bug) still leaves every stage accounted for.

    A signal (SIGINT, SIGTERM, SIGHUP: gate.cli kills the running commands first) ends
    the stage it came in as failed ("interrupted by SIGTERM") and skips the rest: the
    run is recorded, as interrupted, and the caller exits with the signal's status.
    A bug's traceback goes to ``internal-error.txt`` in the evidence (and to stderr
    with ``options.debug``).

    The SASS dumps the inspect stage left running are waited for here, on every path,
    so the evidence (and the check on each dump) is whole before the report and the
    manifest are written.
    """
    stages = Stages(options, config, evidence, workdir, p, before_project=before_project)
    interrupted = None
    every = beat_interval()
    # On a terminal the live line takes the heartbeat lines' place.
    beats = (
        proc.heartbeats(p.show, REDRAW_EVERY, end=p.live.clear)
        if p.live is not None and p.live.enabled
        else proc.heartbeats(p.beat, every)
    )
    try:
        with beats:
            return stages.run(), None
    except GateError as e:
        _internal(p, stages.remaining, e)
    except Interrupted as e:
        interrupted = e
        _internal(p, stages.remaining, GateError(f"interrupted by {e.name}"))
    except Exception as e:  # noqa: BLE001  (a bug must still leave the evidence and a report)
        trace = traceback.format_exc()
        evidence.write_text(INTERNAL_ERROR_FILE, trace)
        if options.debug:
            print(trace, file=sys.stderr, end="")
        where = f"; traceback in {evidence.path(INTERNAL_ERROR_FILE)}"
        _internal(
            p,
            stages.remaining,
            GateError(f"internal error: {type(e).__name__}: {e}{where}"),
        )
    finally:
        ahead = stages.take_smoke_ahead()
        if ahead is not None:  # started, but the execute stage never ran
            ahead.discard()
        stages.close()
        if stages.deferred is not None:
            # Among the inspect stage's checks, where a reader of the table looks for them.
            at = stages.inspect_checks_end
            p.checks[at:at] = stages.deferred.finish()  # never raises: failures are checks
    return stages.found, interrupted


def _internal(p: StageProgress, remaining: list[str], error: GateError) -> None:
    """A stage raised instead of returning its failure: record it, skip the rest."""
    if remaining:
        name = remaining.pop(0)
        p.stages.append(
            Stage(name, StageStatus.FAILED, error.one_line(), 0.0, int(error.exit_code))
        )
        p.failed_check(name, error, Cause.INTERNAL)
        p.say(f"{name} stopped: {error.one_line()}")
    failed = p.stages[-1].name if p.stages else "first"
    for name in list(remaining):
        p.skip(name, f"the {failed} stage failed")
    remaining.clear()
