"""`cuda-gate run`: the stages in order, each a function returning its frozen outcome.

environment -> probe -> build -> inspect -> execute -> report -> manifest -> store.
A stage that cannot go on returns its outcome with a ``failure``; the pipeline marks it
failed, skips what depends on it (each skipped stage with the reason), and still
writes JUnit, the summary and result.json, so the evidence gathered so far is never
lost. The verdict is accepted only with execution evidence.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gate import __version__, ci, git, machine, proc, selfcheck
from gate.attest.signing import Signer
from gate.checksums import Checksums
from gate.config import Config, EntryPoint, ResolvedArtifact
from gate.container.info import of_place
from gate.container.place import HOST, InImage, Place
from gate.errors import ConfigError, EvidenceError, ExitCode, GateError, Interrupted, NoDeviceError
from gate.evidence import EvidenceDir
from gate.fsutil import Lock
from gate.launchsummary import Launches
from gate.reader.hostelf import Dependency, HostFormat
from gate.record import (
    STAGES,
    Artifact,
    Build,
    Device,
    Environment,
    Execution,
    LoadedLibrary,
    RunRecord,
)
from gate.redact import Redactor
from gate.render.diff import headline
from gate.render.live import REDRAW_EVERY, Counter, LiveLine, heartbeat_setting
from gate.rules.baseline import CLASSNAME
from gate.rules.baseline import checks as baseline_checks
from gate.rules.causes import Cause
from gate.rules.hosts import host_for
from gate.rules.require import Requirement
from gate.rules.targets import Target
from gate.rules.verdict import Check, CheckState, Stage, StageStatus
from gate.stages import build, environment, inspect, probe, recorder
from gate.stages.build import SMOKE_KERNEL
from gate.stages.runs import DEFAULT_TIMEOUT, RunsIn
from gate.store.settings import StoreSettings

if TYPE_CHECKING:
    from gate.baseline.resolve import Found
    from gate.stages import execute, inimage

Progress = Callable[[str], None]
# In the build folder: held for the whole run, so two runs never build into one folder.
BUILD_LOCK = ".cuda-gate.lock"
# A long command's heartbeat: every 10 s on a terminal, every 30 s (proc's) in a log.
_BEAT_TERMINAL = 10.0
_SHOWN_COMMAND = 80
_LIVE_COMMAND = 32
# In the evidence folder when a stage raised instead of failing: the traceback.
INTERNAL_ERROR_FILE = "internal-error.txt"


@dataclass(frozen=True)
class RunOptions:
    """What the user asked `cuda-gate run` to do."""

    evidence: Path = Path("gate-evidence")
    build_dir: Path | None = None
    project_dir: Path = Path()
    target: Target | None = None
    sass: tuple[Target, ...] | None = None
    ptx: tuple[Target, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT
    stop_after: str | None = None
    dump_sass: str = "auto"
    nvcc: str | None = None
    python: str | None = None
    signer: Signer | None = None
    use_cuobjdump: bool = True
    use_cache: bool = True
    store_settings: StoreSettings | None = None
    project_config: Config | None = None
    wait: bool = False  # for the evidence and build folders another run holds
    debug: bool = False  # print an internal error's traceback (always in the evidence)
    first_line: str = ""  # said once the folders are locked (which configuration, ...)
    prebuilt: Checksums | None = None  # gate these files instead of building (--prebuilt)
    baseline: Found | None = None  # the run to compare with (--baseline), read before the run
    record_launches: bool | None = None  # --[no-]record-launches; None: the config's, else on
    image: InImage | None = None  # --image (or the config's image), resolved before the run


@dataclass(frozen=True)
class Outcome:
    """The end of a run: the record, where the evidence is, what happened to it afterwards."""

    record: RunRecord
    evidence: Path
    manifest: str
    stored: str
    store_error: GateError | None = None
    interrupted: Interrupted | None = None  # a signal ended the stages early


@dataclass
class _Progress:
    """The stages so far (name, status, detail, duration), for the record and the console."""

    say: Progress
    live: LiveLine | None = None  # on a terminal: the running command, in place
    stages: list[Stage] = field(default_factory=list)
    commands: list[proc.Result] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    current: str = ""

    def start(self, name: str) -> float:
        self.current = name
        self.say(f"[{STAGES.index(name) + 1}/{len(STAGES)}] {name} ...")
        return time.monotonic()

    def beat(self, elapsed: float, argv: tuple[str, ...], last: str) -> None:
        """A long command's heartbeat line (in a log)."""
        self.say(self.running(elapsed, argv, last))

    def show(self, elapsed: float, argv: tuple[str, ...], last: str) -> None:
        """A running command on the live line (on a terminal): the stage and the time
        first, the last output line before the command's tail, for a narrow terminal."""
        if self.live is not None:
            command = _shown(argv, _LIVE_COMMAND)
            said = f": {last}" if last else ""
            self.live.show(f"{self.where()} {_clock(elapsed)} {command}{said}")

    def running(self, elapsed: float, argv: tuple[str, ...], last: str) -> str:
        """The stage, the command, how long it has run, its last output line."""
        said = f": {last}" if last else ""
        return f"{self.where()}: {_shown(argv, _SHOWN_COMMAND)} running {_clock(elapsed)}{said}"

    def where(self) -> str:
        """``[3/8] build``: the stage now running."""
        name = self.current or "run"
        return f"[{STAGES.index(name) + 1}/{len(STAGES)}] {name}" if name in STAGES else name

    def done(
        self, name: str, began: float, failure: GateError | None = None, detail: str = ""
    ) -> None:
        took = time.monotonic() - began
        index = f"[{STAGES.index(name) + 1}/{len(STAGES)}]"
        if failure is None:
            self.stages.append(Stage(name, StageStatus.RAN, detail, took))
            self.say(f"{index} {name} done ({took:.1f} s)" + (f": {detail}" if detail else ""))
            return
        self.stages.append(
            Stage(name, StageStatus.FAILED, failure.one_line(), took, int(failure.exit_code))
        )
        # The whole reason is in the table and the verdict: the progress line says what.
        self.say(f"{index} {name} stopped: {failure.message.split(' (')[0]}")

    def skip(self, name: str, reason: str, exit_code: ExitCode | None = None) -> None:
        self.stages.append(
            Stage(name, StageStatus.SKIPPED, reason, 0.0, int(exit_code) if exit_code else None)
        )
        self.say(f"[{STAGES.index(name) + 1}/{len(STAGES)}] {name} skipped: {reason}")

    def failed_check(self, stage: str, failure: GateError, cause: Cause) -> None:
        """A stage failure no check of the stage already shows becomes one."""
        if not any(c.failed and c.classname.startswith(f"gate.{stage}") for c in self.checks):
            self.checks.append(
                Check(
                    f"{stage} stage",
                    f"gate.{stage}",
                    CheckState.FAILED,
                    failure.one_line(),
                    cause=cause,
                )
            )


