"""The gpu tier of the launch recorder: what the entry points really ran, on a real device.

* a program with two kernels launching one: coverage names the other, and
  ``require_launch`` fails for it and passes for the one that ran;
* a host-only program that loads a cubin file built only for another architecture is
  rejected with the file's origin and its targets in the headline;
* a CuPy RawKernel program: its NVRTC-compiled module is captured and inspected;
* the torch example: the extension's kernels launched under both paths.

CuPy and torch come from the interpreter in GATE_TEST_CUPY_PYTHON / GATE_TEST_TORCH_PYTHON
(default: python3 on PATH); skipped, with the reason, where it lacks them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent

KERNELS = r"""
#include <cstdio>
__global__ void used_kernel(int *p) { p[threadIdx.x] += 1; }
__global__ void unused_kernel(int *p) { p[threadIdx.x] *= 3; }
int main() {
  int *d = nullptr;
  if (cudaMalloc(&d, 32 * sizeof(int)) != cudaSuccess) return 2;
  cudaMemset(d, 0, 32 * sizeof(int));
  used_kernel<<<1, 32>>>(d);
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", e == cudaSuccess ? "PASS" : cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
"""

LOADER = r"""
#include <cuda.h>
#include <cstdio>
int main(int argc, char **argv) {
  CUdevice dev; CUcontext ctx; CUmodule mod; const char *name = nullptr;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
      cuCtxSetCurrent(ctx)) { printf("no device\n"); return 2; }
  CUresult r = cuModuleLoad(&mod, argv[1]);
  cuGetErrorName(r, &name);
  printf("cuModuleLoad(%s): %s\n", argv[1], name ? name : "?");
  return r == CUDA_SUCCESS ? 0 : 1;
}
"""

RAWKERNEL = r"""
import cupy
source = 'extern "C" __global__ void rtc_scale(float *x) { x[threadIdx.x] *= 2.0f; }'
kernel = cupy.RawKernel(source, "rtc_scale")
x = cupy.ones(32, dtype=cupy.float32)
kernel((1,), (32,), (x,))
assert float(x.sum()) == 64.0
print("PASS")
"""


def nvcc() -> str:
    found = shutil.which("nvcc")
    if found is None:
        pytest.fail("nvcc is needed on the GPU machine")
    return found


def target() -> str:
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return "sm_" + smi.stdout.split()[0].replace(".", "")


def build(folder: Path, name: str, source: str, *args: str) -> Path:
    (folder / f"{name}.cu").write_text(source, encoding="utf-8")
    out = folder / name
    subprocess.run([nvcc(), f"{name}.cu", "-o", name, *args], cwd=folder, check=True, timeout=300)
    return out


def gate(folder: Path, config: str, env: dict[str, str] | None = None) -> tuple[Any, Any, Path]:
    (folder / "cuda-gate.toml").write_text(config, encoding="utf-8")
    evidence = folder / "ev"
    shutil.rmtree(evidence, ignore_errors=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gate",
            "run",
            "--no-store",
            "--record-launches",  # the default; said so the test holds if that changes
            "--evidence",
            str(evidence),
            "--build-dir",
            str(folder / "gate-build"),
        ],
        cwd=folder,
        env={**os.environ, "XDG_CACHE_HOME": str(folder / "cache"), **(env or {})},
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    result = json.loads((evidence / "result.json").read_text(encoding="utf-8"))
    return done, result, evidence


def checks(result: Any, part: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result["checks"] if part in c["name"]}


def app_config(require: str) -> str:
    return f"""smoke = false
[[artifact]]
path = "app"
require_launch = {require}
[[entry_point]]
name = "app"
command = ["./app"]
expected_output = "PASS"
"""


def test_require_launch_fails_for_a_kernel_never_launched_and_passes_for_one_that_ran(
    tmp_path: Path,
) -> None:
    sm = target()
    arch = f"-gencode=arch=compute_{sm[3:]},code=[{sm},compute_{sm[3:]}]"
    build(tmp_path, "app", KERNELS, arch)
    done, result, evidence = gate(tmp_path, app_config('["unused_kernel"]'))
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    native = checks(result, "app: kernels launched [native]")["app: kernels launched [native]"]
    assert native["state"] == "failed", native
    assert "unused_kernel" in native["message"]
    assert "never launched" in native["message"]
    jit = checks(result, "app: kernels launched [jit]")["app: kernels launched [jit]"]
    assert jit["state"] == "failed"
    assert "unused_kernel" in result["verdict"]["statement"]
    coverage = (evidence / "launches/coverage.txt").read_text(encoding="utf-8")
    assert "1 of 2 kernels launched; never launched: unused_kernel(int*)" in coverage
    # Which code ran it: cudaLaunchKernel gives CUPTI no driver launch to ask about, so
    # the route is the loaded module's: the embedded SASS natively, the JIT's output when
    # PTX JIT is forced. Never unknown.
    native_part, jit_part = coverage.split("app [jit]:", 1)
    assert f"used_kernel(int*)  {sm} SASS" in native_part, coverage
    assert f"used_kernel(int*)  JIT-compiled ({sm}) from PTX" in jit_part, coverage
    assert "code the driver did not name" not in coverage, coverage
    # The runtime hands app's own fatbin to cuLibraryLoadData: app accounts for it.
    assert "runtime module" not in coverage, coverage
    assert "accounted for by app: fatbin " in coverage, coverage
    assert not checks(result, "runtime module ")

    done, result, _ = gate(tmp_path, app_config('["used_kernel"]'))
    assert done.returncode == 0, done.stdout + done.stderr
    assert result["verdict"]["accepted"] is True
    for path in ("native", "jit"):
        check = checks(result, f"app: kernels launched [{path}]")[f"app: kernels launched [{path}]"]
        assert check["state"] == "passed"
        assert check["message"].startswith("1 of 2 kernels launched")


def test_a_host_program_loading_a_cubin_for_another_arch_is_rejected_naming_the_file(
    tmp_path: Path,
) -> None:
    source = "__global__ void far_kernel(float *x) { x[0] = 1.0f; }\n"
    (tmp_path / "k.cu").write_text(source, encoding="utf-8")
    subprocess.run(
        [nvcc(), "-cubin", "-arch", "sm_80", "-o", "k80.cubin", "k.cu"],
        cwd=tmp_path,
        check=True,
        timeout=300,
    )
    build(tmp_path, "loader", LOADER, "-lcuda")
    config = """smoke = false
