"""`cuda-gate run`: the stages in order, each writing its evidence, always ending in a report.

environment -> probe -> build -> inspect -> execute -> report. A stage that cannot go
on raises a GateError; the pipeline records it as the blocking reason, skips what
depends on it, and still writes JUnit, the summary and result.json, so the evidence
gathered so far is never lost. The verdict is accepted only with execution evidence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gate import (
    build,
    checks,
    environment,
    execute,
    inspection,
    manifest,
    probe,
    proc,
    result,
    store,
)
from gate.errors import ConfigError, GateError, NoDeviceError, ToolError
from gate.evidence import EvidenceDir
from gate.targets import Capability, Target

if TYPE_CHECKING:
    from gate.signing import Signer

STAGES = ("environment", "probe", "build", "inspect", "execute", "report", "manifest", "store")
SMOKE_KERNEL = "write_value"

Progress = Callable[[str], None]


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
    blocked: GateError | None = None
    stopped_after: str | None = None


@dataclass(frozen=True)
class Outcome:
    """The end of a run: the report, where the evidence is, and what the stages found."""

    report: result.Report
    evidence: Path
    state: RunState
    manifest: str
    stored: str
    store_error: GateError | None = None


@contextmanager
def _stage(name: str, progress: Progress) -> Iterator[None]:
    index = STAGES.index(name) + 1
    progress(f"[{index}/{len(STAGES)}] {name} ...")
    start = time.monotonic()
    yield
    progress(f"[{index}/{len(STAGES)}] {name} done ({time.monotonic() - start:.1f} s)")


def _record(state: RunState, done: proc.Result) -> proc.Result:
    state.commands.append(done)
    state.evidence.write_text(
        "commands.txt", "".join(f"{r.command_line()}\n" for r in state.commands)
    )
    return done


def stage_environment(state: RunState, options: RunOptions) -> None:
    """Host arch, OS, driver, toolkit, supported targets, source revision."""
    ev = state.evidence
    state.host_arch = environment.host_arch()
    state.os = environment.os_description()
    ev.write_text("host-arch.txt", state.host_arch + "\n")
    ev.write_text("os.txt", state.os + "\n")
    try:
        full, query = environment.nvidia_smi()
        ev.write_text("driver.txt", full.output())
        state.driver = environment.driver_from(full, query)
        ev.write_json(
            "driver.json",
            {
                "version": 1,
                "name": state.driver.name,
                "driver_version": state.driver.driver_version,
                "cuda_version": str(state.driver.cuda_version),
                "gpu_count": state.driver.gpu_count,
            },
        )
        state.checks.append(
            checks.Check(
                "driver",
                "gate.environment",
                True,
                f"{state.driver.name}, driver {state.driver.driver_version}, "
                f"CUDA {state.driver.cuda_version}",
            )
        )
    except ToolError as e:
        ev.write_text("driver.txt", f"nvidia-smi: {e.one_line()}\n")
        state.checks.append(checks.Check("driver", "gate.environment", False, e.one_line()))
    state.source = environment.source_info(state.project_dir)
    nvcc = environment.nvcc_path(options.nvcc)
    version = _record(state, proc.run_checked([nvcc, "--version"], what="nvcc --version"))
    ev.write_text("toolkit.txt", version.stdout)
    state.toolkit = environment.parse_nvcc_version(version.stdout, nvcc)
    codes = _record(state, proc.run_checked([nvcc, "--list-gpu-code"], what="nvcc --list-gpu-code"))
    ev.write_text("supported-targets.txt", codes.stdout)
    state.supported = environment.parse_gpu_code_list(codes.stdout)
    if not state.supported:
        raise ToolError(f"{nvcc} --list-gpu-code listed no targets")
    state.checks.append(
        checks.Check(
            "toolkit",
            "gate.environment",
            True,
            f"nvcc {state.toolkit.release}, {len(state.supported)} targets",
        )
    )


def stage_probe(state: RunState, options: RunOptions, workdir: Path) -> None:
    """Read the device's capability; pick the target; stop if the toolkit lacks it."""
    binary, built = probe.build_probe(_toolkit(state).nvcc, workdir)
    _record(state, built)
    try:
        state.capability, ran = probe.run_probe(binary)
        _record(state, ran)
        state.evidence.write_text("compute-capability.txt", f"{state.capability.number}\n")
        state.evidence.write_text("probe.log", ran.output())
        state.checks.append(
            checks.Check(
                "compute capability", "gate.probe", True, f"device 0 is {state.capability}"
            )
        )
    except NoDeviceError as e:
        state.device_error = e.message
        state.evidence.write_text("compute-capability.txt", f"unavailable: {e.message}\n")
        if options.target is None:
            raise
        state.checks.append(checks.Check("compute capability", "gate.probe", False, e.message))
    if options.target is not None:
        state.target, state.target_source = options.target.as_sass(), "--target"
    elif state.capability is not None:
        state.target, state.target_source = state.capability.sm(), "probe"
    else:
        raise NoDeviceError("no CUDA device was usable and no --target was given")
    if state.capability is not None and not state.target.sass_runs_on(state.capability):
        state.checks.append(
            checks.Check(
                f"{state.target} serves the device",
                "gate.probe",
                False,
                f"{state.target} SASS cannot run on the detected device {state.capability}",
            )
        )
    probe.require_supported(state.target, state.supported)
    state.checks.append(
        checks.Check(
            f"{state.target} supported by the toolkit",
            "gate.probe",
            True,
            f"{state.target} is in nvcc --list-gpu-code",
        )
    )


