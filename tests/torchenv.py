"""Finding the interpreter that holds a CUDA build of torch, for the tests that need one.

The test virtualenv has no torch; the user's interpreter does, as on the GPU machine. The
tests name it with GATE_TEST_TORCH_PYTHON, else take the first python3 on PATH, outside this
virtualenv, that imports a CUDA build of torch. (Not CUDA_GATE_PYTHON: every test runs
without the user's CUDA_GATE_* settings, see conftest.py; the tests hand the interpreter
they found to the gate themselves.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest


def _probe(python: str) -> str | None:
    """Why ``python`` cannot serve (None: it imports a CUDA build of torch)."""
    try:
        probe = subprocess.run(
            [python, "-c", "import torch; print(torch.version.cuda or '')"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except OSError as error:
        return f"{python}: {error.strerror}"
    if probe.returncode != 0:
        return f"{python} cannot import torch"
    if not probe.stdout.strip():
        return f"the torch of {python} is not a CUDA build"
    return None


@cache
def torch_python() -> tuple[str | None, str]:
    """The interpreter with a CUDA build of torch, or None and why not."""
    named = os.environ.get("GATE_TEST_TORCH_PYTHON")
    if named:
        why = _probe(named)
        return (None, f"{why} (GATE_TEST_TORCH_PYTHON)") if why else (named, "")
    own = Path(sys.prefix).resolve()
    tried: list[str] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder or ".") / "python3"
        # The folder, not the file: a virtualenv's python3 links to the base interpreter.
        if not candidate.is_file() or own in Path(folder).resolve().parents:
            continue
        why = _probe(str(candidate))
        if why is None:
            return str(candidate), ""
        tried.append(why)
    found = "; ".join(tried) or "no python3 on PATH outside the test virtualenv"
    return None, f"{found} (set GATE_TEST_TORCH_PYTHON)"


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
