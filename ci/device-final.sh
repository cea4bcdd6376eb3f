#!/usr/bin/env bash
# On the GPU machine, one call: the whole gpu tier (torch tests included), then the gate's
# overhead on the torch example (1 cold + OVERHEAD_RUNS-1 warm runs). Output in $OUT:
# gpu-tier.log, overhead.log, overhead.json. Needs .whl/ (../shared/tools/device-wheelhouse).
# PROFILE=1 runs the overhead runs under cProfile (profile/ in $OUT; the figures are then
# inflated); SKIP_TIER=1 leaves the gpu tier out, SKIP_OVERHEAD=1 the benchmark; TESTS names
# test files for the tier (default: all of them). Make the carry first, on a networked machine:
# bash ci/device-carry.sh prints it (the wheelhouse and the cuTile inputs the tier loads).
set -uo pipefail
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
export CUDA_GATE_PYTHON=${CUDA_GATE_PYTHON:-$(command -v python3)}
export GATE_TEST_TORCH_PYTHON=$CUDA_GATE_PYTHON MAX_JOBS=${MAX_JOBS:-16}
source ci/device-install.sh
py=/tmp/cg-test/bin/python
if [ -z "${SKIP_TIER:-}" ]; then
  # The cuTile inputs come from PyPI, which this machine cannot reach: without them three
  # tests fail on a pip download after the rest of the tier's eight minutes.
  if [[ -z "${TESTS:-}" || "${TESTS:-}" == *tileir* ]] \
    && { ! tile=$("$py" -c 'from tests.tileir_inputs import built; print(built())') \
      || [ ! -f "$tile/done" ]; }; then
    echo "device-final: the cuTile inputs ${tile:-} were not carried: run" \
      "bash ci/device-carry.sh on a networked machine and carry what it prints" \
      | tee "$out/gpu-tier.log" >&2
    exit 2
  fi
  # shellcheck disable=SC2086
  "$py" -m pytest -p no:cacheprovider -rA -m gpu --durations=8 ${TESTS:-} > "$out/gpu-tier.log" 2>&1
  echo "gpu tier exit status: $?" >> "$out/gpu-tier.log"
fi
[ -n "${SKIP_OVERHEAD:-}" ] && exit 0
profile=()
[ -n "${PROFILE:-}" ] && profile=(--profile "$out/profile")
"$py" benchmarks/overhead.py --config examples/torch-extension/cuda-gate.toml \
  --runs "${OVERHEAD_RUNS:-2}" --json "$out/overhead.json" "${profile[@]}" > "$out/overhead.log" 2>&1
echo "overhead exit status: $?" >> "$out/overhead.log"
