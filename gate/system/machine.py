"""Facts of this machine: host, driver, toolkit, supported targets, loader cache, device problems.

Each fact is parsed at the edge into a frozen record (the environment stage writes
the raw tool output to the evidence beside it); `cuda-gate verify` gathers the same
facts to compare with a manifest.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gate import proc
from gate.errors import ConfigError, ToolError, shown
from gate.reader.hostelf import parse_ld_cache
from gate.rules.targets import Capability, Target, Version
from gate.system import toolkit

_SMI_TIMEOUT = 60.0
_NVCC_RELEASE_RE = re.compile(r"release (\d+\.\d+), (V[\w.]+)")
_SMI_CUDA_RE = re.compile(r"CUDA Version:\s*(\d+\.\d+)")


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


def host_arch() -> str:
    """The host CPU architecture as `uname -m` prints it."""
    return platform.machine() or "unknown"


def background_threads() -> int:
    """Threads for the gate's own work beside a project's command (SASS dumps, library
    reads): at most a quarter of the cores, one on a small machine, never more than 4."""
    return max(1, min(4, (os.cpu_count() or 1) // 4))


def kernel_release() -> str:
    """The running kernel's release (``uname -r``): a container's is this machine's."""
    return platform.release()


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
    if not full.ok or query is None or not query.ok:
        failed = query if full.ok and query is not None else full
        raise ToolError(failed.describe_failure("nvidia-smi", _SMI_TIMEOUT))
    return parse_nvidia_smi(full.stdout, query.stdout)


def nvcc_path(explicit: str | None = None) -> str:
    """The nvcc given (or CUDA_GATE_NVCC), else from PATH, CUDA_HOME, /usr/local/cuda, else
    from NVIDIA's toolkit wheels (gate.system.toolkit) in the gate's or the project's
    Python environment."""
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
    try:
        return proc.which("nvcc", extra_dirs=[str(p) for p in extra])
    except ToolError:
        found = toolkit.wheel_nvcc(toolkit.search_folders(find_python_quietly()))
        if found is None:
            raise ToolError(
                "nvcc not found: not on PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin or "
                "NVIDIA's wheels (site-packages/nvidia/cu*/bin)",
                hint=f"install a CUDA toolkit, or pip install '{toolkit.TOOLKIT_EXTRA}' "
                "(NVIDIA's toolkit wheels), or name nvcc with --nvcc or CUDA_GATE_NVCC",
            ) from None
        return found


def find_python_quietly() -> str | None:
    """The project's interpreter as find_python finds it unasked, None when it cannot."""
    try:
        return find_python()
    except ToolError:
        return None


# nvcc compiles the host side with gcc/g++ from PATH (or -ccbin, NVCC_CCBIN). Without one it
# says only "Failed to preprocess host compiler properties" (CUDA 12-13); a gcc without g++
# or binutils fails on the missing part.
_NO_HOST_COMPILER = re.compile(
    r"Failed to preprocess host compiler properties|cannot execute '(?:cc1plus|as|ld)'"
)
HOST_COMPILER_HINT = (
    "nvcc found no working host C++ compiler: it runs gcc/g++ from PATH (or -ccbin, "
    "NVCC_CCBIN); install g++ (Debian/Ubuntu: apt install g++)"
)


def nvcc_failure_hint(output: str, nvcc: str | None = None) -> str | None:
    """What to do about a failed nvcc build, where its output says (HOST_COMPILER_HINT), or
    where the files of ``nvcc``'s toolkit say (a wheel of NVIDIA's toolkit missing)."""
    if _NO_HOST_COMPILER.search(output):
        return HOST_COMPILER_HINT
    return toolkit.failure_hint(nvcc, output) if nvcc else None


def smi_capabilities() -> tuple[Capability, ...]:
    """Every GPU's compute capability as nvidia-smi's ``compute_cap`` reports it, in order.

    ToolError when nvidia-smi is absent or fails. The probe reads the capability
    through the CUDA runtime; this is for commands that must not build anything.
    """
    smi = proc.which("nvidia-smi")
    result = proc.run_checked(
        [smi, "--query-gpu=compute_cap", "--format=csv,noheader"], timeout=_SMI_TIMEOUT
    )
    found = []
    for line in result.stdout.splitlines():
        try:
            found.append(Capability.parse(line))
        except ConfigError:
            continue
    return tuple(found)


