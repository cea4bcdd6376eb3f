#!/usr/bin/env bash
# Run `nox -s gate` and the gpu test tier on an offline GPU machine, from a wheelhouse in .whl/
# (fill it with ../shared/tools/device-wheelhouse, or `pip download` on a networked machine).
# Everything it produces lands in $OUT (default ./device-out): gate.log, gpu-tier.log,
# gate-evidence.tgz. Exit status: non-zero when the gate or the gpu tier failed.
set -uo pipefail
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
root=$(pwd)
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$root/.whl PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
{ nvidia-smi -L; uname -m; nvcc --version | tail -2; command -v cuobjdump; } > "$out/machine.txt" 2>&1

python3 -m venv /tmp/cg-nox && /tmp/cg-nox/bin/pip install -q nox || exit 3
/tmp/cg-nox/bin/nox -s gate 2>&1 | tee "$out/gate.log"
gate_rc=${PIPESTATUS[0]}
echo "nox -s gate exit status: $gate_rc" | tee -a "$out/gate.log"
tar czf "$out/gate-evidence.tgz" gate-evidence 2>/dev/null

python3 -m venv /tmp/cg-test && /tmp/cg-test/bin/pip install -q ".[test]" 2>/dev/null \
  || /tmp/cg-test/bin/pip install -q . pytest hypothesis || exit 3
/tmp/cg-test/bin/python -m pytest -p no:cacheprovider -v -rs "${@:-tests/test_gpu.py}" \
  2>&1 | tee "$out/gpu-tier.log"
test_rc=${PIPESTATUS[0]}
echo "gate=$gate_rc tests=$test_rc" | tee -a "$out/gpu-tier.log"
[ "$gate_rc" -eq 0 ] && [ "$test_rc" -eq 0 ]
