#!/usr/bin/env bash
# On the GPU machine: the launch recorder's gpu tests alone (tests/test_gpu_launches.py), quickly.
# Installs the project with its test extra from .whl (nvidia-cuda-cupti among them, for the
# toolkit there may lack extras/CUPTI), says which CUPTI the recorder builds against, then runs
# the tests. Output in $OUT: launch-tests.log, cupti.txt.
set -uo pipefail
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
# CuPy and torch are in the machine's own python3; the tests run the gate from the venv.
export GATE_TEST_CUPY_PYTHON=${GATE_TEST_CUPY_PYTHON:-$(command -v python3)}
export GATE_TEST_TORCH_PYTHON=${GATE_TEST_TORCH_PYTHON:-$(command -v python3)}
py=/tmp/cg-test/bin/python
source ci/device-install.sh
/tmp/cg-test/bin/pip install -q 'nvidia-cuda-cupti~=13.0.0' || exit 3
"$py" - <<'PY' | tee "$out/cupti.txt"
from gate.launch import recorder
print("toolkit or wheel CUPTI:", recorder.find_cupti("nvcc"))
PY
ls -d "$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"/extras/CUPTI 2>&1 | tee -a "$out/cupti.txt"
"$py" -m pytest -p no:cacheprovider -rA -m gpu ${LAUNCH_TESTS:-tests/test_gpu_launches.py} \
  2>&1 | tee "$out/launch-tests.log" | tail -40
exit "${PIPESTATUS[0]}"