def smi_capability() -> str | None:
    """Device 0's capability (``9.0``) from nvidia-smi; None if it lists none."""
    found = smi_capabilities()
    return str(found[0]) if found else None


@cache
def ld_cache() -> dict[tuple[str, str], str]:
    """The loader's cache as `ldconfig -p` lists it; empty when ldconfig is unavailable."""
    try:
        tool = proc.which("ldconfig", extra_dirs=["/sbin", "/usr/sbin"])
    except ToolError:
        return {}
    return parse_ld_cache(proc.run([tool, "-p"], timeout=60).stdout)


@dataclass(frozen=True)
class ProbeReport:
    """What the probe's stderr says: driver and runtime versions, and the runtime error."""

    driver: int | None  # cudaDriverGetVersion: 0 when no driver is installed
    runtime: int | None
    error_code: int | None
    error_text: str | None


_PROBE_VERSIONS = re.compile(r"driver=(\d+) runtime=(\d+)")
_PROBE_ERROR = re.compile(r"^error (\d+): (.+)$", re.MULTILINE)
_CUDA_DRIVER_TOO_OLD = 35
_CUDA_NO_DEVICE = 100
_LIBCUDA_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
    "/usr/lib/wsl/lib",
)


def parse_probe_report(stderr: str) -> ProbeReport:
    """The probe's own report (see gate/cuda/probe.cu)."""
    versions = _PROBE_VERSIONS.search(stderr)
    error = _PROBE_ERROR.search(stderr)
    return ProbeReport(
        int(versions.group(1)) if versions else None,
        int(versions.group(2)) if versions else None,
        int(error.group(1)) if error else None,
        error.group(2).strip() if error else None,
    )


def _cuda_version(number: int) -> str:
    """12040 -> "12.4" (the CUDA API's version encoding)."""
    return f"{number // 1000}.{number % 1000 // 10}"


def libcuda_present() -> bool:
    """Whether the driver's libcuda.so.1 is installed where the loader finds it."""
    if any(name == "libcuda.so.1" for name, _ in ld_cache()):
        return True
    return any((Path(d) / "libcuda.so.1").exists() for d in _LIBCUDA_DIRS)


@dataclass(frozen=True)
class DeviceFacts:
    """What decides why no device is usable, where the probe ran: the driver's library,
    the device nodes, nvidia-smi, and CUDA_VISIBLE_DEVICES (None: unset)."""

    libcuda: bool
    nodes: tuple[str, ...]
    smi: bool
    visible: str | None
    where: str = ""  # " in the image ..." when not this machine


def device_facts() -> DeviceFacts:
    """This machine's facts."""
    return DeviceFacts(
        libcuda=libcuda_present(),
        nodes=tuple(sorted(str(p) for p in Path("/dev").glob("nvidia[0-9]*"))),
        smi=shutil.which("nvidia-smi") is not None,
        visible=os.environ.get("CUDA_VISIBLE_DEVICES"),
    )


# Run by `sh` in an image: one line per fact (gate.stages.probe reads them back).
DEVICE_FACTS_SCRIPT = (
    'for f in /dev/nvidia[0-9]*; do [ -e "$f" ] && echo "node $f"; done; '
    "command -v nvidia-smi >/dev/null 2>&1 && echo smi; "
    "{ ldconfig -p 2>/dev/null | grep -q 'libcuda\\.so\\.1 '; } && echo libcuda; "
    "for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib "
    '/usr/local/nvidia/lib64; do [ -e "$d/libcuda.so.1" ] && echo libcuda; done; '
    '[ "${CUDA_VISIBLE_DEVICES+set}" = set ] && echo "visible $CUDA_VISIBLE_DEVICES"; true'
)


