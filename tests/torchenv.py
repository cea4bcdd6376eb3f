"""Finding the interpreter that holds a CUDA build of torch, for the tests that need one.

The test virtualenv has no torch; the user's interpreter does (CUDA_GATE_PYTHON, else the
first python3 on PATH outside this virtualenv), as on the GPU machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest


@cache
def torch_python() -> tuple[str | None, str]:
    """The interpreter with a CUDA build of torch, or None and why not."""
    chosen = os.environ.get("CUDA_GATE_PYTHON")
    if not chosen:
        own = Path(sys.prefix).resolve()
        for folder in os.environ.get("PATH", "").split(os.pathsep):
            candidate = Path(folder) / "python3"
            # The folder, not the file: a virtualenv's python3 links to the base interpreter.
            if candidate.is_file() and own not in Path(folder).resolve().parents:
                chosen = str(candidate)
                break
    if not chosen:
        return None, "no python3 outside the test virtualenv (set CUDA_GATE_PYTHON)"
    probe = subprocess.run(
        [chosen, "-c", "import torch; print(torch.version.cuda or '')"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if probe.returncode != 0:
        return None, f"{chosen} cannot import torch (set CUDA_GATE_PYTHON)"
    if not probe.stdout.strip():
        return None, f"the torch of {chosen} is not a CUDA build"
    return chosen, ""


def needs_torch() -> str:
    """The interpreter with torch, or skip with the reason."""
    python, why = torch_python()
    if python is None:
        pytest.skip(why)
    return python


def torch_library(name: str) -> Path:
    """A library in torch's lib folder (libtorch_cuda.so), or skip with the reason."""
    python = needs_torch()
    where = subprocess.run(
        [python, "-c", "import torch, pathlib; print(pathlib.Path(torch.__file__).parent)"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    lib = Path(where.stdout.strip()) / "lib" / name
    if not lib.is_file():
        pytest.skip(f"{lib} not found (a CPU-only torch build?)")
    return lib
