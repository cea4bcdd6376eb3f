"""Peak memory of `cuda-gate inspect` against cuobjdump, per library and per wheel.

Whole processes; each one's own peak RSS (``os.wait4`` rusage), median over the runs.
A wheel is read by cuda-gate as it is; cuobjdump cannot read a wheel, so each of its
shared libraries is inflated into a temporary folder first and cuobjdump's figure for
the wheel is its largest over those libraries (the least it needs to read the wheel
member by member). Targets (issue 23): cuda-gate at most 1/5 of cuobjdump's peak on
every input, at most 1/10 where the library (a wheel's largest) is over 100 MB.
Memory, unlike time, does not move with the machine's load; timings are left to
bench_inspect.py. Writes its part of benchmarks/RESULTS.md between two marker lines.

    python benchmarks/bench_memory.py [WHEEL_OR_LIBRARY ...] [--runs 3] [--no-write]
    nox -s bench -- --memory [WHEEL_OR_LIBRARY ...]

With no input, the nvidia-cublas==13.10.0.20 wheel (downloaded with pip into
``--cache`` when missing) and its libcublasLt.so.13.
This script calls subprocess directly (not gate.proc): it needs each child's rusage.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_inspect  # noqa: E402
from bench_inspect import bytecode, machine  # noqa: E402

from gate.tools import cuobjdump  # noqa: E402

DEFAULT_WHEEL = "nvidia-cublas==13.10.0.20"
DEFAULT_MEMBER = "nvidia/cu13/lib/libcublasLt.so.13"
HEADERS = "cuda-gate inspect"
NAMES = "cuda-gate inspect --names"
LIST_ELF = "cuobjdump --list-elf"
SYMBOLS = "cuobjdump -symbols"
MB = 1 << 20
BEGIN = "<!-- bench_memory.py writes from here: do not edit by hand -->"
END = "<!-- bench_memory.py writes up to here -->"

# Runs argv[2:] as its child and writes the child's peak RSS (kB) to argv[1]. Measuring
# through it keeps this script's own high-water mark out of the figure: Linux carries a
# process's peak across fork and exec, so a child forked from a large parent starts there.
_LAUNCH = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass(frozen=True)
class Row:
    """One input's median peaks, in kB; ``largest`` is the library (or wheel member) size."""

    name: str
    kind: str
    size: int
    largest: int
    peaks: dict[str, int]


def peak(argv: list[str], env: dict[str, str], *, check: bool) -> int:
    """``argv``'s own peak RSS in kB, output discarded."""
    with tempfile.TemporaryDirectory(prefix="bench-peak-") as folder:
        out = Path(folder) / "peak"
        launch = [sys.executable, "-I", "-c", _LAUNCH, str(out), *argv]
        done = subprocess.run(
            launch, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
        if check and done.returncode not in (0, 1):  # 1: inspect judged, still read
            raise SystemExit(f"benchmark command failed ({done.returncode}): {' '.join(argv)}")
        return int(out.read_text())


def fetch(cache: Path) -> list[Path]:
    """The default wheel (downloaded when missing) and its libcublasLt.so.13 beside it."""
    cache.mkdir(parents=True, exist_ok=True)
    pattern = f"{DEFAULT_WHEEL.split('==', maxsplit=1)[0].replace('-', '_')}-*.whl"
    if not list(cache.glob(pattern)):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache),
             DEFAULT_WHEEL],
            check=True,
        )  # fmt: skip
    wheel = sorted(cache.glob(pattern))[0]
    lib = cache / DEFAULT_MEMBER.rsplit("/", 1)[-1]
    if not lib.exists():
        with zipfile.ZipFile(wheel) as z, z.open(DEFAULT_MEMBER) as src:
            part = lib.with_suffix(".part")
            with part.open("wb") as out:
                shutil.copyfileobj(src, out, MB)
            part.replace(lib)
    return [wheel, lib]


def libraries(wheel: Path, into: Path) -> list[Path]:
    """Every shared library of ``wheel``, inflated into ``into`` (one file per member)."""
    found = []
    with zipfile.ZipFile(wheel) as z:
        for i, info in enumerate(z.infolist()):
            base = info.filename.rsplit("/", 1)[-1]
            if base and (base.endswith(".so") or ".so." in base):
                target = into / f"{i}-{base}"
                with z.open(info) as src, target.open("wb") as out:
                    shutil.copyfileobj(src, out, MB)
                found.append(target)
    return found


