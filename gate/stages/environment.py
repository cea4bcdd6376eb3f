"""Stage 1, environment: host arch, OS, driver, toolkit, supported targets, source revision.

Each fact is parsed into a frozen record; the raw tool output goes to the evidence
folder beside it (the seed's host-arch.txt, driver.txt, toolkit.txt,
supported-targets.txt). A missing driver is recorded, not fatal (static stages can
still run); a missing or broken nvcc stops the pipeline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gate import proc
from gate.container.info import ContainerInfo, inside
from gate.container.place import HOST, InImage, Place
from gate.errors import GateError, ToolError
from gate.evidence import EvidenceDir
from gate.record import Environment
from gate.rules.targets import Target
from gate.rules.verdict import Check, CheckState
from gate.system import git, machine, toolkit
from gate.system.machine import DriverInfo, ToolkitInfo

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


def run(
    evidence: EvidenceDir,
    *,
    nvcc: str | None,
    project_dir: Path,
    place: Place = HOST,
    container: ContainerInfo | None = None,
) -> EnvironmentOutcome:
    """Gather the facts of this machine (or of the image ``place`` runs in) and write them
    to the evidence folder. ``container`` is the image the run is in, when it is."""
    commands: list[proc.Result] = []
    if isinstance(place, InImage):
        _image_evidence(evidence, place, container)
        os_text, said = _image_os(place)
        commands.append(said)
    else:
        os_text = machine.os_description()
        container = container or inside()
    host_arch = machine.host_arch()
    evidence.write_text("host-arch.txt", host_arch + "\n")
    evidence.write_text("os.txt", os_text + "\n")
    driver, driver_error, driver_check = _driver(evidence, place)
    checks = [driver_check]
    source = git.source_info(project_dir)
    nvcc_info: ToolkitInfo | None = None
    supported: tuple[Target, ...] = ()
    failure: GateError | None = None
    try:
        path, nvcc_info = _toolkit(evidence, place, nvcc, commands)
        supported = _supported_targets(evidence, place, path, commands)
        checks.append(_toolkit_check(path, nvcc_info, supported, place))
    except GateError as e:
        failure = e
    environment = Environment(
        host_arch=host_arch,
        os=os_text,
        driver=driver,
        toolkit=nvcc_info,
        supported_targets=supported,
        container=container,
    )
    return EnvironmentOutcome(
        environment, source, driver_error, tuple(commands), tuple(checks), failure
    )


def _driver(evidence: EvidenceDir, place: Place) -> tuple[DriverInfo | None, str | None, Check]:
    """The driver as nvidia-smi reports it, or why it could not: driver.txt, driver.json."""
    try:
        full, query = _nvidia_smi(place)
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
    except ToolError as e:
        driver_error = e.one_line()
        evidence.write_text("driver.txt", f"nvidia-smi: {driver_error}\n")
        # Not a failure on its own: a GPU-less machine can still check artifacts statically
        # (and without a device nothing runs, so the verdict cannot be accepted anyway).
        return (
            None,
            driver_error,
            Check("driver", "gate.environment", CheckState.WARNED, driver_error),
        )
    said = f"{driver.name}, driver {driver.driver_version}, CUDA {driver.cuda_version}"
    return driver, None, Check("driver", "gate.environment", CheckState.PASSED, said)


def _toolkit_check(
    path: str, found: ToolkitInfo, supported: tuple[Target, ...], place: Place
) -> Check:
    """nvcc's release and targets; where it came from when NVIDIA's wheels gave it, and a
    warning naming the wheels such a toolkit lacks (its builds would fail far from it)."""
    said = f"nvcc {found.release}, {len(supported)} targets"
    if place.in_image:
        return Check("toolkit", "gate.environment", CheckState.PASSED, said)
    parts = toolkit.of(path)
    if parts.from_wheels:
        said += f", {parts.described()}"
    missing = parts.missing_hint()
    if missing is not None:
        return Check("toolkit", "gate.environment", CheckState.WARNED, f"{said}; {missing}")
    return Check("toolkit", "gate.environment", CheckState.PASSED, said)


def _toolkit(
    evidence: EvidenceDir, place: Place, nvcc: str | None, commands: list[proc.Result]
) -> tuple[str, ToolkitInfo]:
    """nvcc's path and its ``--version`` parsed (toolkit.txt); the command joins ``commands``."""
    if isinstance(place, InImage):
        path, version = _image_nvcc(place, nvcc)
    else:
        path = machine.nvcc_path(nvcc)
        version = proc.run_checked(
            [path, "--version"], what="nvcc --version", timeout=_QUERY_TIMEOUT
        )
    commands.append(version)
    evidence.write_text("toolkit.txt", version.stdout)
    return path, machine.parse_nvcc_version(version.stdout, path)


