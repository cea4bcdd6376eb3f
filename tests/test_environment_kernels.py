"""A distribution's verdict counted per kernel, on a library real nvcc 13.0 builds (issue 42,
item 3).

The library of the issue: three kernels in one ``.so``, ``a1`` with sm_90 SASS only, ``b1``
and ``c1`` with sm_80 SASS only, no PTX. On 9.0 the per-file verdict says "no code for 2
of 3 kernels (b1, c1)"; the distribution's line, which said "native: exact SASS (sm_90)"
and counted nothing that cannot run, now says the same count and reads "partly".
``--require-device`` judges it as it judges the file alone: something in it runs on 9.0,
so it passes (a vendor library picks its kernels per device); ``--strict`` fails it,
naming b1 and c1. The wheel alone and the environment holding it exit alike. Read without
names each line says it was judged by target only, and how to get the per-kernel answer.
Installed in a virtual environment's folder (dist-info, RECORD) and packed as a wheel;
``inspect`` run as a process, as a user runs it.
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
from gate.errors import ExitCode

pytestmark = pytest.mark.integration

A = "__global__ void a1(float *x) { x[threadIdx.x] += 1.0f; }\n"
BC = (
    "__global__ void b1(float *x) { x[threadIdx.x] *= 2.0f; }\n"
    "__global__ void c1(float *x) { x[threadIdx.x] -= 3.0f; }\n"
)
LINE_9_0 = "item3         1.0      9.0     partly: no code for 2 of 3 kernels (b1, c1); "
LINE_9_0 += "exact SASS (sm_90) for 1"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libitem3.so: a.cu for sm_90 only, bc.cu for sm_80 only, no PTX, linked into one."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nvcc not on PATH: the library is built with it")
        pytest.skip("nvcc not on PATH: the library is built with it")
    folder = tmp_path_factory.mktemp("item3")
    (folder / "a.cu").write_text(A)
    (folder / "bc.cu").write_text(BC)
    for source, arch in (("a", "90"), ("bc", "80")):
        proc.run_checked(
            [nvcc, "-c", "-Xcompiler", "-fPIC", "-gencode", f"arch=compute_{arch},code=sm_{arch}",
             f"{source}.cu", "-o", f"{source}.o"],
            what=f"nvcc {source}.cu", cwd=folder, timeout=600,
        )  # fmt: skip
    proc.run_checked(
        [nvcc, "-shared", "a.o", "bc.o", "-o", "libitem3.so"],
        what="nvcc -shared",
        cwd=folder,
        timeout=600,
    )
    return folder / "libitem3.so"


@pytest.fixture(scope="module")
def venv(library: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment's folder with item3 1.0 installed as pip lays it out."""
    root = tmp_path_factory.mktemp("env") / "venv"
    site = root / "lib" / "python3.12" / "site-packages"
    (site / "item3").mkdir(parents=True)
    shutil.copyfile(library, site / "item3" / "libitem3.so")
    info = site / "item3-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: item3\nVersion: 1.0\n")
    (info / "RECORD").write_text("item3/libitem3.so,,\nitem3-1.0.dist-info/METADATA,,\n")
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


@pytest.fixture(scope="module")
def wheel(library: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wheel") / "item3-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.write(library, "item3/libitem3.so")
        z.writestr("item3-1.0.dist-info/METADATA", "Name: item3\nVersion: 1.0\n")
    return path


def _inspect(*args: str) -> proc.Result:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "NVCC"))}
    env["COLUMNS"] = "100"
    argv = [sys.executable, "-m", "gate", "inspect", "--no-detect", "--no-cache", *args]
    return proc.run(argv, base_env=env, timeout=600)


def test_with_names_the_distribution_line_counts_the_kernels_with_no_code(venv: Path) -> None:
    result = _inspect("--device", "9.0", "--names", str(venv))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert LINE_9_0 in lines
    # The summary counts it under the route most of its kernels take; something in it
    # runs, so it is not one that cannot run.
    assert lines[-2:] == ["summary  nothing  cannot run", "9.0            1           0"]
    # The per-file verdict says the same count.
    per_file = _inspect("--device", "9.0", "--names", "--files", str(venv))
    assert "  device 9.0: no code for 2 of 3 kernels (b1, c1): " in per_file.stdout


