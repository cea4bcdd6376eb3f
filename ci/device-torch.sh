#!/usr/bin/env bash
# On the GPU machine, after ci/device-check.sh left /tmp/cg-test (or from a fresh one): gate the
# torch example, benchmark names mode on libtorch_cuda.so, measure the gate's overhead on the
# example, then run the torch tests of the gpu tier. Output in $OUT: torch.log,
# RESULTS-torch.md, overhead.log/json, torch-tests.log.
set -uo pipefail
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
export CUDA_GATE_PYTHON=${CUDA_GATE_PYTHON:-$(command -v python3)}
# The tests run without the user's CUDA_GATE_* settings; they take the torch interpreter from here.
export GATE_TEST_TORCH_PYTHON=$CUDA_GATE_PYTHON
py=/tmp/cg-test/bin/python
source ci/device-install.sh
"$py" -m gate run --config examples/torch-extension/cuda-gate.toml --evidence torch-ev --no-store \
  2>&1 | tee "$out/torch.log"
echo "torch example exit status: ${PIPESTATUS[0]}" | tee -a "$out/torch.log"
lib=$("$CUDA_GATE_PYTHON" -c 'import torch, pathlib; print(pathlib.Path(torch.__file__).parent / "lib")')
"$py" benchmarks/bench_inspect.py --runs "${RUNS:-3}" --output "$out/RESULTS-torch.md" "$lib/libtorch_cuda.so" \
  2>&1 | tail -25
# The gate's own overhead on the example: one cold and (OVERHEAD_RUNS - 1) warm runs.
"$py" benchmarks/overhead.py --config examples/torch-extension/cuda-gate.toml \
  --runs "${OVERHEAD_RUNS:-3}" --json "$out/overhead.json" 2>&1 | tee "$out/overhead.log"
"$py" -m pytest -p no:cacheprovider -rA -m gpu tests/test_torch_example.py tests/test_gpu_torch.py \
  2>&1 | tee "$out/torch-tests.log" | tail -25
