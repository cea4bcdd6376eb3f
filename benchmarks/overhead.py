"""The gate's own overhead on a project: wall time of `cuda-gate run` minus the user's processes.

    python benchmarks/overhead.py --config examples/torch-extension/cuda-gate.toml \\
        [--python /usr/bin/python3] [--runs 3] [--json out.json] [--profile DIR]

Each run is a whole `cuda-gate run` (no store), timed from outside. The user's own work
is read back from the run's result.json: every configured build command and every
entry-point execution (both paths), with the durations the gate recorded for them. What
is left is the gate: probing, the smoke program, inspection (cuobjdump included),
loaded-library reading, the PTX JIT proofs, reports and the manifest.

The first run gets an empty inspection cache (CUDA_GATE_CACHE_DIR in a fresh folder):
"cold"; the next runs reuse it: "warm". Prints one line per run and the medians.
With --profile, each run is under cProfile (slower; the figures are then not the
overhead) and DIR gets run-N.prof and run-N.txt, the main thread's top functions.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SMOKE = "smoke"


def one_run(
    config: Path, evidence: Path, cache: Path, extra: list[str], profile: Path | None = None
) -> tuple[float, float, dict[str, Any]]:
    """(wall seconds, seconds of the user's processes, the run record)."""
    env = {**os.environ, "CUDA_GATE_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-m", "gate", "run", "--config", str(config), "--no-store"]
    if profile is not None:
        argv[1:1] = ["-m", "cProfile", "-o", str(profile)]
    argv += ["--evidence", str(evidence), "--quiet", *extra]
    began = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - began
    record = json.loads((evidence / "result.json").read_text(encoding="utf-8"))
    builds = sum(b["duration"] for b in record["builds"] if b["name"] != SMOKE)
    runs = sum(e["duration"] for e in record["executions"] if e["entry_point"] != SMOKE)
    user = builds + runs
    print(
        f"exit {done.returncode}: wall {wall:.2f} s, user processes {user:.2f} s, "
        f"gate {wall - user:.2f} s; {record['verdict']['statement'][:90]}",
        flush=True,
    )
    # Where the gate's part went: each stage's time less the user's processes in it.
    theirs = {"build": builds, "execute": runs}
    staged = sum(s["duration"] for s in record["stages"])
    parts = [
        f"{s['name']} {s['duration'] - theirs.get(s['name'], 0.0):.2f}"
        for s in record["stages"]
        if s["status"] != "skipped"
    ]
    print(f"  gate per stage (s): {', '.join(parts)}; outside stages {wall - staged:.2f}")
    if profile is not None:
        with profile.with_suffix(".txt").open("w", encoding="utf-8") as out:
            for order in ("cumulative", "tottime"):
                pstats.Stats(str(profile), stream=out).sort_stats(order).print_stats(45)
    return wall, user, record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--python", default=None, help="passed to cuda-gate run --python")
    parser.add_argument("--runs", type=int, default=3, help="runs in all: 1 cold, the rest warm")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--profile", type=Path, default=None, help="cProfile each run into DIR")
    args = parser.parse_args()
    extra = ["--python", args.python] if args.python else []
    figures: dict[str, list[float]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="cuda-gate-overhead-") as scratch:
        cache = Path(scratch) / "cache"
        for index in range(args.runs):
            profile = None
            if args.profile is not None:
                args.profile.mkdir(parents=True, exist_ok=True)
                profile = args.profile / f"run-{index}.prof"
            evidence = Path(scratch) / f"ev-{index}"
            wall, user, _ = one_run(args.config, evidence, cache, extra, profile)
            figures["cold" if index == 0 else "warm"].append(wall - user)
    summary = {k: statistics.median(v) for k, v in figures.items() if v}
    print("gate overhead (median): " + ", ".join(f"{k} {v:.2f} s" for k, v in summary.items()))
    if args.json:
        args.json.write_text(json.dumps({"runs": figures, "median": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
