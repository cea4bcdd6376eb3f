"""Stages 1-5 (environment, probe, build, inspect, execute) as a fold over their outcomes.

Each step is a function of the outcomes before it (gate.pipeline.fold.Outcomes) returning
a frozen outcome; a step that ends a stage returns gate.pipeline.fold.Ended, which the
fold records (ran, failed or skipped) before it decides whether the rest runs. What the
run record gets is derived from the outcomes at the end (gate.pipeline.outcomes.found);
what runs beside the stages is started and joined through gate.pipeline.beside.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from gate import proc
from gate.config import Config, EntryPoint
from gate.container.info import of_place
from gate.container.place import HOST, InImage
from gate.errors import ExitCode, GateError, Interrupted, NoDeviceError
from gate.evidence import EvidenceDir
from gate.pipeline import beside
from gate.pipeline.beside import Beside
from gate.pipeline.fold import Context, Ended, NotRun, Outcomes, Step, fold, internal
from gate.pipeline.options import RunOptions, records_launches, tools
from gate.pipeline.outcomes import Found, ImageRead, Prepared, Ready, found
from gate.pipeline.progress import StageProgress, beat_interval
from gate.record import Environment
from gate.render.live import REDRAW_EVERY, Counter
from gate.rules.causes import Cause
from gate.rules.hosts import host_for
from gate.rules.require import Requirement
from gate.rules.targets import Capability
from gate.rules.verdict import Check
from gate.stages import build, environment, inspect, probe, programs
from gate.stages.build import SMOKE_KERNEL
from gate.stages.runs import RunsIn
from gate.system import ci

__all__ = ["INTERNAL_ERROR_FILE", "STEPS", "Found", "image_notes", "in_image", "run_stages"]

# In the evidence folder when a stage raised instead of failing: the traceback.
INTERNAL_ERROR_FILE = "internal-error.txt"


def environment_step(ctx: Context, _: Outcomes) -> Ended:
    """Stage 1: the toolkit, the driver and the source, here or in the image."""
    began = ctx.progress.start("environment")
    place = ctx.place
    env = environment.run(
        ctx.evidence,
        nvcc=ctx.options.nvcc,
        project_dir=ctx.options.project_dir,
        place=place,
        container=of_place(place) if isinstance(place, InImage) else None,
    )
    if isinstance(place, InImage):
        start = (place.runtime.version_command, place.image.command)
        env = replace(env, commands=(*(c for c in start if c is not None), *env.commands))
    return Ended("environment", env, began)


def probe_step(ctx: Context, done: Outcomes) -> Ended:
    """Stage 2: the device in front, and the target the run builds and checks for."""
    env = _environment(done)
    assert env.toolkit is not None  # noqa: S101 - no failure means a toolkit
    began = ctx.progress.start("probe")
    probed = probe.run(
        ctx.evidence,
        nvcc=env.toolkit.nvcc,
        supported=env.supported_targets,
        workdir=ctx.workdir,
        explicit_target=ctx.options.target,
        use_cache=ctx.options.use_cache,
        place=ctx.place,
    )
    no_device = isinstance(probed.failure, NoDeviceError)
    cause = Cause.TOOLCHAIN if no_device else Cause.WRONG_TARGET
    return Ended("probe", probed, began, cause, ExitCode.NO_DEVICE if no_device else None)


def prepare_step(ctx: Context, done: Outcomes) -> Prepared:
    """Before the project's first command: what ``{nvcc}`` and ``{python}`` stand for,
    the requirement of the device in front, and the launch recorder started."""
    ctx.before_project()
    probed, env = _probed(done), _environment(done)
    assert probed.target is not None  # noqa: S101 - the probe stage ran
    assert env.toolkit is not None  # noqa: S101 - the environment stage ran
    options, config, place = ctx.options, ctx.config, ctx.place
    nvcc = env.toolkit.nvcc
    tool_paths = tools(nvcc, options.python, config.python, in_image=place.in_image)
    # The device in front needs code built for it; a target named with --target
    # keeps its own form (sm_90a needs sm_90a).
    first = (
        Requirement.of_device(probed.capability)
        if probed.target_source == "probe" and probed.capability is not None
        else Requirement.of_target(probed.target)
    )
    if place.in_image:
        return Prepared(tool_paths, first, Beside(), image_notes(config))
    wanted = records_launches(options, config) and probed.capability is not None
    started = Beside.start(nvcc, ctx.workdir, record=wanted, use_cache=options.use_cache)
    return Prepared(tool_paths, first, started, unmeasured(config, probed.capability))


def unmeasured(config: Config, capability: Capability | None) -> tuple[str, ...]:
    """Without a device, what the configuration asks the launch recorder for is not done:
    said under "Not done", never passed over in silence."""
    needs = config.recorder_needs()
    if capability is not None or not needs:
        return ()
    asked = ", ".join(key for key, _ in needs)
    return (f"launch coverage not measured: no CUDA device to run on (asked for by {asked})",)


def build_step(ctx: Context, done: Outcomes) -> Ended:
    """Stage 3: the smoke program and the project's builds."""
    probed, prepared = _probed(done), done.of(Prepared)
    assert probed.target is not None  # noqa: S101 - the probe stage ran
    options = ctx.options
    began = ctx.progress.start("build")
    built = build.run(
        ctx.evidence,
        config=ctx.config,
        target=probed.target,
        requirement=prepared.first,
        workdir=ctx.workdir,
        tools=prepared.tools,
        sass=options.sass,
        ptx=options.ptx,
        use_cache=options.use_cache,
        prebuilt=options.prebuilt,
        on_smoke=smoke_starter(ctx, probed, prepared.beside),
        place=ctx.place,
    )
    return Ended("build", built, began)


