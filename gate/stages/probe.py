"""The probe stage: build and run the shipped probe to read device 0's compute capability.

The target is never guessed: it is what the CUDA runtime reports, and it must be in
the toolkit's own list of supported targets, or the gate stops with that message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from gate import proc
from gate.errors import NoDeviceError, ToolError, UnsupportedTargetError
from gate.reader.targets import Capability, Target

PROBE_TIMEOUT = 120.0
BUILD_TIMEOUT = 600.0
_CAPABILITY_RE = re.compile(r"^\s*(\d{2,3})\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ProbeResult:
    """What the probe printed, and the capability it read."""

    capability: Capability
    build: proc.Result
    run: proc.Result


def cuda_source(name: str) -> str:
    """The text of a CUDA source shipped in gate/cuda (probe.cu, check.cu)."""
    return resources.files("gate").joinpath(f"cuda/{name}").read_text(encoding="utf-8")


def build_probe(nvcc: str, workdir: Path) -> tuple[Path, proc.Result]:
    """Compile the probe (runtime API calls only, so any device can run it)."""
    source = workdir / "probe.cu"
    source.write_text(cuda_source("probe.cu"), encoding="utf-8")
    binary = workdir / "probe"
    result = proc.run([nvcc, str(source), "-o", str(binary)], cwd=workdir, timeout=BUILD_TIMEOUT)
    if not result.ok:
        raise ToolError(f"building the probe failed: {result.last_line() or 'no output'}")
    return binary, result


def run_probe(binary: Path) -> tuple[Capability, proc.Result]:
    """Run the probe; NoDeviceError with the runtime's own text when no device is usable."""
    result = proc.run([str(binary)], timeout=PROBE_TIMEOUT, env_unset=_JIT_VARIABLES)
    if result.timed_out:
        raise NoDeviceError(f"the probe did not finish within {PROBE_TIMEOUT:g} s; it was killed")
    if result.returncode != 0:
        text = result.stderr.strip().splitlines()
        reason = text[0] if text else f"probe exited with status {result.returncode}"
        raise NoDeviceError(f"no CUDA device was usable: {reason}")
    match = _CAPABILITY_RE.search(result.stdout)
    if not match:
        raise NoDeviceError(f"the probe printed no compute capability: {result.stdout.strip()!r}")
    return Capability.parse(match.group(1)), result


def require_supported(target: Target, supported: tuple[Target, ...]) -> None:
    """Stop when the toolkit cannot build ``target``; never substitute an older one."""
    if target.as_sass() not in supported:
        listed = " ".join(str(t) for t in supported) or "none"
        raise UnsupportedTargetError(
            f"{target.as_sass()} is not in this toolkit's supported targets ({listed})",
            hint="install a CUDA toolkit that lists it; do not substitute an older target",
        )


_JIT_VARIABLES = ("CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT")
