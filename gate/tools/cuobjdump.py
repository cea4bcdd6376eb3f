"""The cuobjdump backend: run NVIDIA's tool and parse its listings into our records.

cuobjdump exits 0 when a file simply holds no ELF or PTX, prints the same arch name
for ``sm_100`` and ``sm_100f``, and lists the device-link stub as a second cubin:
parse content, never trust its exit code or count lines naively (CUDA-FACTS.md).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from gate import proc
from gate.errors import ToolError
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.targets import Target, Version
from gate.system import toolkit

TIMEOUT = 600.0
# What cuobjdump may print and still be read whole: -symbols on torch's libtorch_cuda.so
# prints 74 MB (far beyond proc's default, which keeps only a head and a tail).
OUTPUT_LIMIT = 1 << 30
_LIST_RE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+(\S+)\s*$", re.MULTILINE)
_BLOCK_RE = re.compile(r"^Fatbin (elf|ptx) code:\n=+\n", re.MULTILINE)
_ARCH_RE = re.compile(r"^arch = (\S+)", re.MULTILINE)
# cuobjdump 13.5 prints "FUNC GLOBAL DEFAULT ENTRY name";
# 13.0 prints "STT_FUNC STB_GLOBAL STO_ENTRY name".
_ENTRY_SYMBOL_RE = re.compile(
    r"^(?:STT_)?FUNC\s+(?:\S+\s+){1,3}?(?:STO_)?ENTRY\s+(\S+)\s*$", re.MULTILINE
)
# Line starts are matched with [ \t]*, never \s*: \s* at a line start runs over every
# following newline, and from each of a run of newlines: quadratic on such text.
_PTX_ENTRY_RE = re.compile(
    r"^[ \t]*(?:\.visible[ \t]+|\.weak[ \t]+)?\.entry\s+([\w$.]+)", re.MULTILINE
)
_PTX_VERSION_RE = re.compile(r"^[ \t]*\.version[ \t]+([0-9]{1,4}\.[0-9]{1,4})\b", re.MULTILINE)
_PTX_TARGET_RE = re.compile(r"^[ \t]*\.target[ \t]+(\S+?)(?:,|\s|$)", re.MULTILINE)


class RefusedError(ToolError):
    """cuobjdump read the file and refused it (a ``fatal`` line such as "Invalid fatbin
    header"): its word on the file, which the cross-check weighs against our reader's."""

    def __init__(self, message: str, *, said: str, result: proc.Result) -> None:
        super().__init__(message)
        self.said = said
        self.result = result


@dataclass(frozen=True)
class PtxText:
    """One PTX module from ``--dump-ptx``: the arch cuobjdump names and what the text declares."""

    arch: str
    version: str | None
    target: str | None
    entries: tuple[str, ...]


def find() -> str:
    """cuobjdump from PATH, next to nvcc, or from the nvidia-cuda-cuobjdump wheel: the first
    of them that runs on this machine. A wheel's tag can promise more than its binary keeps
    (the aarch64 wheel of 13.5.37 is tagged manylinux_2_17 but needs glibc 2.38, and Debian
    12 has 2.36), so a cuobjdump that cannot start is passed over; ToolError naming why
    when none can."""
    first = shutil.which("cuobjdump")
    found = [first] if first else []
    for folder in _candidate_dirs():
        candidate = Path(folder) / "cuobjdump"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            found.append(str(candidate))
    if not found:
        raise ToolError("cuobjdump not found on PATH", hint="install it or put it on PATH")
    failures = []
    for tool in dict.fromkeys(found):
        why = _cannot_run(tool)
        if why is None:
            return tool
        failures.append(f"{tool}: {why}")
    raise ToolError(f"no cuobjdump found runs on this machine ({'; '.join(failures)})")


@functools.cache
def _cannot_run(tool: str) -> str | None:
    """Why ``tool --version`` fails (a loader error, ...), None when it runs: asked once."""
    result = proc.run([tool, "--version"], timeout=60)
    if result.ok:
        return None
    return result.last_line() or f"exit status {result.returncode}"


def _candidate_dirs() -> list[str]:
    """Folders that may hold cuobjdump after PATH: the toolkit's, then NVIDIA's wheels'."""
    dirs = [str(Path(os.environ[v]) / "bin") for v in ("CUDA_HOME", "CUDA_PATH") if v in os.environ]
    dirs.append("/usr/local/cuda/bin")
    dirs += [str(folder) for folder in toolkit.wheel_folders("bin")]
    return dirs


def _env_with_nvdisasm(tool: str) -> dict[str, str]:
    """cuobjdump --dump-sass needs nvdisasm; the wheels put both in one folder."""
    folder = str(Path(tool).parent)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_tool(
    tool: str, args: list[str], artifact: Path, *, claim_strays: bool = True
) -> proc.Result:
    """Run cuobjdump with ``args`` on ``artifact``; RefusedError where it prints a fatal
    error about the file, ToolError where it fails otherwise.

    ``claim_strays=False`` when it runs beside the project's commands (gate.proc.run).
    """
    result = proc.run(
        [tool, *args, str(artifact)],
        timeout=TIMEOUT,
        env_set=_env_with_nvdisasm(tool),
        output_limit=OUTPUT_LIMIT,
        claim_strays=claim_strays,
    )
    label = f"cuobjdump {' '.join(args)} {artifact}"
    if result.cut:
        # A cut listing would read as missing cubins: never compare against one.
        raise ToolError(
            f"{label} printed more than {OUTPUT_LIMIT >> 20} MiB; its output cannot be used whole"
        )
    fatal = [line for line in result.stderr.splitlines() if "fatal" in line]
    if fatal and not result.timed_out:
        said = " ".join(fatal[0].split())
        raise RefusedError(f"{label} failed: {said}", said=said, result=result)
    if not result.ok and not (result.returncode and _no_device_code(result)):
        raise ToolError(result.describe_failure(label, TIMEOUT))
    return result


def _no_device_code(result: proc.Result) -> bool:
    return "does not contain device code" in result.output()


def parse_list(text: str, kind: str) -> tuple[str, ...]:
    """Names from ``--list-elf`` (kind "ELF") or ``--list-ptx`` (kind "PTX"), in order."""
    return tuple(name for k, name in _LIST_RE.findall(text) if k == kind)


def _blocks(text: str) -> list[tuple[str, str]]:
    """Split cuobjdump output into (kind, body) per ``Fatbin elf/ptx code:`` header."""
    matches = list(_BLOCK_RE.finditer(text))
    out = []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out.append((match.group(1), text[match.end() : end]))
    return out


def parse_symbols(text: str) -> list[tuple[Target, tuple[str, ...]]]:
    """Per cubin in ``-symbols`` output, its arch and ENTRY function names, in order."""
    out = []
    for kind, body in _blocks(text):
        if kind != "elf":
            continue
        arch = _ARCH_RE.search(body)
        if not arch:
            raise ToolError("cuobjdump -symbols printed a cubin block without an arch line")
        out.append((Target.parse(arch.group(1)).as_sass(), tuple(_ENTRY_SYMBOL_RE.findall(body))))
    return out


def parse_ptx_dump(text: str) -> list[PtxText]:
    """Per PTX module in ``--dump-ptx`` output, the declared version, target and entries."""
    out = []
    for kind, body in _blocks(text):
        if kind != "ptx":
            continue
        arch = _ARCH_RE.search(body)
        version = _PTX_VERSION_RE.search(body)
        target = _PTX_TARGET_RE.search(body)
        out.append(
            PtxText(
                arch=arch.group(1) if arch else "",
                version=version.group(1) if version else None,
                target=target.group(1) if target else None,
                entries=tuple(_PTX_ENTRY_RE.findall(body)),
            )
        )
    return out


def listing(symbols_text: str, ptx_text: str) -> Listing:
    """Our Listing from ``-symbols`` and ``--dump-ptx`` output (cuobjdump cannot show ``f``)."""
    entries = [
        DeviceEntry(Kind.SASS, target, kernels=kernels)
        for target, kernels in parse_symbols(symbols_text)
    ]
    for module in parse_ptx_dump(ptx_text):
        declared = module.target or module.arch
        target = Target.parse(declared.replace("sm_", "compute_", 1)).as_ptx()
        entries.append(
            DeviceEntry(
                Kind.PTX,
                target,
                kernels=module.entries,
                ptx_isa=Version.parse(module.version) if module.version else None,
            )
        )
    return Listing(tuple(entries))


@functools.cache
def version(tool: str) -> str:
    """cuobjdump's own version line, for the evidence (asked once per process)."""
    result = proc.run([tool, "--version"], timeout=60)
    for line in result.stdout.splitlines():
        if "release" in line or line.startswith("Build"):
            return line.strip()
    return result.last_line()