def smoke_starter(
    ctx: Context, probed: probe.ProbeOutcome, started: Beside
) -> Callable[[Path], None] | None:
    """What starts the smoke program's runs as soon as it is built, or None.

    On a device in the default compute mode both paths run then, beside the project's
    build, which is no GPU work; not in the delivery image (no build there, and the runs
    need its files read first), nor when the run stops before execute.
    """
    if (
        probed.capability is None
        or not probed.shared
        or ctx.place.in_image
        or ctx.options.stop_after in ("build", "inspect")
    ):
        return None
    return started.smoke_starter(ctx.evidence, ctx.options.timeout)


def image_step(ctx: Context, _: Outcomes) -> ImageRead | Ended:
    """Stage 4 begun: in the image, its artifacts read from its layers, and its loader's
    dependencies (a failure to read them ends the stage)."""
    p, place = ctx.progress, ctx.place
    began = p.start("inspect")
    count = Counter(p.where(), say=p.say, live=p.live)
    if not isinstance(place, InImage):
        return ImageRead(began, count)
    from gate.stages import inimage  # noqa: PLC0415 - only a run in an image reads one

    try:
        files = inimage.ImageFiles.open(place, ctx.workdir / "image")
    except GateError as e:
        return _unread(began, count, e)
    try:
        artifacts = files.artifacts(ctx.config)
        shown = {resolved.path: label for resolved, label in artifacts}
        deps_of = inimage.image_dependencies(place, shown)
    except BaseException as e:
        files.close()
        if not isinstance(e, GateError):
            raise
        return _unread(began, count, e)
    return ImageRead(began, count, files, artifacts, deps_of)


def _unread(began: float, count: Counter, error: GateError) -> Ended:
    count.clear()
    return Ended("inspect", inspect.InspectOutcome((), (), error), began, Cause.EVIDENCE)


def inspect_step(ctx: Context, done: Outcomes) -> Ended:
    """Stage 4: the final artifacts and what they carry."""
    env, probed, image = _environment(done), _probed(done), done.of(ImageRead)
    built, prepared = _built(done), done.of(Prepared)
    assert probed.target is not None  # noqa: S101 - the probe stage ran
    options, config = ctx.options, ctx.config
    device = probed.capability or probed.target.capability
    inspected = inspect.run(
        ctx.evidence,
        config=config,
        smoke=built.smoke,
        smoke_kernels=(SMOKE_KERNEL,),
        smoke_requirement=prepared.first,
        required=built.required,
        capability=probed.capability,
        driver_cuda=env.driver.cuda_version if env.driver else None,
        host=host_for(device, configured=config.host, here=env.host_arch),
        host_arch=env.host_arch,
        workdir=ctx.workdir,
        built_since=built.built_since,
        dump_sass=options.dump_sass,
        use_cuobjdump=options.use_cuobjdump,
        use_cache=options.use_cache,
        progress=image.count,
        runner_class=ci.runner_class(os.environ),
        from_image=image.from_image,
        deps_of=image.deps_of,
    )
    image.count.clear()
    return Ended("inspect", inspected, image.began, Cause.EVIDENCE)


def ready_step(ctx: Context, done: Outcomes) -> Ready | Ended:
    """Stage 5 begun: the entry points, and the launch recorder waited for; without a
    device the stage is skipped, every run with it."""
    from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.guard.selfcheck)

    probed, built, prepared = _probed(done), _built(done), done.of(Prepared)
    config, place = ctx.config, ctx.place
    points = execute.entry_points(config, built.smoke, ctx.options.timeout, prepared.tools)
    missing: tuple[Check, ...] = ()
    if isinstance(place, InImage):
        points = [in_image(entry, config, place) for entry in points]
    else:  # a program the build did not write fails here, with or without a device
        missing, runnable = programs.program_checks(points, os.environ)
        points = list(runnable)
    if probed.capability is None:
        artifacts = _inspected(done).artifacts
        why = "not run: no CUDA device"
        checks = (*missing, *execute.skipped(ctx.evidence, points, artifacts, why))
        reason = "no CUDA device; see the probe stage"
        return Ended("execute", NotRun(checks), exit_code=ExitCode.NO_DEVICE, skipped=reason)
    began = ctx.progress.start("execute")
    launch_recorder = prepared.beside.recorder_ready()
    notes: tuple[str, ...] = ()
    if launch_recorder is not None:
        # Said once: no CUPTI, or the user's own injection library kept in place.
        _, unused = launch_recorder.env_for(ctx.workdir, {})
        if launch_recorder.library is None or unused:
            notes = (unused or launch_recorder.note,)
    return Ready(began, tuple(points), launch_recorder, notes, missing)


