"""The gpu tier of issue 44 item 4: a cuTile program that compiles its kernel when it runs.

cuda-tile compiles a ``@ct.kernel`` with ``tileiras`` at its first launch, hands the cubin
to ``cuLibraryLoadData`` and keeps it in its disk cache (``CUDA_TILE_CACHE_DIR``). The gate
must see that module as it sees NVRTC's (a runtime module, read and judged: its SM, its
kernel), and run each path with the tile cache empty: a program whose cubin sits in the
user's cache, run where ``tileiras`` cannot be found, passes outside the gate and fails
inside it, since nothing compiled earlier may stand in for this run's compile.

Needs a Python with cuda-tile and torch (``GATE_TEST_TILE_PYTHON``) and ``tileiras`` on
PATH (CUDA 13.1+, or the nvidia-cuda-tileiras wheel); skips saying which is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_gpu_launches import checks, gate, interpreter, target

pytestmark = pytest.mark.gpu

PROGRAM = """
import torch
import cuda.tile as ct

TILE = 16


@ct.kernel
def vector_add(a, b, out):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    y = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(out, index=(bid,), tile=x + y)


n = 1024
a = torch.arange(n, dtype=torch.float32, device="cuda")
b = torch.ones(n, dtype=torch.float32, device="cuda")
out = torch.empty_like(a)
ct.launch(torch.cuda.current_stream(), (n // TILE, 1, 1), vector_add, (a, b, out))
torch.cuda.synchronize()
print("PASS" if torch.equal(out, a + b) else "WRONG")
"""


def _config(python: str) -> str:
    return f"""smoke = false
python = "{python}"
[[entry_point]]
name = "cutile"
command = ["{{python}}", "vadd.py"]
expected_output = "PASS"
"""


def _tileiras() -> str:
    found = shutil.which("tileiras")
    if found is None:
        pytest.skip("tileiras is not on PATH (CUDA 13.1+ or the nvidia-cuda-tileiras wheel)")
    return found


def _toolkit(tileiras: str) -> dict[str, str]:
    """CUDA_HOME at the toolkit ``tileiras`` came with. cuda-tile hands CUDA_HOME on to a
    ``tileiras`` found on PATH, and tileiras takes ptxas and libnvvm from there: a CUDA_HOME
    of an older toolkit (a CUDA 13.0 image sets /usr/local/cuda) makes every compile exit 5,
    "failed to compile Tile IR program" (seen on the device, reproduced here)."""
    return {"CUDA_HOME": str(Path(tileiras).resolve().parent.parent)}


def _passes_alone(python: str, folder: Path, env: dict[str, str]) -> None:
    """The program passes outside the gate, run with ``env``."""
    done = subprocess.run(
        [python, "vadd.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "PASS" in done.stdout, done.stdout + done.stderr


def test_a_cutile_kernel_compiled_at_run_time_is_captured_and_judged(tmp_path: Path) -> None:
    python = interpreter("GATE_TEST_TILE_PYTHON", "cuda.tile, torch")
    tileiras = _tileiras()
    (tmp_path / "vadd.py").write_text(PROGRAM, encoding="utf-8")
    done, result, evidence = gate(tmp_path, _config(python), _toolkit(tileiras))
    said = done.stdout + done.stderr
    print(said)
    runs = checks(result, "cutile [")
    modules = checks(result, "runtime module ")
    print({n: (c["state"], c["message"][:200]) for n, c in {**runs, **modules}.items()})
    assert runs["cutile [native]"]["state"] == "passed", said
    native = [
        c for n, c in modules.items() if n.endswith("[native]") and "vector_add" in c["message"]
    ]
    assert native, (modules, said)
    assert native[0]["state"] == "passed", native
    assert f"{target()}a" in native[0]["message"], native  # tileiras writes sm_XXa cubins
    assert list((evidence / "loaded/runtime-modules").iterdir())


def _logging_tileiras(folder: Path, tileiras: str) -> tuple[Path, Path]:
    """A ``tileiras`` that writes each command line it is given to a log, then runs the
    real one: the folder to put first on PATH, and the log."""
    bin_dir, log = folder / "bin", folder / "tileiras.log"
    bin_dir.mkdir()
    wrapper = bin_dir / "tileiras"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{tileiras}" "$@"\n')
    wrapper.chmod(0o755)
    return bin_dir, log


def _compiles(log: Path) -> list[str]:
    """The kernel compiles a tileiras log holds (not cuda-tile's probes: an empty module
    per bytecode version, and ``--version``)."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if "vector_add" in line]


def test_a_cubin_in_the_users_tile_cache_does_not_stand_in_for_this_runs_compile(
    tmp_path: Path,
) -> None:
    """cuda-tile 1.7 answers a launch from its disk cache, without compiling, when the
    cache holds a cubin of the same bytecode, options, target and tileiras version (it
    still runs tileiras to learn that version: a program whose tileiras is gone fails even
    with a warm cache, seen on the device). The gate's runs must compile anew: with the
    user's cache warm, a run outside the gate compiles nothing, a gate run compiles the
    kernel again, and the user's cache is left as it was."""
    python = interpreter("GATE_TEST_TILE_PYTHON", "cuda.tile, torch")
    tileiras = _tileiras()
    (tmp_path / "vadd.py").write_text(PROGRAM, encoding="utf-8")
    bin_dir, log = _logging_tileiras(tmp_path, tileiras)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    warm = tmp_path / "warm"
    user = {"CUDA_TILE_CACHE_DIR": str(warm), "PATH": path, **_toolkit(tileiras)}
    env = {**os.environ, **user}
    _passes_alone(python, tmp_path, env)
    assert len(_compiles(log)) == 1, log.read_text()  # the first run compiled and cached it
    cached = sorted(p.relative_to(warm) for p in warm.rglob("*"))
    assert cached, "cuTile cached nothing"
    _passes_alone(python, tmp_path, env)
    assert len(_compiles(log)) == 1, log.read_text()  # answered from the warm cache
    log.unlink()
    done, result, _ = gate(tmp_path, _config(python), user)
    said = done.stdout + done.stderr
    print(said)
    runs = checks(result, "cutile [")
    assert runs["cutile [native]"]["state"] == "passed", said
    compiled = _compiles(log)
    print(compiled)
    # The native run compiled it (forced JIT fails in torch before the launch: 209).
    assert compiled, said
    assert sorted(p.relative_to(warm) for p in warm.rglob("*")) == cached
