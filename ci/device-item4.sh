#!/usr/bin/env bash
# On the GPU machine, one call (about 550 s): issue 40's item 4 at this revision, then the gpu
# tier for the time left. In order, each writing to $OUT as it goes (a call cut short still
# brings back what was done):
#   0. disk-probe.log: benchmarks/disk_probe.py on cuBLASLt's .nv_fatbin (the disk's queue
#      settings, and how fast each way of asking brings the section in, cold; about 10 s);
#   1. forked-check.log: benchmarks/forked_check.py on cuBLASLt, cuBLAS, cuDNN's precompiled
#      engines and libtorch_cuda (forked decoders read what threads read, none left behind);
#   2. timeline.log: benchmarks/timeline.py on cuBLAS and cuBLASLt, warm twice and cold once;
#   3. RESULTS.md, bench.log: bench_inspect.py --cold --names-only --runs 3 on cuBLASLt,
#      cuBLAS and cuDNN (TORCH=1: libtorch_cuda too, about 60 s more), with a --variant for
#      each folder under .work/variants/ (another revision's gate, carried:
#      `git archive REV gate | tar -x -C .work/variants/NAME`);
#   4. gpu-tier.log: the gpu tier, -v, for the time left of CALL_S seconds from the start
#      (default 570, under a call's 600; TIER=0 skips it, as does less than a minute left).
# Needs .whl/ (../shared/tools/device-wheelhouse); carry .whl and .work/variants.
set -uo pipefail
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
export CUDA_GATE_PYTHON=${CUDA_GATE_PYTHON:-$(command -v python3)}
export GATE_TEST_TORCH_PYTHON=$CUDA_GATE_PYTHON MAX_JOBS=${MAX_JOBS:-16}
source ci/device-install.sh
py=/tmp/cg-test/bin/python
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  cuobjdump --version | tail -1; git rev-parse --short HEAD 2>/dev/null; } > "$out/machine.txt" 2>&1
site=$("$CUDA_GATE_PYTHON" -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))')
lib=$site/nvidia/cu13/lib
lt=$lib/libcublasLt.so.13 blas=$lib/libcublas.so.13
cudnn=$site/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9
torch=$("$CUDA_GATE_PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))')/lib/libtorch_cuda.so
"$py" benchmarks/disk_probe.py "$lt" > "$out/disk-probe.log" 2>&1
echo "disk_probe exit status: $?" >> "$out/disk-probe.log"
"$py" benchmarks/forked_check.py "$lt" "$blas" "$cudnn" "$torch" > "$out/forked-check.log" 2>&1
echo "forked_check exit status: $?" >> "$out/forked-check.log"
for f in "$blas" "$lt"; do
  for run in warm warm cold; do
    [ "$run" = cold ] && { sync; echo 3 > /proc/sys/vm/drop_caches; }
    echo "== $run $(basename "$f")"
    # The marks go to stderr, the table to /dev/null.
    { T0=$(date +%s.%N) CUDA_GATE_CACHE_DIR=$(mktemp -d) "$py" benchmarks/timeline.py inspect \
      --no-detect --names --no-cache "$f" > /dev/null; } 2>&1
  done
done > "$out/timeline.log" 2>&1
variants=()
for v in .work/variants/*/; do
  [ -f "$v/gate/cli.py" ] && variants+=(--variant "$(basename "$v")=$v")
done
libs=("$lt" "$blas" "$cudnn")
[ -n "${TORCH:-}" ] && libs+=("$torch")
cp benchmarks/RESULTS.md "$out/RESULTS.md"
"$py" benchmarks/bench_inspect.py --cold --names-only --runs 3 --output "$out/RESULTS.md" \
  "${variants[@]}" "${libs[@]}" > "$out/bench.log" 2>&1
echo "bench exit status: $?" >> "$out/bench.log"
left=$(( ${CALL_S:-570} - SECONDS ))
if [ "${TIER:-1}" = 0 ] || (( left < 60 )); then
  echo "gpu tier not run: TIER=${TIER:-1}, ${left} s left of CALL_S=${CALL_S:-570}" > "$out/gpu-tier.log"
  exit 0
fi
timeout "$left" "$py" -m pytest -p no:cacheprovider -v -rA -m gpu --durations=8 \
  > "$out/gpu-tier.log" 2>&1
echo "gpu tier exit status: $? (given ${left} s)" >> "$out/gpu-tier.log"
