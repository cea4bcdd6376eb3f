"""The build stage: compile the smoke program for the detected target, recording the command.

The gencode form is the seed's: ``arch=compute_XY,code=[sm_XY,compute_XY]`` asks for
native SASS and PTX of the same target in one fat binary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gate import proc
from gate.errors import ToolError
from gate.reader.targets import Target
from gate.stages.probe import BUILD_TIMEOUT, cuda_source


@dataclass(frozen=True)
class Build:
    """One finished build: its output and the exact command that produced it."""

    name: str
    output: Path
    result: proc.Result


def gencode(sass: Sequence[Target], ptx: Sequence[Target]) -> list[str]:
    """``-gencode`` flags for SASS and PTX targets, grouped per virtual architecture."""
    by_arch: dict[str, list[str]] = {}
    for target in sass:
        by_arch.setdefault(str(target.as_ptx()), []).append(str(target.as_sass()))
    for target in ptx:
        by_arch.setdefault(str(target.as_ptx()), []).append(str(target.as_ptx()))
    flags: list[str] = []
    for arch, codes in by_arch.items():
        flags += ["-gencode", f"arch={arch},code=[{','.join(dict.fromkeys(codes))}]"]
    return flags


def build_smoke(
    nvcc: str,
    workdir: Path,
    sass: Sequence[Target],
    ptx: Sequence[Target],
    *,
    name: str = "check",
) -> Build:
    """Compile check.cu with the given targets into ``workdir/name``."""
    source = workdir / "check.cu"
    source.write_text(cuda_source("check.cu"), encoding="utf-8")
    output = workdir / name
    argv = [nvcc, "-O2", *gencode(sass, ptx), str(source), "-o", str(output)]
    result = proc.run(argv, cwd=workdir, timeout=BUILD_TIMEOUT)
    if not result.ok:
        raise ToolError(
            f"building {name} failed with exit status {result.returncode}: "
            f"{result.last_line() or 'no output'}"
        )
    return Build(name, output, result)
