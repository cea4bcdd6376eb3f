r"""Forked decoders read what threads read: ``inspect --names --json`` of each library twice.

Once with the decoding forked into processes (the machine's cores where it has 8 or more,
else 16 made to appear), once with 2 cores made to appear (threads); the two JSON documents
must be equal byte for byte (both reads exit 0 with one JSON document), the first read
must have forked its decoders, and no process of either read may be left behind. For the
large vendor libraries on the GPU machine, where the unit tier's golden files are small::

    python benchmarks/forked_check.py LIB [LIB ...]

Prints one line per library (both times, the verdict) and exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMELINE = Path(__file__).resolve().parent / "timeline.py"
FORKED_MARK = "decoders forked"


def read(lib: Path, cpus: int) -> tuple[int, bytes, float, str]:
    """One names read of ``lib`` seeing ``cpus`` cores: exit status, JSON, seconds, marks."""
    with tempfile.TemporaryDirectory(prefix="forked-check-") as cache:
        env = {**os.environ, "CUDA_GATE_CACHE_DIR": cache, "T0": repr(time.time())}
        argv = [
            sys.executable, str(TIMELINE), "--cpus", str(cpus), "inspect", "--no-detect",
            "--names", "--no-cache", "--json", str(lib),
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False, timeout=600)
        took = time.perf_counter() - start
    return done.returncode, done.stdout, took, done.stderr.decode(errors="replace")


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def left_behind() -> list[str]:
    """Processes still running timeline.py (a decoding worker is a fork of one)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(TIMELINE).encode() in cmdline:
            found.append(proc.name)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libraries", nargs="+", type=Path, metavar="LIB")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    forked_cpus = cores if cores >= 8 else 16
    failed = 0
    for lib in args.libraries:
        status, forked_json, forked_s, marks = read(lib, forked_cpus)
        threads_status, threads_json, threads_s, _ = read(lib, 2)
        problems = []
        if FORKED_MARK not in marks:
            problems.append("the first read forked no decoders")
        if status != 0 or threads_status != 0:
            problems.append(f"a read failed (exit {status} / {threads_status})")
        elif not _is_json(forked_json):
            problems.append("the output is not one JSON document")
        elif forked_json != threads_json:
            problems.append("the JSON differs")
        failed += bool(problems)
        print(
            f"{lib.name:36} forked ({forked_cpus} cores) {forked_s:.3f} s, threads {threads_s:.3f}"
            f" s, {len(forked_json):,} bytes of JSON: {'; '.join(problems) or 'identical'}",
            flush=True,
        )
    rest = left_behind()
    print(f"processes left behind: {len(rest)}" + (f" ({' '.join(rest)})" if rest else ""))
    return 1 if failed or rest else 0


if __name__ == "__main__":
    raise SystemExit(main())
