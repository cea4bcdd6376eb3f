"""`cuda-gate inspect` as a real process with no CUDA toolkit and no cuobjdump on PATH."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from gate import proc
from gate.errors import ExitCode

GOLDEN = Path(__file__).parent / "golden"

pytestmark = pytest.mark.integration


def _bare_path(tmp_path: Path) -> str:
    """A PATH holding only a folder with the basic tools; no nvcc, cuobjdump or nvidia-smi."""
    bare = tmp_path / "bin"
    bare.mkdir()
    return str(bare)


def _inspect(tmp_path: Path, *args: str) -> proc.Result:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "NVCC"))}
    env["PATH"] = _bare_path(tmp_path)
    return proc.run([sys.executable, "-m", "gate", "inspect", *args], base_env=env, timeout=120)


def test_inspect_runs_without_toolkit_and_gives_routes(tmp_path: Path) -> None:
    result = _inspect(
        tmp_path, "--json", "--names", "--device", "12.1", "--device", "9.0",
        str(GOLDEN / "libkernels.so"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (art,) = json.loads(result.stdout)["artifacts"]
    routes = {d["capability"]: [r["route"] for r in d["routes"]] for d in art["devices"]}
    assert routes == {
        "12.1": ["compatible SASS (sm_120)"],
        "9.0": ["PTX JIT (compute_80, ISA 9.0, driver >= 13.0)"],
    }


def test_bad_input_is_one_line_per_file_and_no_traceback(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes((GOLDEN / "libkernels.so").read_bytes()[:20000])
    text = tmp_path / "text.so"
    text.write_text("not a binary\n")
    result = _inspect(tmp_path, str(truncated), str(GOLDEN / "multi.o"), str(text))
    assert result.returncode == ExitCode.BAD_INPUT
    assert "Traceback" not in result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 3
    assert errors[0].startswith(f"cuda-gate: error: {truncated}: ")
    assert errors[1].startswith(f"cuda-gate: error: {text}: ")
    assert "multi.o" in result.stdout


def test_kernel_names_demangle_through_the_cxx_runtime_and_fall_back() -> None:
    # Integration tier: gate.demangle may look for libstdc++ with ldconfig.
    from gate.demangle import demangle as _demangle

    assert _demangle("_Z11write_valuePi") == "write_value(int*)"
    assert _demangle("_Zbad") == "_Zbad"
    assert _demangle("plain_c_kernel") == "plain_c_kernel"
