#!/usr/bin/env bash
# On the GPU machine: the gate sealed while an entry point runs on the device (its
# /proc/PID/environ closed to an unprivileged process of the same uid, no secret in it),
# then SIGTERM during the execute stage: exit 143, the entry point's processes gone, the
# run recorded as interrupted. Needs the venv ci/device-final.sh makes (/tmp/cg-test).
# Output in $OUT/faults.log.
set -uo pipefail
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
py=/tmp/cg-test/bin/python
work=$(mktemp -d)
tag="300.$$"
cat > "$work/cuda-gate.toml" <<TOML
smoke = true
[[entry_point]]
name = "long"
command = ["sh", "-c", "setsid sleep $tag & sleep $tag; true"]
timeout = 600
TOML
key=$("$py" -c 'from gate.attest.signing import generate_key_pair as g; print(g().private_pem.decode())')
(
  cd "$work" && CUDA_GATE_SIGNING_KEY="$key" AWS_SECRET_ACCESS_KEY=device-walker-secret-0123456789 \
    exec "$py" -m gate run --no-store --evidence ev --config cuda-gate.toml
) > "$out/faults-gate.log" 2>&1 &
gate=$!
for _ in $(seq 600); do pgrep -f "sleep $tag" > /dev/null && break; sleep 0.2; done
{
  echo "entry point running: $(pgrep -fc "sleep $tag") processes"
  if setpriv --bounding-set=-all --inh-caps=-all -- cat /proc/$gate/environ > "$work/env" 2>"$work/err"; then
    echo "environ readable unprivileged: yes ($(tr '\0' '\n' < "$work/env" | grep -c -e CUDA_GATE_SIGNING_KEY -e AWS_SECRET) secret names)"
  else
    echo "environ readable unprivileged: no ($(cat "$work/err"))"
  fi
  kill -TERM $gate
  wait $gate
  echo "gate exit status: $?"
  sleep 1
  echo "entry point processes left: $(pgrep -fc "sleep $tag")"
  "$py" -c "import json,sys; r=json.load(open('$work/ev/result.json')); print('execute stage:', [(s['status'], s['detail']) for s in r['stages'] if s['name']=='execute'])"
  echo "manifest signed: $(test -f $work/ev/manifest.dsse.json && echo yes || echo no)"
  tail -3 "$out/faults-gate.log"
} > "$out/faults.log" 2>&1
cat "$out/faults.log"
