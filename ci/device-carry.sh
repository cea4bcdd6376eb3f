#!/usr/bin/env bash
# On a networked machine, before a device call: make what an offline GPU machine must be
# carried for the ci/device-*.sh scripts, and print the carry list and the call's size.
#   1. .whl/: the wheelhouse (WHEELHOUSE, default ../shared/tools/device-wheelhouse, fills it
#      when it holds no wheel), less what the device never installs: NVIDIA's toolkit wheels
#      (the machine has its own toolkit), the lock tests' uv and nox's virtualenv (left out
#      by ci/device-install.sh), and the mutation session's mutmut with its terminal
#      libraries. A device call carries at most 64 MiB in all: unpruned, the wheelhouse
#      alone is about 176 MB.
#   2. the cuTile inputs tests/test_gpu_tileir.py loads (tests/tileir_inputs.py: built from
#      PyPI's wheels, which the device cannot download; about 120 kB).
# Then: carry what the last line names (JSON, for the call's carry).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
python=${PYTHON:-python3}
limit=$((64 << 20))
if ! compgen -G '.whl/*.whl' > /dev/null; then
  wheelhouse=${WHEELHOUSE:-../shared/tools/device-wheelhouse}
  [ -x "$wheelhouse" ] || {
    echo "device-carry: .whl/ holds no wheel and $wheelhouse is missing: fill .whl/ with" \
      "'pip download' of the project's dependencies for the device's Python (3.12)" >&2
    exit 2
  }
  log=$(mktemp)
  "$wheelhouse" > "$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; exit 3; }
  rm -f "$log"
fi
pruned=0
for pattern in nvidia_nvvm nvidia_cuda_nvcc nvidia_cuda_cccl nvidia_cuda_runtime nvidia_cuda_crt \
  uv virtualenv libcst mutmut textual rich markdown_it_py mdit_py_plugins linkify_it_py mdurl \
  setproctitle; do
  for wheel in .whl/"$pattern"-*.whl; do
    [ -e "$wheel" ] || continue
    rm -f -- "$wheel"
    pruned=$((pruned + 1))
  done
done
# One line, not a traceback, when a wheel cannot be downloaded or the build fails.
tile=$("$python" -c '
import sys
from gate.errors import ToolError
from tests.tileir_inputs import inputs
try:
    print(inputs())
except ToolError as e:
    sys.exit(f"device-carry: the cuTile inputs: {e.one_line()}")
')
tile=${tile#"$PWD/"}
carry=(.whl "$tile")
# What a call takes: the working tree as git sees it (tracked, and untracked not ignored),
# plus the carried paths.
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2> /dev/null | tail -1 | cut -f1)
carried=$(du -cb "${carry[@]}" | tail -1 | cut -f1)
total=$((tree + carried))
echo "device-carry: $(find .whl -name '*.whl' | wc -l) wheels ($pruned pruned), $tile;" \
  "tree $((tree >> 20)) MiB + carried $((carried >> 20)) MiB = $((total >> 20)) MiB of 64"
if ((total > limit)); then
  echo "device-carry: over the 64 MiB a device call may carry" >&2
  exit 1
fi
printf '["%s", "%s"]\n' "${carry[@]}"