def stage_build(state: RunState, options: RunOptions, workdir: Path) -> None:
    """Build the smoke program with native SASS and PTX for the target."""
    target = _target(state)
    sass = options.sass if options.sass is not None else (target.as_sass(),)
    ptx = options.ptx if options.ptx is not None else (target.as_ptx(),)
    built = build.build_smoke(_toolkit(state).nvcc, workdir, sass, ptx)
    _record(state, built.result)
    state.builds.append(built)
    state.evidence.write_text("build.log", built.result.output())
    state.checks.append(
        checks.Check(
            "build check",
            "gate.build",
            True,
            built.result.command_line(),
            duration=built.result.duration,
        )
    )


def stage_inspect(state: RunState, options: RunOptions) -> None:
    """Inspect the final artifact: format, hash, dependencies, SASS and PTX listings."""
    target = _target(state)
    ev = state.evidence
    for built in state.builds:
        devices = (state.capability,) if state.capability else (target.capability,)
        artifact = inspection.inspect_artifact(
            built.output,
            ev,
            dump_sass=options.dump_sass,
            devices=devices,
            use_cuobjdump=options.use_cuobjdump,
        )
        state.artifacts.append(artifact)
        ev.write_text("binary-format.txt", artifact.host.description + "\n")
        ev.write_text("sha256.txt", f"{artifact.sha256}  {artifact.path}\n")
        ev.write_text(
            "dependencies.txt",
            "".join(
                f"{d.needed_by}: {d.name} => {d.resolved or 'not found'}\n"
                for d in artifact.dependencies
            ),
        )
        state.checks += inspection.content_checks(artifact, ev, state.host_arch)
        state.checks.append(inspection.cross_check(artifact))
        state.checks += checks.listing_checks(
            artifact.name, artifact.listing, target, (SMOKE_KERNEL,)
        )