def _shown(argv: tuple[str, ...], room: int) -> str:
    command = shlex.join(argv)
    return command if len(command) <= room else command[: room - 3] + "..."


def _clock(elapsed: float) -> str:
    minutes, seconds = divmod(int(elapsed), 60)
    return f"{minutes}m{seconds:02d}s"


def tools(
    nvcc: str, python: str | None, configured: str | None = None, *, in_image: bool = False
) -> dict[str, str]:
    """What ``{nvcc}`` and ``{python}`` stand for in this run (``python``: ``--python``;
    ``configured``: the config's ``python``; gate.machine.find_python orders them). In the
    image they name the image's: its nvcc, and ``--python``, the config's or ``python3``
    on the image's PATH."""
    found = {"nvcc": nvcc}
    if in_image:
        return {**found, "python": python or configured or "python3"}
    chosen = machine.find_python(python, configured)
    if chosen is not None:
        found["python"] = chosen
    return found


@dataclass(frozen=True)
class _Found:
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


def run(options: RunOptions, say: Progress, live: LiveLine | None = None) -> Outcome:
    """Run every stage up to ``options.stop_after``, then report, sign and store.

    ``live`` (a terminal's) shows the running command in place; ``say`` clears it first.

    The evidence folder and the build folder are locked for the whole run (a second
    run refuses, or waits with ``options.wait``): nothing another run writes can
    mix with this one's files, and what the manifest digests is what is stored.
    """
    # Before anything runs: the gate's own files as installed, all of its modules imported
    # while the first stages wait on their commands (gate.selfcheck).
    guard = selfcheck.Guard.begin()
    try:
        return _guarded_run(options, say, live, guard)
    finally:
        guard.close()