def parse_device_facts(text: str, where: str) -> DeviceFacts:
    """The facts :data:`DEVICE_FACTS_SCRIPT` printed."""
    lines = text.splitlines()
    visible = next((line[8:] for line in lines if line.startswith("visible ")), None)
    return DeviceFacts(
        libcuda="libcuda" in lines,
        nodes=tuple(sorted(line[5:] for line in lines if line.startswith("node "))),
        smi="smi" in lines,
        visible=visible,
        where=where,
    )


def diagnose_no_device(report: ProbeReport, facts: DeviceFacts | None = None) -> str:
    """Which of "no driver", "no device visible", "driver older than the toolkit" holds.

    The CUDA runtime says "driver version is insufficient" (error 35) also when no
    driver is installed at all; the facts decide: libcuda.so.1, the /dev/nvidia*
    device nodes, nvidia-smi, CUDA_VISIBLE_DEVICES, and the driver's own version
    (this machine's unless ``facts`` are of an image).
    """
    facts = facts or device_facts()
    said = f" (the CUDA runtime says: {report.error_text})" if report.error_text else ""
    where = facts.where
    if report.driver == 0 or not facts.libcuda:
        listed = [
            "libcuda.so.1 " + ("present" if facts.libcuda else "not found"),
            f"device nodes {' '.join(facts.nodes)}"
            if facts.nodes
            else "no /dev/nvidia* device nodes",
            "nvidia-smi " + ("present" if facts.smi else "not found"),
        ]
        # The runtime's "driver version is insufficient" says nothing when there is none.
        return f"no NVIDIA driver installed{where} ({'; '.join(listed)})"
    if report.error_code == _CUDA_DRIVER_TOO_OLD and report.driver and report.runtime:
        return (
            f"driver older than the toolkit{where}: the driver supports CUDA "
            f"{_cuda_version(report.driver)}, the toolkit's runtime is "
            f"{_cuda_version(report.runtime)}{said}"
        )
    visible = facts.visible
    if visible is not None and visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return (
            f"no device visible{where}: CUDA_VISIBLE_DEVICES={visible!r} hides every device{said}"
        )
    if not facts.nodes:
        return (
            f"no device visible{where}: the driver is installed but there is no /dev/nvidia0 "
            f"device node (in a container, start it with the GPU passed in){said}"
        )
    if report.error_code == _CUDA_NO_DEVICE or report.error_code is None:
        return f"no device visible{where}: the driver is installed but reports no device{said}"
    return f"the CUDA device cannot be used{where}{said}"


PYTHON_ENV = "CUDA_GATE_PYTHON"


def find_python(
    explicit: str | None = None,
    configured: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The project's interpreter for ``{python}``, the first of: ``explicit``
    (``--python``), ``$CUDA_GATE_PYTHON``, ``configured`` (the config's ``python``), the
    first ``python3`` on PATH outside the gate's own virtual environment.

    ToolError naming where a named interpreter came from when it cannot be found; None
    when none is named and no ``python3`` is on PATH (a config that uses ``{python}``
    then fails by name).
    """
    env = os.environ if environ is None else environ
    named = (
        (explicit, "--python"),
        (env.get(PYTHON_ENV), f"${PYTHON_ENV}"),
        (configured, "the config's python"),
    )
    chosen, origin = next(((v, o) for v, o in named if v), (None, ""))
    if chosen:
        if "/" in chosen:
            path = Path(chosen).expanduser()
            try:
                runs = path.is_file() and os.access(path, os.X_OK)
            except OSError as e:  # a name too long for the file system (ENAMETOOLONG)
                raise ToolError(f"python {shown(chosen)} (from {origin}): {e.strerror or e}") from e
            if not runs:
                raise ToolError(f"python {shown(chosen)} (from {origin}): not an executable file")
            return str(path)
        try:
            return proc.which(chosen)
        except ToolError as e:
            raise ToolError(f"python {shown(chosen)} (from {origin}): not found on PATH") from e
    # Nox puts the gate's own virtualenv first on PATH; the user's torch is not in it.
    own = Path(sys.prefix).resolve()
    for folder in env.get("PATH", "").split(os.pathsep):
        candidate = Path(folder or ".") / "python3"
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            continue
        if own in Path(folder or ".").resolve().parents or Path(folder).resolve() == own / "bin":
            continue
        return str(candidate)
    return None