def execute_step(ctx: Context, done: Outcomes) -> Ended:
    """Stage 5: every entry point on both paths."""
    from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.guard.selfcheck)

    env, probed, ready = _environment(done), _probed(done), done.of(Ready)
    assert probed.capability is not None  # noqa: S101 - else the ready step skipped the stage
    ran = execute.run(
        ctx.evidence,
        config=ctx.config,
        points=ready.points,
        artifacts=_inspected(done).artifacts,
        capability=probed.capability,
        driver_cuda=env.driver.cuda_version if env.driver else None,
        use_cache=ctx.options.use_cache,
        side_by_side=probed.shared,
        recorder=ready.recorder,
        smoke_ahead=done.of(Prepared).beside.take_smoke_ahead(),
        runs_in=runs_in(ctx, done.of(ImageRead)),
    )
    if ready.missing:
        ran = replace(ran, checks=(*ready.missing, *ran.checks))
    return Ended("execute", ran, ready.began, Cause.INTERNAL)


# The steps in order, each with its stage; a stage's steps run until one ends it.
STEPS: tuple[tuple[str, Step], ...] = (
    ("environment", environment_step),
    ("probe", probe_step),
    ("build", prepare_step),
    ("build", build_step),
    ("inspect", image_step),
    ("inspect", inspect_step),
    ("execute", ready_step),
    ("execute", execute_step),
)


def _environment(done: Outcomes) -> Environment:
    env = done.result("environment", environment.EnvironmentOutcome)
    assert env is not None  # noqa: S101 - the environment stage ran
    return env.environment


def _probed(done: Outcomes) -> probe.ProbeOutcome:
    probed = done.result("probe", probe.ProbeOutcome)
    assert probed is not None  # noqa: S101 - the probe stage ran
    return probed


def _built(done: Outcomes) -> build.BuildOutcome:
    built = done.result("build", build.BuildOutcome)
    assert built is not None  # noqa: S101 - the build stage ran
    return built


def _inspected(done: Outcomes) -> inspect.InspectOutcome:
    inspected = done.result("inspect", inspect.InspectOutcome)
    assert inspected is not None  # noqa: S101 - the inspect stage ran
    return inspected


def runs_in(ctx: Context, image: ImageRead) -> RunsIn:
    """Where the entry points run: here, or in containers of the image."""
    place = ctx.place
    if not isinstance(place, InImage) or image.files is None:
        return RunsIn()
    scratch = ctx.workdir / "runs"
    scratch.mkdir(parents=True, exist_ok=True)
    return RunsIn(place, scratch, image.files.host_paths, image.files.exists)


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

    What runs beside the stages is settled here, on every path (gate.pipeline.beside):
    so the evidence (and the check on each SASS dump) is whole before the report and
    the manifest are written.
    """
    # In the delivery image: every command in containers of it, the work folder mounted.
    place = HOST if options.image is None else replace(options.image, mounts=(workdir,))
    ctx = Context(options, config, evidence, workdir, p, place, before_project)
    done, interrupted = Outcomes(), None
    # On a terminal the live line takes the heartbeat lines' place.
    beats = (
        proc.heartbeats(p.show, REDRAW_EVERY, end=p.live.clear)
        if p.live is not None and p.live.enabled
        else proc.heartbeats(p.beat, beat_interval())
    )
    try:
        with beats:
            for done in fold(ctx, STEPS):  # noqa: B007 - the outcomes so far, kept on a raise
                pass
            return found(done, options), None
    except GateError as e:
        internal(p, done.remaining(), e)
    except Interrupted as e:
        interrupted = e
        internal(p, done.remaining(), GateError(f"interrupted by {e.name}"))
    except Exception as e:  # noqa: BLE001  (a bug must still leave the evidence and a report)
        trace = traceback.format_exc()
        evidence.write_text(INTERNAL_ERROR_FILE, trace)
        if options.debug:
            print(trace, file=sys.stderr, end="")
        where = f"; traceback in {evidence.path(INTERNAL_ERROR_FILE)}"
        error = GateError(f"internal error: {type(e).__name__}: {e}{where}")
        internal(p, done.remaining(), error)
    finally:
        settle(done, p)
    return found(done, options), interrupted


def settle(done: Outcomes, p: StageProgress) -> None:
    """What ran beside the stages, ended in order: the smoke program's runs the execute
    stage never took, the image's saved archive, the SASS dumps (their checks kept)."""
    prepared, image = done.get(Prepared), done.get(ImageRead)
    beside.discard_unclaimed(prepared.beside if prepared is not None else None)
    if image is not None and image.files is not None:
        image.files.close()  # its files go with the build folder
    inspected = done.result("inspect", inspect.InspectOutcome)
    deferred = inspected.deferred if inspected is not None else None
    beside.join_dumps(deferred, p.checks, done.checks_end("inspect"))