def _guarded_run(
    options: RunOptions, say: Progress, live: LiveLine | None, guard: selfcheck.Guard
) -> Outcome:
    redactor = Redactor.from_environment(
        extra=options.signer.secrets() if options.signer is not None else ()
    )
    evidence = EvidenceDir.create(options.evidence, redactor, wait=options.wait, say=say)
    try:
        # Beside the evidence by default: `cuda-gate verify` re-hashes these artifacts later.
        workdir = (options.build_dir or options.evidence.parent / "gate-build").resolve()
        try:
            workdir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise EvidenceError(f"{workdir}: build folder is not writable: {e.strerror}") from e
        build_lock = Lock.acquire(
            workdir / BUILD_LOCK, f"{workdir} (build folder)", wait=options.wait, say=say
        )
        try:
            if options.first_line:
                say(options.first_line)
            p = _Progress(say, live)
            return _locked_run(options, evidence, workdir, redactor, p, guard=guard)
        finally:
            build_lock.release()
    finally:
        evidence.release()


def _locked_run(
    options: RunOptions,
    evidence: EvidenceDir,
    workdir: Path,
    redactor: Redactor,
    p: _Progress,
    *,
    guard: selfcheck.Guard,
) -> Outcome:
    from gate.attest import manifest  # noqa: PLC0415 - preloaded (gate.selfcheck)
    from gate.stages import report  # noqa: PLC0415 - preloaded (gate.selfcheck)

    started = datetime.now(UTC)
    config = options.project_config or Config(project_dir=options.project_dir.resolve())
    found, interrupted = _run_stages(
        options, config, evidence, workdir, p, before_project=guard.arm
    )
    record = RunRecord(
        tool_version=__version__,
        started=started,
        finished=datetime.now(UTC),
        run=report.run_info(started),
        source=found.source,
        environment=found.environment,
        device=found.device,
        stages=tuple(p.stages),
        builds=found.builds,
        artifacts=found.artifacts,
        requirements=found.requirements,
        loaded_libraries=found.loaded_libraries,
        executions=found.executions,
        checks=tuple(p.checks),
        diagnoses=found.diagnoses,
        paths_proved=found.paths_proved,
        notes=found.notes,
        policy=config.policy,
        launches=found.launches,
    )
    if options.baseline is not None:
        record = _compared(record, options.baseline, config, p)
    began = p.start("report")
    report.write(evidence, record, config.source)
    p.done("report", began)
    # Signed and stored only now, the last process the project started having ended, and
    # only by the code the gate started with: GateChangedError (exit 3) if a file changed.
    guard.check()
    began = p.start("manifest")
    written = manifest.write_manifest(
        evidence.root, options.signer, redactor=redactor, config_file=config.source, record=record
    )
    p.done("manifest", began, detail=written.message)
    stored, store_error = "evidence not stored (--no-store)", None
    if interrupted is not None:
        stored = f"evidence not stored: interrupted by {interrupted.name}"
        p.skip("store", stored)
    elif options.store_settings is not None:
        began = p.start("store")
        try:
            stored = _store(evidence.root, options.store_settings, options.project_dir)
            p.done("store", began, detail=stored)
        except GateError as e:
            stored, store_error = f"evidence not stored: {e.one_line()}", e
            p.done("store", began, e)
    return Outcome(record, evidence.root, written.message, stored, store_error, interrupted)


def records_launches(options: RunOptions, config: Config) -> bool:
    """Whether the runs go through the CUPTI launch recorder: always where it is needed (a
    ``require_launch``, ``[policy] launch_coverage``); else as ``--[no-]record-launches``
    says, else as ``record_launches`` says, else on. (Where CUPTI is missing, or a profiler
    holds CUDA_INJECTION64_PATH, the recorder stage says so and the runs go on without it.)"""
    if config.recorder_needs():
        return True
    if options.record_launches is not None:
        return options.record_launches
    return config.record_launches is not False


