"""Stage 1, environment: host arch, OS, driver, toolkit, supported targets, source revision.

Each fact is parsed into a frozen record; the raw tool output goes to the evidence
folder beside it (the seed's host-arch.txt, driver.txt, toolkit.txt,
supported-targets.txt). A missing driver is recorded, not fatal (static stages can
still run); a missing or broken nvcc stops the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate import git, machine, proc
from gate.errors import GateError, ToolError
from gate.evidence import EvidenceDir
from gate.machine import ToolkitInfo
from gate.record import Environment
from gate.rules.targets import Target
from gate.rules.verdict import Check, CheckState

_QUERY_TIMEOUT = 60.0


@dataclass(frozen=True)
class EnvironmentOutcome:
    """What the environment stage found; ``failure`` when nvcc could not be used."""

    environment: Environment
    source: git.SourceInfo
    driver_error: str | None
    commands: tuple[proc.Result, ...]
    checks: tuple[Check, ...]
    failure: GateError | None = None


def run(evidence: EvidenceDir, *, nvcc: str | None, project_dir: Path) -> EnvironmentOutcome:
    """Gather the facts of this machine and write them to the evidence folder."""
    host_arch, os_text = machine.host_arch(), machine.os_description()
    evidence.write_text("host-arch.txt", host_arch + "\n")
    evidence.write_text("os.txt", os_text + "\n")
    checks: list[Check] = []
    driver, driver_error = None, None
    try:
        full, query = machine.nvidia_smi()
        evidence.write_text("driver.txt", full.output())
        driver = machine.driver_from(full, query)
        evidence.write_json(
            "driver.json",
            {
                "version": 1,
                "name": driver.name,
                "driver_version": driver.driver_version,
                "cuda_version": str(driver.cuda_version),
                "gpu_count": driver.gpu_count,
            },
        )
        checks.append(
            Check(
                "driver",
                "gate.environment",
                CheckState.PASSED,
                f"{driver.name}, driver {driver.driver_version}, CUDA {driver.cuda_version}",
            )
        )
    except ToolError as e:
        driver_error = e.one_line()
        evidence.write_text("driver.txt", f"nvidia-smi: {driver_error}\n")
        # Not a failure on its own: a GPU-less machine can still check artifacts statically
        # (and without a device nothing runs, so the verdict cannot be accepted anyway).
        checks.append(Check("driver", "gate.environment", CheckState.WARNED, driver_error))
    source = git.source_info(project_dir)
    commands: list[proc.Result] = []
    toolkit: ToolkitInfo | None = None
    supported: tuple[Target, ...] = ()
    failure: GateError | None = None
    try:
        path = machine.nvcc_path(nvcc)
        version = proc.run_checked(
            [path, "--version"], what="nvcc --version", timeout=_QUERY_TIMEOUT
        )
        commands.append(version)
        evidence.write_text("toolkit.txt", version.stdout)
        toolkit = machine.parse_nvcc_version(version.stdout, path)
        codes = proc.run_checked(
            [path, "--list-gpu-code"], what="nvcc --list-gpu-code", timeout=_QUERY_TIMEOUT
        )
        commands.append(codes)
        evidence.write_text("supported-targets.txt", codes.stdout)
        supported = machine.parse_gpu_code_list(codes.stdout)
        if not supported:
            raise ToolError(f"{path} --list-gpu-code listed no targets")
        checks.append(
            Check(
                "toolkit",
                "gate.environment",
                CheckState.PASSED,
                f"nvcc {toolkit.release}, {len(supported)} targets",
            )
        )
    except GateError as e:
        failure = e
    environment = Environment(
        host_arch=host_arch,
        os=os_text,
        driver=driver,
        toolkit=toolkit,
        supported_targets=supported,
        container=machine.container_info(),
    )
    return EnvironmentOutcome(
        environment, source, driver_error, tuple(commands), tuple(checks), failure
    )
