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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gate import machine as environment
from gate import proc, store
from gate.attest import manifest
from gate.errors import ConfigError, GateError, NoDeviceError, ToolError
from gate.evidence import EvidenceDir
from gate.stages import checks, probe, project
from gate.stages import report as result
from gate.stages.state import RunOptions, RunState, record_command, toolkit_of

STAGES = ("environment", "probe", "build", "inspect", "execute", "report", "manifest", "store")

Progress = Callable[[str], None]


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
    version = record_command(state, proc.run_checked([nvcc, "--version"], what="nvcc --version"))
    ev.write_text("toolkit.txt", version.stdout)
    state.toolkit = environment.parse_nvcc_version(version.stdout, nvcc)
    codes = record_command(
        state, proc.run_checked([nvcc, "--list-gpu-code"], what="nvcc --list-gpu-code")
    )
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
    binary, built = probe.build_probe(toolkit_of(state).nvcc, workdir)
    record_command(state, built)
    try:
        state.capability, ran = probe.run_probe(binary)
        record_command(state, ran)
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
        ("build", lambda: project.stage_build(state, options, build_dir)),
        ("inspect", lambda: project.stage_inspect(state, options, build_dir)),
        ("execute", lambda: project.stage_execute(state, options)),
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