def test_require_device_passes_it_partly_and_strict_fails_it_naming_the_kernels(
    venv: Path,
) -> None:
    # Something in it runs on 9.0: as the file alone, it passes, said partly.
    result = _inspect("--names", "--require-device", "9.0", str(venv))
    assert result.returncode == 0, result.stderr
    assert LINE_9_0 in result.stdout.splitlines()
    assert "cuda-gate: error:" not in result.stderr
    # Every kernel built for 9.0 needs code there with --strict.
    strict = _inspect("--strict", "--require-device", "9.0", str(venv))
    assert strict.returncode == ExitCode.NOT_ACCEPTED
    assert LINE_9_0 in strict.stdout.splitlines()
    assert (
        "cuda-gate: error: item3 1.0: does not run on 9.0: no code for 2 of 3 kernels "
        "(b1, c1) in item3/libitem3.so"
    ) in strict.stderr.splitlines()


@pytest.mark.parametrize(
    "flags",
    [
        ("--require-device", "9.0"),
        ("--names", "--require-device", "9.0"),
        ("--strict", "--require-device", "9.0"),
        ("--names", "--require-device", "12.1"),
        ("--require-device", "8.0"),
        ("--strict", "--require-device", "8.0"),
        ("--json", "--names", "--require-device", "9.0"),
        ("--json", "--strict", "--require-device", "9.0"),
    ],
)
def test_the_wheel_alone_and_the_environment_holding_it_exit_alike(
    venv: Path, wheel: Path, flags: tuple[str, ...]
) -> None:
    alone = _inspect(*flags, str(wheel))
    held = _inspect(*flags, str(venv))
    wheelhouse = _inspect(*flags, str(wheel.parent))
    assert alone.returncode == held.returncode == wheelhouse.returncode, (
        alone.stderr,
        held.stderr,
        wheelhouse.stderr,
    )
    assert alone.returncode in (0, ExitCode.NOT_ACCEPTED)


def test_without_names_the_line_says_it_was_judged_by_target_only(venv: Path) -> None:
    result = _inspect("--device", "9.0", "--device", "12.1", str(venv))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # Said on every row it holds for: a device's row read alone says it too.
    assert (
        "item3         1.0      9.0     native: exact SASS (sm_90); "
        "by target only (--names: per kernel)"
    ) in lines
    (row,) = [line for line in lines if line.startswith(f"{'':23}12.1    ")]
    assert row.startswith(f"{'':23}12.1    nothing for this device (has SASS ")
    assert row.endswith("; by target only (--names: per kernel)")
    # By target something runs on 9.0: it passes, as before.
    assert _inspect("--require-device", "9.0", str(venv)).returncode == 0


def test_each_device_gets_its_own_shares(venv: Path) -> None:
    result = _inspect("--device", "8.0", "--device", "12.1", "--names", str(venv))
    lines = result.stdout.splitlines()
    assert (
        "item3         1.0      8.0     partly: exact SASS (sm_80) for 2 of 3 kernels; "
        "no code for 1 (a1)"
    ) in lines
    assert f"{'':23}12.1    does not run: no code for 3 of 3 kernels (a1, b1, c1)" in lines


def test_the_json_document_carries_the_shares(venv: Path) -> None:
    result = _inspect("--json", "--device", "9.0", "--names", str(venv))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    schema = resources.files("gate").joinpath("schemas/environment.schema.json").read_text()
    jsonschema.validate(doc, json.loads(schema))
    (dist,) = doc["distributions"]
    (device,) = dist["devices"]
    # Partly: it passes (something runs), counted under the route most kernels take.
    assert (device["per_kernel"], device["passes"], device["category"]) == (
        True,
        True,
        "nothing",
    )
    assert device["verdict"] == LINE_9_0.split("9.0     ")[1]
    kernels = device["kernels"]
    assert (kernels["total"], kernels["reach"]) == (3, "partly")
    assert [(s["route"]["route"], s["kernels"], s["usable"], s["kernel_names"])
            for s in kernels["shares"]] == [
        ("nothing", 2, False, ["_Z2b1Pf", "_Z2c1Pf"]),
        ("exact SASS (sm_90)", 1, True, None),
    ]  # fmt: skip
    headers = json.loads(_inspect("--json", "--device", "9.0", str(venv)).stdout)
    jsonschema.validate(headers, json.loads(schema))
    (device,) = headers["distributions"][0]["devices"]
    assert (device["per_kernel"], device["kernels"], device["passes"]) == (False, None, True)
    # The verdict says it was judged by target only, as the console's line does.
    assert device["verdict"] == "native: exact SASS (sm_90); by target only (--names: per kernel)"


def test_a_wheel_gets_the_same_distribution_line(wheel: Path) -> None:
    result = _inspect("--device", "9.0", "--names", str(wheel))
    assert LINE_9_0 in result.stdout.splitlines()
