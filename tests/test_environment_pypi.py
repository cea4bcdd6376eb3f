"""The environment audit on real CUDA distributions from PyPI, and on nvcc-built GPU folders.

The acceptance case: a virtual environment holding one distribution that runs natively
on 12.1 (nvidia-cuda-cupti 13.0.85: sm_121 SASS), one that cannot run there
(nvidia-cuda-cupti-cu12 12.1.105: SASS up to sm_90, no PTX) and one with builds chosen
by the CUDA runtime (bitsandbytes 0.50.2: _cuda118 ... _cuda132). About 68 MB of wheels,
downloaded with pip once into $GATE_TEST_WHEELS (default .work/wheels in the checkout,
ignored by git) and kept there between runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from gate import proc
from gate.errors import ExitCode, ToolError
from tests.pypi_wheels import SMALL, fetch, folder

pytestmark = pytest.mark.integration


def _unavailable(why: str) -> None:
    """Skip with the reason; under CI a missing input is a failure, not a skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="session")
def wheels() -> list[Path]:
    """The three wheels, from the cache or downloaded into it."""
    found = []
    for wheel in SMALL:
        try:
            found.append(fetch(wheel, folder()))
        except ToolError as e:
            _unavailable(f"cannot download {wheel.requirement}: {e.one_line()}")
    return found


@pytest.fixture(scope="session")
def venv(wheels: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real virtual environment with the three installed by pip (dist-info, RECORD)."""
    root = tmp_path_factory.mktemp("cuda-env") / "venv"
    proc.run_checked([sys.executable, "-m", "venv", str(root)], what="python -m venv", timeout=300)
    proc.run_checked(
        [root / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--disable-pip-version-check", *map(str, wheels)],
        what="pip install", timeout=600,
    )  # fmt: skip
    return root


def _inspect(*args: str) -> proc.Result:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "NVCC"))}
    argv = [sys.executable, "-m", "gate", "inspect", "--no-detect", *args]
    return proc.run(argv, base_env=env, timeout=600)


def _rows(out: str, names: list[str]) -> dict[str, str]:
    return {line.split()[0]: line for line in out.splitlines() if line and line.split()[0] in names}


NAMES = ["bitsandbytes", "nvidia-cuda-cupti", "nvidia-cuda-cupti-cu12"]


def test_one_verdict_line_per_distribution_and_a_summary(venv: Path) -> None:
    result = _inspect("--device", "12.1", str(venv))
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout, NAMES)
    # Read without kernel names: each line says it was judged by target only.
    by_target = "; by target only (--names: per kernel)"
    assert rows["nvidia-cuda-cupti"].endswith(
        "13.0.85   12.1    native: exact SASS (sm_121)" + by_target
    )
    assert (
        "12.1.105  12.1    nothing for this device (has SASS sm_50..sm_90 (11))"
        in (rows["nvidia-cuda-cupti-cu12"])
    )
    assert rows["bitsandbytes"].endswith(
        "compatible SASS (sm_120) with CUDA runtime 12.8, 13.0, 13.2" + by_target
    )
    lines = result.stdout.splitlines()
    assert sum(1 for line in lines if line.split() and line.split()[0] in NAMES) == 3
    # pip (and the interpreter's folder) carry no device code: said, in one line.
    assert any(line.startswith("no device code (") and "pip " in line for line in lines)
    summary = lines.index(next(line for line in lines if line.startswith("summary")))
    assert lines[summary].split() == ["summary", "native", "compatible", "SASS", "nothing",
                                      "no", "device", "code", "cannot", "run"]  # fmt: skip
    assert lines[summary + 1].split()[:4] == ["12.1", "1", "1", "1"]
    assert len(lines) < 20


def test_require_device_fails_exactly_the_distribution_that_cannot_run(venv: Path) -> None:
    result = _inspect("--require-device", "12.1", str(venv))
    assert result.returncode == ExitCode.NOT_ACCEPTED
    failing = [line for line in result.stderr.splitlines() if "does not run on 12.1" in line]
    assert len(failing) == 1
    assert failing[0].startswith("cuda-gate: error: nvidia-cuda-cupti-cu12 12.1.105: ")
    # With a CUDA 12.4 runtime bitsandbytes loads its _cuda124 build: sm_90 at most.
    result = _inspect("--require-device", "12.1", "--cuda-runtime", "12.4", str(venv))
    assert result.returncode == ExitCode.NOT_ACCEPTED
    assert "bitsandbytes 0.50.2: does not run on 12.1" in result.stderr
    assert "      12.1 (CUDA runtime 12.4 loads cuda124): " in result.stdout
    # 9.0 runs everything, each library natively.
    assert _inspect("--require-device", "9.0", str(venv)).returncode == 0


def test_the_wheels_folder_and_the_json_document_agree(wheels: list[Path]) -> None:
    result = _inspect("--json", "--device", "12.1", str(wheels[0].parent))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    schema = resources.files("gate").joinpath("schemas/environment.schema.json").read_text()
    jsonschema.validate(doc, json.loads(schema))
    by = {d["name"]: d for d in doc["distributions"]}
    assert {n: by[n]["devices"][0]["category"] for n in NAMES} == {
        "bitsandbytes": "compatible SASS",
        "nvidia-cuda-cupti": "native",
        "nvidia-cuda-cupti-cu12": "nothing",
    }
    (part,) = by["bitsandbytes"]["devices"][0]["parts"]
    assert part["chosen"] == ["cuda128", "cuda130", "cuda132"]
    assert by["nvidia-cuda-cupti"]["groups"][0]["count"] == 2  # two identical libraries


SOURCE = "__global__ void op(int *p) { *p = 1; }\n"


@pytest.fixture(scope="session")
def gpu_folders_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An sgl-kernel-like wheel: one extension built per GPU folder by nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        _unavailable("nvcc not on PATH: the GPU-folder wheel is built with it")
        raise AssertionError  # unreachable: _unavailable raises
    folder = tmp_path_factory.mktemp("gpu-folders")
    (folder / "k.cu").write_text(SOURCE)
    builds = {
        "sm90": ["-gencode", "arch=compute_90a,code=sm_90a"],
        "sm100": ["-gencode", "arch=compute_100a,code=sm_100a",
                  "-gencode", "arch=compute_120,code=sm_120"],
    }  # fmt: skip
    wheel = folder / "kern-0.3-cp39-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, args in builds.items():
            out = folder / f"{name}.so"
            proc.run_checked(
                [nvcc, "-shared", "-Xcompiler", "-fPIC", *args, "k.cu", "-o", str(out)],
                what=f"nvcc ({name})", cwd=folder, timeout=600,
            )  # fmt: skip
            z.write(out, f"kern/{name}/common_ops.so")
        z.writestr("kern-0.3.dist-info/METADATA", "Name: kern\nVersion: 0.3\n")
    return wheel


def test_builds_per_gpu_folder_are_alternatives(gpu_folders_wheel: Path) -> None:
    result = _inspect("--by-distribution", "--require-device", "12.1", "--device", "9.0",
                      str(gpu_folders_wheel))  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = result.stdout.splitlines()
    assert (
        "kern          0.3      9.0     native: exact SASS (sm_90a) with sm90/; "
        "by target only (--names: per kernel)"
    ) in rows
    assert (
        f"{'':23}12.1    compatible SASS (sm_120) with sm100/; by target only (--names: per kernel)"
    ) in rows
    assert "      12.1: compatible SASS (sm_120): sm100; only for other devices: sm90" in rows
    assert (
        "    alternatives loaded by GPU: the package picks one build per device: "
        "kern/sm*/common_ops.so" in rows
    )