def stage_execute(state: RunState, options: RunOptions) -> None:
    """Run each artifact natively and through forced JIT, then compare with the prediction."""
    if state.capability is None:
        reason = f"not run: {state.device_error or 'no CUDA device'}"
        for built in state.builds:
            for path in execute.ExecPath:
                state.checks.append(
                    checks.Check(
                        f"{built.name} [{path.value}]",
                        f"gate.execute.{path.value}",
                        False,
                        reason,
                        skipped=True,
                    )
                )
        state.evidence.write_text(
            "execution-status.txt", f"native=not run\nptx_jit=not run\nreason={reason}\n"
        )
        return
    for built in state.builds:
        entry = execute.EntryPoint(built.name, (str(built.output),), timeout=options.timeout)
        runs = execute.run_both(entry)
        state.executions += runs
        for run_ in runs:
            state.evidence.write_text(run_.log_name, execute.log_text(run_))
            state.checks.append(checks.execution_check(run_))
        status = "".join(
            f"{'ptx_jit' if r.path is execute.ExecPath.JIT else 'native'}="
            f"{'timeout' if r.result.timed_out else r.result.returncode}\n"
            for r in runs
        )
        state.evidence.write_text("execution-status.txt", status)
        artifact = next((a for a in state.artifacts if a.path == built.output.resolve()), None)
        if artifact is not None:
            state.checks.append(
                checks.prediction_check(
                    artifact.name,
                    artifact.listing,
                    state.capability,
                    state.driver.cuda_version if state.driver else None,
                    runs,
                )
            )


def run(options: RunOptions, progress: Progress) -> Outcome:
    """Run every stage up to ``options.stop_after`` and write the report."""
    evidence = EvidenceDir.create(options.evidence)
    state = RunState(datetime.now(UTC), evidence, options.project_dir)
    # Beside the evidence by default: `cuda-gate verify` re-hashes these artifacts later.
    build_dir = (options.build_dir or options.evidence.parent / "gate-build").resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    steps: list[tuple[str, Callable[[], None]]] = [
        ("environment", lambda: stage_environment(state, options)),
        ("probe", lambda: stage_probe(state, options, build_dir)),
        ("build", lambda: stage_build(state, options, build_dir)),
        ("inspect", lambda: stage_inspect(state, options)),
        ("execute", lambda: stage_execute(state, options)),
    ]
    try:
        for name, step in steps:
            with _stage(name, progress):
                step()
            if options.stop_after == name:
                state.stopped_after = name
                break
    except GateError as e:
        _block(state, name, e, progress)
    except Exception as e:  # noqa: BLE001  (a bug must still leave the evidence and a report)
        _block(
            state, name, GateError(f"internal error in {name}: {type(e).__name__}: {e}"), progress
        )
    with _stage("report", progress):
        finished = result.finish(state)
    with _stage("manifest", progress):
        written = manifest.write_manifest(evidence.root, options.signer)
    progress(written.message)
    stored, store_error = "evidence not stored (--no-store)", None
    if options.store_settings is not None:
        with _stage("store", progress):
            try:
                stored = stage_store(evidence.root, options.store_settings, options.project_dir)
            except GateError as e:
                stored, store_error = f"evidence not stored: {e.one_line()}", e
        progress(stored)
    return Outcome(finished, evidence.root, state, written.message, stored, store_error)


def stage_store(evidence: Path, settings: store.StoreSettings, project_dir: Path) -> str:
    """Keep the evidence in the store under its revision; a folder outside git stays local."""
    try:
        meta = store.run_meta_from_evidence(evidence, cwd=project_dir)
    except ConfigError as e:
        return f"evidence not stored: {e.message}"
    published = store.publish(evidence, meta, settings)
    return f"evidence stored: {published.location}"


def _block(state: RunState, stage: str, error: GateError, progress: Progress) -> None:
    state.blocked = error
    state.checks.append(checks.Check(f"{stage} stage", f"gate.{stage}", False, error.one_line()))
    progress(f"[{STAGES.index(stage) + 1}/{len(STAGES)}] {stage} stopped: {error.one_line()}")


def _toolkit(state: RunState) -> environment.ToolkitInfo:
    if state.toolkit is None:
        raise GateError("internal error: no toolkit recorded before a stage that needs one")
    return state.toolkit


def _target(state: RunState) -> Target:
    if state.target is None:
        raise GateError("internal error: no target chosen before a stage that needs one")
    return state.target