def measure(path: Path, tool: str, runs: int, env: dict[str, str]) -> Row:
    """Median peaks of both tools on one library or wheel."""
    ours = [sys.executable, "-m", "gate", "inspect", "--no-detect"]
    gate_cmds = {HEADERS: [*ours, str(path)], NAMES: [*ours, "--names", "--no-cache", str(path)]}
    with tempfile.TemporaryDirectory(prefix="bench-members-") as folder:
        wheel = zipfile.is_zipfile(path)
        libs = libraries(path, Path(folder)) if wheel else [path]
        largest = max((lib.stat().st_size for lib in libs), default=0)
        samples: dict[str, list[int]] = {label: [] for label in (*gate_cmds, LIST_ELF, SYMBOLS)}
        for _ in range(runs):  # interleaved, as bench_inspect.py does
            for label, argv in gate_cmds.items():
                samples[label].append(peak(argv, env, check=True))
            for label, option in ((LIST_ELF, "--list-elf"), (SYMBOLS, "-symbols")):
                # No device code is an error for cuobjdump: its peak still counts.
                samples[label].append(
                    max((peak([tool, option, str(lib)], env, check=False) for lib in libs),
                        default=0)
                )  # fmt: skip
    peaks = {label: int(statistics.median(got)) for label, got in samples.items()}
    return Row(path.name, "wheel" if wheel else "library", path.stat().st_size, largest, peaks)


def render(rows: list[Row], tool: str, runs: int, where: str) -> str:
    """The RESULTS.md section: the table and each input against the targets."""
    lines = [
        "# Peak memory: cuda-gate inspect vs cuobjdump (bench_memory.py)",
        "",
        f"Machine: {where}. cuobjdump: {cuobjdump.version(tool)}.",
        f"Median over {runs} interleaved runs of each process's own peak RSS (os.wait4,",
        "through a small launcher so the benchmark's own peak stays out). A wheel's",
        "cuobjdump figure is its largest over the wheel's shared libraries, each inflated",
        "first (cuobjdump reads no wheels). Names with --no-cache.",
        "",
        (
            f"| input | MB (largest library) | {HEADERS} | {NAMES} | {LIST_ELF} | {SYMBOLS} "
            "| ratio (headers, names) | target |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        p = row.peaks
        head, names = p[LIST_ELF] / max(p[HEADERS], 1), p[SYMBOLS] / max(p[NAMES], 1)
        bound = 10 if row.largest > 100 * MB else 5
        met = "met" if min(head, names) >= bound else "**missed**"
        lines.append(
            f"| `{row.name}` ({row.kind}) | {row.size / MB:.0f} ({row.largest / MB:.0f}) "
            f"| {p[HEADERS] / 1024:.0f} | {p[NAMES] / 1024:.0f} | {p[LIST_ELF] / 1024:.0f} "
            f"| {p[SYMBOLS] / 1024:.0f} | 1/{head:.0f}, 1/{names:.0f} | <= 1/{bound}: {met} |"
        )
    return "\n".join(lines)


def merge(old: str, block: str) -> str:
    """``old`` with this script's part replaced by ``block`` (appended if it has none)."""
    return bench_inspect.merge(old, block, BEGIN, END, first=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="*", type=Path, metavar="WHEEL_OR_LIBRARY")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=ROOT / ".work" / "bench")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--no-write", action="store_true", help="print only, keep RESULTS.md")
    parser.add_argument("--memory", action="store_true", help="(how `nox -s bench` picks this)")
    args = parser.parse_args()
    tool = cuobjdump.find()
    bytecode()
    inputs = args.inputs or fetch(args.cache)
    where = machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as private:
        env = {**os.environ, "CUDA_GATE_CACHE_DIR": private}
        for path in inputs:
            rows.append(measure(path, tool, args.runs, env))
            p = rows[-1].peaks
            print(path.name, {k: f"{v / 1024:.0f} MB" for k, v in p.items()}, flush=True)
    text = render(rows, tool, args.runs, where)
    print(text)
    if not args.no_write:
        bench_inspect.write_results(args.output, text, BEGIN, END, first=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