def _supported_targets(
    evidence: EvidenceDir, place: Place, nvcc: str, commands: list[proc.Result]
) -> tuple[Target, ...]:
    """The targets ``nvcc --list-gpu-code`` lists (supported-targets.txt); none is an error."""
    codes = place.run([nvcc, "--list-gpu-code"], timeout=_QUERY_TIMEOUT)
    commands.append(codes)
    if not codes.ok:
        raise ToolError(codes.describe_failure("nvcc --list-gpu-code", _QUERY_TIMEOUT))
    evidence.write_text("supported-targets.txt", codes.stdout)
    supported = machine.parse_gpu_code_list(codes.stdout)
    if not supported:
        raise ToolError(f"{nvcc} --list-gpu-code listed no targets")
    return supported


def _nvidia_smi(place: Place) -> tuple[proc.Result, proc.Result | None]:
    """``nvidia-smi`` and its query, here or in the image (as its programs see the driver)."""
    if not isinstance(place, InImage):
        return machine.nvidia_smi()
    full = place.run(["nvidia-smi"], timeout=_QUERY_TIMEOUT)
    if not full.ok:
        if "not found" in full.output() or full.returncode in (126, 127):
            raise ToolError(f"nvidia-smi not found in the image ({place.gpus_said})")
        return full, None
    query = place.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
        timeout=_QUERY_TIMEOUT,
    )
    return full, query


def _image_evidence(evidence: EvidenceDir, place: InImage, info: ContainerInfo | None) -> None:
    """The runtime's own inspection, as printed, and in words what the run is in."""
    evidence.write_text("image-inspect.json", place.image.raw)
    image = place.image
    lines = [
        f"image: {image.reference.text}",
        f"digest: {image.digest or 'none reported'} (from {place.runtime.name} image inspect)",
        f"image id: {image.image_id}",
        f"platform: {image.platform}",
        f"working folder: {image.working_dir}",
        f"runtime: {place.runtime.label} ({place.runtime.program})",
        f"gpus: {place.gpus_said}",
        "each command: " + proc.command_line(place.argv(["COMMAND"])),
    ]
    if info is not None and info.digest_source:
        lines.append(f"digest source: {info.digest_source}")
    evidence.write_text("container.txt", "\n".join(lines) + "\n")


def _image_os(place: InImage) -> tuple[str, proc.Result]:
    """The image's distribution (its /etc/os-release) on this machine's kernel."""
    said = place.run(["cat", "/etc/os-release"], timeout=_QUERY_TIMEOUT)
    kernel = machine.kernel_release()
    match = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', said.stdout, re.MULTILINE)
    name = match.group(1) if said.ok and match else f"unknown ({place.image.platform})"
    return f"{name} (image {place.image.reference.text}; kernel {kernel})", said


def _image_nvcc(place: InImage, explicit: str | None) -> tuple[str, proc.Result]:
    """The image's nvcc and its ``--version``: ``explicit`` (a path in the image), else the
    first that runs of ``nvcc`` (the image's PATH), ``$CUDA_HOME/bin/nvcc`` (its Env),
    ``/usr/local/cuda/bin/nvcc``."""
    env = dict(place.image.env)
    candidates = [explicit] if explicit else ["nvcc"]
    if not explicit:
        candidates += [
            f"{env[v].rstrip('/')}/bin/nvcc" for v in ("CUDA_HOME", "CUDA_PATH") if env.get(v)
        ]
        candidates.append("/usr/local/cuda/bin/nvcc")
    tried = []
    for candidate in dict.fromkeys(candidates):
        result = place.run([candidate, "--version"], timeout=_QUERY_TIMEOUT)
        if result.ok:
            return candidate, result
        tried.append(f"{candidate}: {result.last_line() or f'exit status {result.returncode}'}")
    raise ToolError(
        f"no nvcc in the image {place.image.reference.text} ({'; '.join(tried)})",
        hint="the probe and the smoke program are built by the image's own toolkit: gate a "
        "-devel image, or name its nvcc with --nvcc PATH-IN-THE-IMAGE",
    )