def _compared(record: RunRecord, baseline: Found, config: Config, p: _Progress) -> RunRecord:
    """The record with its comparison against ``baseline`` and a check per artifact; when
    inspect did not run, one check that did not run either (never a silent pass)."""
    from gate.baseline.resolve import compare_records  # noqa: PLC0415 - only with --baseline

    inspected = any(s.name == "inspect" and s.status is StageStatus.RAN for s in record.stages)
    if not inspected:
        p.checks.append(
            Check(
                "comparison with the baseline",
                CLASSNAME,
                CheckState.NOT_RUN,
                f"not run: the inspect stage did not complete ({baseline.reference})",
            )
        )
        return replace(record, checks=tuple(p.checks))
    compared = compare_records(baseline, record, config.baseline, config.devices)
    p.checks += baseline_checks(compared.diff, compared.describe())
    p.say(f"baseline: {headline(compared.diff, compared.describe())}")
    return replace(record, checks=tuple(p.checks), baseline=compared)


class _Stages:
    """Stages 1-5 in order; every stage ends up in the progress: ran, failed or skipped."""

    def __init__(
        self,
        options: RunOptions,
        config: Config,
        evidence: EvidenceDir,
        workdir: Path,
        p: _Progress,
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
        self.found = _Found(
            git.SourceInfo(None, None, None),
            Environment(machine.host_arch(), machine.os_description(), None, None, (), None),
            Device(None, options.target, "--target" if options.target else None, None),
        )

    def finish(
        self,
        name: str,
        began: float,
        outcome: _StageResult,
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
            from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.selfcheck)

            names = execute.entry_names(self.config)
            self.p.checks += execute.skipped_checks(names, f"not run: {reason}")
        for name in self.remaining:
            self.p.skip(name, reason, exit_code)
        self.remaining.clear()

    def run(self) -> _Found:
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
        return self.build_to_execute(found, env.environment, probed)

    def build_to_execute(
        self, found: _Found, env: Environment, probed: probe.ProbeOutcome
    ) -> _Found:
        """Build, inspect and execute for the probed (or named) target."""
        from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.selfcheck)

        self.before_project()
        assert probed.target is not None  # noqa: S101 - the probe stage ran
        assert env.toolkit is not None  # noqa: S101 - the environment stage ran
        options, config, place = self.options, self.config, self.place
        tool_paths, pending = self.prepare(env.toolkit.nvcc, probed)
        found = self.found
        began = self.p.start("build")
        # The device in front needs code built for it; a target named with --target
        # keeps its own form (sm_90a needs sm_90a).
        first = (
            Requirement.of_device(probed.capability)
            if probed.target_source == "probe" and probed.capability is not None
            else Requirement.of_target(probed.target)
        )
        built = build.run(
            self.evidence,
            config=config,
            target=probed.target,
            requirement=first,
            workdir=self.workdir,
            tools=tool_paths,
            sass=options.sass,
            ptx=options.ptx,
            use_cache=options.use_cache,
            prebuilt=options.prebuilt,
            on_smoke=self.smoke_starter(probed, pending),
            place=place,
        )
        found = self.found = replace(found, builds=built.builds, requirements=built.required)
        if not self.finish("build", began, built):
            self.skip_rest("build")
            return found
        began = self.p.start("inspect")
        self.inspect_checks_end = len(self.p.checks)
        driver = env.driver.cuda_version if env.driver else None
        device = probed.capability or probed.target.capability
        count = Counter(self.p.where(), say=self.p.say, live=self.p.live)
        try:
            from_image, deps_of = self.image_artifacts()
        except GateError as e:
            count.clear()
            self.finish("inspect", began, inspect.InspectOutcome((), (), e), Cause.EVIDENCE)
            self.skip_rest("inspect")
            return found
        inspected = inspect.run(
            self.evidence,
            config=config,
            smoke=built.smoke,
            smoke_kernels=(SMOKE_KERNEL,),
            smoke_requirement=first,
            required=built.required,
            capability=probed.capability,
            driver_cuda=driver,
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
        found = self.found = replace(
            found,
            artifacts=tuple(a.record() for a in inspected.artifacts),
            notes=(*found.notes, *notes),
        )
        inspected_ok = self.finish("inspect", began, inspected, Cause.EVIDENCE)
        self.inspect_checks_end = len(self.p.checks)  # the SASS dump checks go here later
        if not inspected_ok:
            self.skip_rest("inspect")
            return found
        points = execute.entry_points(config, built.smoke, options.timeout, tool_paths)
        if isinstance(place, InImage):
            points = [_in_image(entry, config, place) for entry in points]
        if probed.capability is None:
            self.p.checks += execute.skipped(
                self.evidence, points, inspected.artifacts, "not run: no CUDA device"
            )
            self.remaining.remove("execute")
            self.p.skip("execute", "no CUDA device; see the probe stage", ExitCode.NO_DEVICE)
            return found
        began = self.p.start("execute")
        launch_recorder = pending.result() if pending is not None else None
        if launch_recorder is not None:
            # Said once: no CUPTI, or the user's own injection library kept in place.
            _, unused = launch_recorder.env_for(self.workdir, {})
            if launch_recorder.library is None or unused:
                note = unused or launch_recorder.note
                found = self.found = replace(found, notes=(*found.notes, note))
        ran = execute.run(
            self.evidence,
            config=config,
            points=points,
            artifacts=inspected.artifacts,
            capability=probed.capability,
            driver_cuda=driver,
            use_cache=options.use_cache,
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
        from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.selfcheck)

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
            self.found = replace(found, notes=(*found.notes, *_image_notes(config)))
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


def _image_notes(config: Config) -> tuple[str, ...]:
    """What a run in the image does not do, and why."""
    notes = []
    if config.builds:
        notes.append(
            f"the image is the build's product: the {len(config.builds)} build command(s) of "
            f"{config.label} were not run; its artifacts are gated as the image ships them"
        )
    notes.append("kernel launches not recorded: the launch recorder does not run inside an image")
    return tuple(notes)


def _in_image(entry: EntryPoint, config: Config, place: InImage) -> EntryPoint:
    """An entry point's folder as the image has it: the project's folder is the image's
    working folder (``cwd = "bin"`` is ``WORKDIR/bin``); a path outside it is the image's."""
    if entry.cwd is None:
        return entry
    cwd = Path(entry.cwd)
    if cwd.is_relative_to(config.project_dir):
        inside = Path(place.image.working_dir) / cwd.relative_to(config.project_dir)
        return replace(entry, cwd=str(inside))
    return entry


class _StageResult(Protocol):
    """What every stage outcome has."""

    @property
    def checks(self) -> tuple[Check, ...]: ...

    @property
    def failure(self) -> GateError | None: ...


def _run_stages(
    options: RunOptions,
    config: Config,
    evidence: EvidenceDir,
    workdir: Path,
    p: _Progress,
    *,
    before_project: Callable[[], None],
) -> tuple[_Found, Interrupted | None]:
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
    stages = _Stages(options, config, evidence, workdir, p, before_project=before_project)
    interrupted = None
    every = _beat_interval()
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


def _beat_interval() -> float:
    """Seconds between heartbeats: ``CUDA_GATE_HEARTBEAT`` when it is a positive number,
    else 10 on a terminal and 30 in a log."""
    chosen = heartbeat_setting()
    if chosen is not None:
        return chosen
    return _BEAT_TERMINAL if sys.stderr.isatty() else proc.HEARTBEAT_EVERY


def _internal(p: _Progress, remaining: list[str], error: GateError) -> None:
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


def _store(evidence: Path, settings: StoreSettings, project_dir: Path) -> str:
    """Keep the evidence in the store under its revision; a folder outside git stays local."""
    from gate.store import publish, run_meta_from_evidence  # noqa: PLC0415 - only a run that stores

    try:
        meta = run_meta_from_evidence(evidence, cwd=project_dir)
    except ConfigError as e:
        return f"evidence not stored: {e.message}"
    published = publish(evidence, meta, settings)
    return f"evidence stored: {published.location}"
