#!/usr/bin/env bash
# Run the gate (the smoke program, then the example projects) and the gpu test tier on an
# offline GPU machine, from a wheelhouse in .whl/ (fill it with ../shared/tools/device-wheelhouse,
# or `pip download` on a networked machine; the examples also need cmake, and torch for the
# torch example, on PATH). Everything it produces lands in $OUT (default ./device-out):
# machine.txt, gate.log, example.log, torch.log, gpu-tier.log and the evidence folders as .tgz.
# Exit status: non-zero when a gate run or the tests failed.
set -uo pipefail
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
root=$(pwd)
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$root/.whl PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
{ nvidia-smi -L; uname -m; nvcc --version | tail -2; command -v cuobjdump cmake; } > "$out/machine.txt" 2>&1

# The project's interpreter ({python}: the one with torch) is the python3 found before nox's
# own virtual environment goes first on PATH.
export CUDA_GATE_PYTHON=${CUDA_GATE_PYTHON:-$(command -v python3)}
# The tests run without the user's CUDA_GATE_* settings; they take the torch interpreter from here.
export GATE_TEST_TORCH_PYTHON=$CUDA_GATE_PYTHON
python3 -m venv /tmp/cg-nox && /tmp/cg-nox/bin/pip install -q nox || exit 3
export PATH="/tmp/cg-nox/bin:$PATH"
nox -s gate 2>&1 | tee "$out/gate.log"
gate_rc=${PIPESTATUS[0]}
echo "nox -s gate exit status: $gate_rc" | tee -a "$out/gate.log"
tar czf "$out/gate-evidence.tgz" gate-evidence 2>/dev/null
nox -s gate -- --config examples/dlopen-kernels/cuda-gate.toml --evidence example-evidence \
  2>&1 | tee "$out/example.log"
example_rc=${PIPESTATUS[0]}
echo "example exit status: $example_rc" | tee -a "$out/example.log"
tar czf "$out/example-evidence.tgz" example-evidence 2>/dev/null

# The test extra, less what the wheelhouse leaves out (the GPU machine has its own cuobjdump
# and nvdisasm; the S3 tests need no GPU and run in CI).
source ci/device-install.sh
/tmp/cg-test/bin/python -m pytest -p no:cacheprovider -v -rs "$@" 2>&1 | tee "$out/gpu-tier.log"
test_rc=${PIPESTATUS[0]}
echo "gate=$gate_rc example=$example_rc tests=$test_rc" | tee -a "$out/gpu-tier.log"
[ "$gate_rc" -eq 0 ] && [ "$example_rc" -eq 0 ] && [ "$test_rc" -eq 0 ]
