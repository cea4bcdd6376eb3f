"""GPU tier: a trap stub for the device in front kills the run, and the diagnosis names it.

On the H200 (9.0): a kernel guarded ``#if __CUDA_ARCH__ == 800 ... #else trap`` built
for sm_90 (and compute_90, whose JIT keeps the same guard) passes every listing check,
fails the inspect stage's trap-stub check, and dies at launch ("unspecified launch
failure" or "an illegal instruction was encountered"); the diagnosis names the kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.decision_builds import nvcc

pytestmark = pytest.mark.gpu

SOURCE = r"""
#include <cstdio>
__global__ void only_for_ampere(float *x) {
#if __CUDA_ARCH__ == 800
  x[threadIdx.x] *= 2.0f;
#else
  __trap();
#endif
}
int main() {
  float *x;
  cudaMalloc(&x, 32 * sizeof(float));
  only_for_ampere<<<1, 32>>>(x);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e)); return 1; }
  puts("ok");
  return 0;
}
"""
CONFIG = """smoke = false
[[artifact]]
path = "app"
[[entry_point]]
name = "app"
command = ["./app"]
"""


def test_a_trap_stub_for_this_device_fails_and_the_diagnosis_names_the_kernel(
    tmp_path: Path,
) -> None:
    project = tmp_path / "trap"
    project.mkdir()
    (project / "k.cu").write_text(SOURCE, encoding="utf-8")
    subprocess.run(
        [nvcc(), "k.cu", "-o", "app", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"],
        cwd=project, check=True, capture_output=True,
    )  # fmt: skip
    (project / "cuda-gate.toml").write_text(CONFIG, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--no-store", "--evidence", "ev"],
        cwd=project, env=os.environ.copy(), capture_output=True, text=True, timeout=900,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads((project / "ev" / "result.json").read_text(encoding="utf-8"))
    checks = {c["name"]: c for c in result["checks"]}
    stub = checks["app: no kernel is a trap stub or empty"]
    assert stub["state"] == "failed"
    assert (
        "only_for_ampere(float*): trap stub in sm_90 SASS, present but traps on 9.0"
        in (stub["message"])
    )
    assert result["verdict"]["cause"] == "trap-stub"
    native = next(e for e in result["executions"] if e["path"] == "native")
    assert native["failure"] in (
        "unspecified launch failure",
        "an illegal instruction was encountered",
    )
    (said,) = result["diagnoses"]
    diagnosis = said["text"]
    # The stub's clause names its listing entry and the kernel it holds (result.json 8).
    (stub,) = [c for c in said["clauses"] if c["kernel"] is not None]
    entry = stub["source"].split("/")
    assert (
        stub["kernel"]
        in result["artifacts"][int(entry[2])]["listing"]["entries"][int(entry[5])]["kernels"]
    )
    assert "trap stubs 9.0 runs (an architecture guard that excludes it): " in diagnosis
    assert "only_for_ampere(float*) in app (sm_90 SASS)" in diagnosis
