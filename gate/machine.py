"""Facts of this machine: host, driver, toolkit, supported targets, loader cache, source revision.

Each fact is parsed at the edge into a frozen record; the raw tool output goes to
the evidence folder next to it (the seed's host-arch.txt, driver.txt, toolkit.txt,
supported-targets.txt).
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gate import proc
from gate.errors import ConfigError, ToolError
from gate.reader.hostelf import parse_ld_cache
from gate.reader.targets import Target, Version

_SMI_TIMEOUT = 60.0
_NVCC_RELEASE_RE = re.compile(r"release (\d+\.\d+), (V[\w.]+)")
_SMI_CUDA_RE = re.compile(r"CUDA Version:\s*(\d+\.\d+)")
_SMI_DRIVER_RE = re.compile(r"Driver Version:\s*([\d.]+)")
_REMOTE_RE = re.compile(r"[:/]([^/:]+)/([^/]+?)(?:\.git)?/?$")


@dataclass(frozen=True)
class DriverInfo:
    """The NVIDIA driver as nvidia-smi reports it (cuda_version is the driver's, not nvcc's)."""

    name: str
    driver_version: str
    cuda_version: Version
    gpu_count: int = 1


@dataclass(frozen=True)
class ToolkitInfo:
    """The CUDA toolkit behind the nvcc on PATH."""

    version: Version
    release: str
    nvcc: str


@dataclass(frozen=True)
class SourceInfo:
    """The git revision the gate ran on, when it ran inside a repository."""

    revision: str | None
    dirty: bool | None
    repository: str | None


@dataclass(frozen=True)
class ContainerInfo:
    """The delivery image the gate ran inside, from CUDA_GATE_IMAGE / CUDA_GATE_IMAGE_DIGEST."""

    image: str
    digest: str | None


def host_arch() -> str:
    """The host CPU architecture as `uname -m` prints it."""
    return platform.machine() or "unknown"


def os_description() -> str:
    """Distribution name when /etc/os-release has one, else the platform string."""
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        return platform.platform()
    match = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', text, re.MULTILINE)
    kernel = platform.release()
    return f"{match.group(1)} (kernel {kernel})" if match else platform.platform()


def parse_nvidia_smi(full: str, query: str) -> DriverInfo:
    """Parse `nvidia-smi` full output and `--query-gpu=name,driver_version` CSV lines."""
    cuda = _SMI_CUDA_RE.search(full)
    rows = [line.split(",") for line in query.splitlines() if line.strip()]
    if not cuda or not rows or len(rows[0]) < 2:
        raise ToolError("nvidia-smi printed no driver record (no 'CUDA Version' or no GPU row)")
    name, driver_version = rows[0][0].strip(), rows[0][1].strip()
    return DriverInfo(name, driver_version, Version.parse(cuda.group(1)), len(rows))


def parse_nvcc_version(text: str, nvcc: str) -> ToolkitInfo:
    """Parse `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    match = _NVCC_RELEASE_RE.search(text)
    if not match:
        raise ToolError(f"{nvcc} --version printed no release line")
    return ToolkitInfo(Version.parse(match.group(1)), match.group(2), nvcc)


def parse_gpu_code_list(text: str) -> tuple[Target, ...]:
    """Parse `nvcc --list-gpu-code` (one sm_XY per line); unknown lines are ignored."""
    found: list[Target] = []
    for line in text.split():
        try:
            found.append(Target.parse(line))
        except ConfigError:
            continue
    return tuple(found)


def parse_remote(url: str) -> str | None:
    """``owner/repo`` from a git remote URL (https or scp-like), or None."""
    match = _REMOTE_RE.search(url.strip())
    return f"{match.group(1)}/{match.group(2)}" if match else None


def nvidia_smi() -> tuple[proc.Result, proc.Result | None]:
    """Run `nvidia-smi` and its CSV query; ToolError when nvidia-smi is absent."""
    smi = proc.which("nvidia-smi")
    full = proc.run([smi], timeout=_SMI_TIMEOUT)
    if not full.ok:
        return full, None
    query = proc.run(
        [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
        timeout=_SMI_TIMEOUT,
    )
    return full, query


def driver_from(full: proc.Result, query: proc.Result | None) -> DriverInfo:
    """The parsed driver record, or a ToolError with nvidia-smi's own last line."""
    if full.timed_out:
        raise ToolError("nvidia-smi did not answer in time; it was killed")
    if not full.ok or query is None or not query.ok:
        failed = query if full.ok and query is not None else full
        raise ToolError(
            f"nvidia-smi failed with exit status {failed.returncode}: "
            f"{failed.last_line() or 'no output'}"
        )
    return parse_nvidia_smi(full.stdout, query.stdout)


def nvcc_path(explicit: str | None = None) -> str:
    """The nvcc given (or CUDA_GATE_NVCC), else from PATH, CUDA_HOME, /usr/local/cuda."""
    chosen = explicit or os.environ.get("CUDA_GATE_NVCC")
    if chosen:
        path = Path(chosen)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ToolError(f"nvcc not found: {chosen} is not an executable file")
        return str(path)
    extra = [
        Path(os.environ[var]) / "bin" for var in ("CUDA_HOME", "CUDA_PATH") if var in os.environ
    ]
    extra.append(Path("/usr/local/cuda/bin"))
    return proc.which("nvcc", extra_dirs=[str(p) for p in extra])


def source_info(cwd: Path) -> SourceInfo:
    """Revision, dirty flag and owner/repo of the git repository at ``cwd``, if any."""
    try:
        git = proc.which("git")
    except ToolError:
        return SourceInfo(None, None, None)
    head = proc.run([git, "rev-parse", "HEAD"], cwd=cwd, timeout=30)
    if not head.ok:
        return SourceInfo(None, None, _repository_from_env())
    status = proc.run([git, "status", "--porcelain", "--untracked-files=no"], cwd=cwd, timeout=60)
    remote = proc.run([git, "remote", "get-url", "origin"], cwd=cwd, timeout=30)
    repository = _repository_from_env() or (parse_remote(remote.stdout) if remote.ok else None)
    return SourceInfo(
        head.stdout.strip(), bool(status.stdout.strip()) if status.ok else None, repository
    )


def _repository_from_env() -> str | None:
    return os.environ.get("GITHUB_REPOSITORY") or None


def container_info() -> ContainerInfo | None:
    """The delivery image named by the workflow, if the gate runs inside one."""
    image = os.environ.get("CUDA_GATE_IMAGE")
    if not image:
        return None
    return ContainerInfo(image, os.environ.get("CUDA_GATE_IMAGE_DIGEST") or None)


@cache
def ld_cache() -> dict[tuple[str, str], str]:
    """The loader's cache as `ldconfig -p` lists it; empty when ldconfig is unavailable."""
    try:
        tool = proc.which("ldconfig", extra_dirs=["/sbin", "/usr/sbin"])
    except ToolError:
        return {}
    return parse_ld_cache(proc.run([tool, "-p"], timeout=60).stdout)