[[artifact]]
path = "loader"
[[entry_point]]
name = "loader"
command = ["./loader", "k80.cubin"]
"""
    done, result, evidence = gate(tmp_path, config)
    assert done.returncode == 1, done.stdout + done.stderr
    headline = result["verdict"]["statement"]
    assert "k80.cubin" in headline, headline
    assert "sm_80 SASS" in headline, headline
    assert "CUDA_ERROR_NO_BINARY_FOR_GPU" in headline, headline
    kept = list((evidence / "loaded/runtime-modules").glob("*.cubin"))
    assert len(kept) == 1
    assert kept[0].read_bytes() == (tmp_path / "k80.cubin").read_bytes()


def interpreter(variable: str, module: str) -> str:
    python = os.environ.get(variable) or shutil.which("python3") or sys.executable
    probe = subprocess.run(
        [python, "-c", f"import {module}"], capture_output=True, timeout=300, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"{python} cannot import {module} (set {variable})")
    return python


def test_a_cupy_rawkernel_module_is_captured_and_inspected(tmp_path: Path) -> None:
    python = interpreter("GATE_TEST_CUPY_PYTHON", "cupy")
    (tmp_path / "raw.py").write_text(RAWKERNEL, encoding="utf-8")
    config = f"""smoke = false
python = "{python}"
[[entry_point]]
name = "rawkernel"
command = ["{{python}}", "raw.py"]
expected_output = "PASS"
env = {{ CUPY_CACHE_DIR = "{tmp_path / "cupy-cache"}" }}
"""
    done, result, evidence = gate(tmp_path, config)
    said = done.stdout + done.stderr
    modules = checks(result, "runtime module ")
    assert modules, said
    mine = [c for c in modules.values() if "rtc_scale" in c["message"]]
    assert mine, modules
    assert mine[0]["state"] == "passed", mine
    sm = target()
    assert f"{sm} SASS" in mine[0]["message"] or f"compute_{sm[3:]} PTX" in mine[0]["message"]
    assert list((evidence / "loaded/runtime-modules").iterdir())
    assert "kernels it compiles at run time are invisible" not in said


def test_the_torch_example_reports_the_extensions_kernels_launched_on_both_paths(
    tmp_path: Path,
) -> None:
    python = interpreter("GATE_TEST_TORCH_PYTHON", "torch")
    project = tmp_path / "torch-extension"
    shutil.copytree(
        ROOT / "examples/torch-extension",
        project,
        ignore=shutil.ignore_patterns("build", "dist*", "*.egg-info"),
    )
    evidence = tmp_path / "ev"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gate",
            "run",
            "--no-store",
            "--record-launches",
            "--evidence",
            str(evidence),
            "--config",
            str(project / "cuda-gate.toml"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
        env={
            **os.environ,
            "CUDA_GATE_PYTHON": python,
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "PIP_CACHE_DIR": str(tmp_path / "cache/pip"),
        },
    )
    result = json.loads((evidence / "result.json").read_text(encoding="utf-8"))
    ours = {n: c for n, c in checks(result, "kernels launched").items() if n.startswith("_C.")}
    assert {n.rsplit("[", 1)[1] for n in ours} == {"native]", "jit]"}, done.stdout
    for check in ours.values():
        assert check["state"] == "passed", check
        assert int(check["message"].split(" ", 1)[0]) > 0, check["message"]
    coverage = (evidence / "launches/coverage.txt").read_text(encoding="utf-8")
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        assert f"check-{dtype}: " in coverage, coverage
    assert "code the driver did not name" not in coverage, coverage
    sm = target()
    assert (
        f"rms_norm_kernel<float>(float*, float const*, float const*, float, long)  {sm} SASS"
        in (coverage)
    ), coverage
    assert f"JIT-compiled ({sm}) from PTX" in coverage, coverage
    # The extension's fatbins are _C's own: accounted for, no runtime module of them.
    assert "accounted for by _C." in coverage, coverage
