#!/usr/bin/env bash
# On the GPU machine, one call: the gate's overhead on the torch example (1 cold +
# OVERHEAD_RUNS-1 warm runs), then a py-spy profile of one more warm run (all threads, idle
# included; raw collapsed stacks) to find where the warm overhead goes. Output in $OUT:
# overhead.log, overhead.json, warm.folded, warm-result.json. Needs .whl/ with py-spy.
set -uo pipefail
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
export CUDA_GATE_PYTHON=${CUDA_GATE_PYTHON:-$(command -v python3)}
export MAX_JOBS=${MAX_JOBS:-16}
source ci/device-install.sh
py=/tmp/cg-test/bin/python
/tmp/cg-test/bin/pip install -q py-spy || exit 3
config=examples/torch-extension/cuda-gate.toml
"$py" benchmarks/overhead.py --config "$config" --runs "${OVERHEAD_RUNS:-4}" \
  --json "$out/overhead.json" > "$out/overhead.log" 2>&1
echo "overhead exit status: $?" >> "$out/overhead.log"
cache=$(mktemp -d) ev=$(mktemp -d)
CUDA_GATE_CACHE_DIR=$cache "$py" -m gate run --config "$config" --no-store --evidence "$ev/a" --quiet
CUDA_GATE_CACHE_DIR=$cache /tmp/cg-test/bin/py-spy record --idle --threads --rate 250 --format raw \
  -o "$out/warm.folded" -- "$py" -m gate run --config "$config" --no-store \
  --evidence "$ev/b" --quiet > "$out/pyspy.log" 2>&1
echo "py-spy exit status: $?" >> "$out/pyspy.log"
cp "$ev/b/result.json" "$out/warm-result.json"
ls -la "$ev/b" >> "$out/pyspy.log"
du -a "$ev/b" | sort -n | tail -15 >> "$out/pyspy.log"
