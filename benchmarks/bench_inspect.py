r"""Time `cuda-gate inspect` against cuobjdump on the big vendor libraries, warm and cold.

On the GPU machine (offline, 16 cores, cuobjdump on PATH, torch 2.11 cu130's wheels in
the system python3; the gate's dependencies from the carried wheelhouse .whl/), from the
checkout, the one command line to run (about 2 minutes)::

    python3 -m venv /tmp/cg && /tmp/cg/bin/pip install -q --no-index --find-links .whl lz4 \
        zstandard cryptography boto3 requests jsonschema cxxfilt && /tmp/cg/bin/python \
        benchmarks/bench_inspect.py --cold --names-only --runs 3 --output "$OUT/RESULTS.md" \
        --site "$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))')"

Whole processes, both tools in the same run, interleaved round-robin so machine noise
hits both alike; median wall time and per-process peak RSS (``os.wait4`` rusage, so
each run's own peak, not the maximum over all children). Names mode runs with
``--no-cache`` and a private cache folder: the inspection cache would otherwise answer
every run after the first. Writes its part of benchmarks/RESULTS.md, between two marker
lines; the rest of the file is kept.

    python benchmarks/bench_inspect.py [LIBRARY ...] [--site DIR] [--cold] [--names-only]
        [--runs 5] [--output FILE] [--no-write] [--variant NAME=TREE ...]

With neither LIBRARY nor ``--site``, the libraries of LIBRARIES (cuBLASLt, cuBLAS,
cuDNN's largest, cuFFT) are taken from their pinned wheels, downloaded with pip into
``--cache`` (ignored by git) when missing. ``--site DIR`` takes the same libraries from
an installed environment's site-packages folder instead (and torch's libtorch_cuda.so
when it is there): nothing is downloaded. ``--cold`` adds runs with the page cache
dropped before each command (root only: ``/proc/sys/vm/drop_caches``), the first run a
user makes on a machine that has not read the library yet. ``--names-only`` times only
the kernel names (``inspect --names``, and ``--names --no-scan``, against ``-symbols``),
not the listings. ``--variant before=.work/before`` also times the names read of the gate in
another checkout (``git archive REV gate | tar -x -C .work/before``), interleaved with the
rest: a change against the revision before it, in the same runs.
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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.tools import cuobjdump  # noqa: E402


@dataclass(frozen=True)
class Library:
    """A vendor library to time: its wheel, and its path inside it (which is also its path
    under an environment's site-packages)."""

    name: str
    requirement: str
    member: str


# The libraries a user audits first, as issue 40 names them: cuBLASLt, cuBLAS, cuDNN's
# largest library (its precompiled engines) and cuFFT (whose device code cuobjdump does not
# see: it sits in .ldata).
LIBRARIES = (
    Library("libcublasLt.so.13", "nvidia-cublas==13.10.0.20", "nvidia/cu13/lib/libcublasLt.so.13"),
    Library("libcublas.so.13", "nvidia-cublas==13.10.0.20", "nvidia/cu13/lib/libcublas.so.13"),
    Library(
        "libcudnn_engines_precompiled.so.9",
        "nvidia-cudnn-cu13==9.28.1.4",
        "nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9",
    ),
    Library("libcufft.so.12", "nvidia-cufft==12.5.0.14", "nvidia/cu13/lib/libcufft.so.12"),
)
# Under --site, also this one where it is installed (torch's own, on the GPU machine).
TORCH = "torch/lib/libtorch_cuda.so"
NAMES = "cuda-gate inspect --names (all sections)"
NAMES_NO_SCAN = "cuda-gate inspect --names --no-scan"
LISTING = "cuda-gate inspect (headers, all sections: default)"
LISTING_NO_SCAN = "cuda-gate inspect --no-scan (headers, .nv_fatbin only)"
LIST_ELF = "cuobjdump --list-elf"
SYMBOLS = "cuobjdump -symbols"
# Issue 40's targets for kernel names on these libraries.
NAMES_TARGET = 3.0
MEMORY_TARGET = 10
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
WARM, COLD = "warm", "cold"


# The part of RESULTS.md this script writes; the rest of the file (runs on other machines,
# the overhead figures, the analysis) is kept as it is.
BEGIN = "<!-- bench_inspect.py writes from here: do not edit by hand -->"
END = "<!-- bench_inspect.py writes up to here -->"


@dataclass(frozen=True)
class Sample:
    seconds: float
    peak_kb: int
    status: int = 0


# (library name, page cache, command label) -> its samples' median seconds, peak KB and
# the exit status of its last run.
Results = dict[tuple[str, str, str], tuple[float, int, int]]


def fetch(cache: Path, library: Library = LIBRARIES[0]) -> Path:
    """``library`` extracted from its wheel into ``cache`` (downloaded when missing)."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / library.name
    if target.exists():
        return target
    name, version = library.requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    wheels = list(cache.glob(pattern))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache),
             library.requirement],
            check=True,
        )  # fmt: skip
        wheels = list(cache.glob(pattern))
    with zipfile.ZipFile(wheels[0]) as z, z.open(library.member) as src:
        tmp = target.with_suffix(".part")
        with tmp.open("wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
        tmp.replace(target)
    return target


def installed(site: Path) -> list[Path]:
    """The libraries of LIBRARIES (and torch's libtorch_cuda.so) installed under ``site``."""
    found = [site / lib.member for lib in LIBRARIES] + [site / TORCH]
    missing = [str(p) for p in found[:-1] if not p.is_file()]
    if missing:
        print(f"not installed, left out: {', '.join(missing)}", file=sys.stderr)
    return [p for p in found if p.is_file()]


def measure(argv: list[str], env: dict[str, str], *, may_fail: bool = False) -> Sample:
    """Run ``argv`` once, output discarded; wall time and its own peak RSS. A failed run
    stops the benchmark unless ``may_fail`` (cuobjdump exits 255 on a library whose device
    code it cannot see)."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT
    )  # the checkout's gate for python -m gate
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0 and not may_fail:
        raise SystemExit(f"benchmark command failed ({child.returncode}): {' '.join(argv)}")
    return Sample(elapsed, usage.ru_maxrss, child.returncode)


# Runs the gate of another tree (argv[1], put first on sys.path): `python -m gate` would
# import the one in the current folder first, whatever PYTHONPATH says.
OTHER_TREE = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'cuda-gate'; "
    "from gate.cli import entry; raise SystemExit(entry())"
)


def commands(
    tool: str, lib: Path, *, names_only: bool = False, variants: dict[str, Path] | None = None
) -> dict[str, list[str]]:
    """Each command's argv: ``variants`` (name -> another revision's source tree, the folder
    holding its ``gate``) add that tree's names read, to compare a change with the tree
    before it in the same interleaved runs."""
    ours = [sys.executable, "-m", "gate", "inspect", "--no-detect"]
    names = {
        NAMES: [*ours, "--names", "--no-cache", str(lib)],
        NAMES_NO_SCAN: [*ours, "--names", "--no-cache", "--no-scan", str(lib)],
        SYMBOLS: [tool, "-symbols", str(lib)],
    }
    # With variants, this checkout runs through the same stub as they do (its own row), so
    # that the rows compared differ in the tree alone, not in how Python started it.
    trees = {"this tree": ROOT, **variants} if variants else {}
    for name, tree in trees.items():
        names[f"{NAMES} ({name})"] = [
            sys.executable, "-c", OTHER_TREE, str(tree), "inspect", "--no-detect", "--names",
            "--no-cache", str(lib),
        ]  # fmt: skip
    if names_only:
        return names
    return {
        LISTING_NO_SCAN: [*ours, "--no-scan", str(lib)],
        LISTING: [*ours, str(lib)],
        LIST_ELF: [tool, "--list-elf", str(lib)],
        **names,
    }


def drop_page_cache() -> None:
    """Write back and drop the page cache (and dentries, inodes): the next run reads the
    library, the interpreter and the tool from disk."""
    os.sync()
    DROP_CACHES.write_text("3\n")


def bytecode(trees: Iterable[Path] = ()) -> None:
    """Compile the checkout's gate package, as pip does for an install: the timed processes
    import it from the checkout (``python -m gate`` in ROOT), and where
    PYTHONDONTWRITEBYTECODE is set (these VMs set it) each would compile every module it
    imports from source, about 0.1 s a process that no installed cuda-gate pays."""
    import compileall  # noqa: PLC0415

    compileall.compile_dir(ROOT / "gate", quiet=1)
    for tree in trees:
        compileall.compile_dir(tree / "gate", quiet=1)


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


def run_all(
    libs: list[Path],
    tool: str,
    env: dict[str, str],
    *,
    runs: int,
    cold: bool,
    names_only: bool,
    variants: dict[str, Path] | None = None,
) -> Results:
    """Every command on every library: warm (after one untimed run of each), then cold
    (the page cache dropped before each command) when asked; interleaved round-robin."""
    results: Results = {}
    for cache in (WARM, COLD) if cold else (WARM,):
        samples: dict[tuple[str, str], list[Sample]] = {}
        every = {lib: commands(tool, lib, names_only=names_only, variants=variants) for lib in libs}
        if cache == WARM:  # the page cache and the interpreter's bytecode
            for cmds in every.values():
                for label, argv in cmds.items():
                    measure(argv, env, may_fail=label in (SYMBOLS, LIST_ELF))
        for _ in range(runs):
            for lib, cmds in every.items():
                for label, argv in cmds.items():
                    if cache == COLD:
                        drop_page_cache()
                    sample = measure(argv, env, may_fail=label in (SYMBOLS, LIST_ELF))
                    samples.setdefault((lib.name, label), []).append(sample)
        for (name, label), got in samples.items():
            median = statistics.median(s.seconds for s in got)
            peak = max(s.peak_kb for s in got)
            results[name, cache, label] = (median, peak, got[-1].status)
            print(f"{name:34} {cache:4} {label:56} {median:8.3f} s {peak / 1024:8.1f} MB",
                  flush=True)  # fmt: skip
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libraries", nargs="*", type=Path, metavar="LIBRARY")
    parser.add_argument("--site", type=Path, help="take the libraries from this site-packages")
    parser.add_argument("--cold", action="store_true", help="also time with the page cache dropped")
    parser.add_argument("--names-only", action="store_true", help="time kernel names only")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=ROOT / ".work" / "bench")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--no-write", action="store_true", help="print only, keep RESULTS.md")
    parser.add_argument(
        "--variant", action="append", default=[], metavar="NAME=TREE",
        help="also time the names read of the gate in TREE (another revision's checkout)",
    )  # fmt: skip
    args = parser.parse_args()
    variants = {}
    for spec in args.variant:
        name, _, tree = spec.partition("=")
        if not name or not (Path(tree) / "gate" / "cli.py").is_file():
            parser.error(f"--variant {spec}: want NAME=TREE, TREE a folder holding gate/cli.py")
        variants[name] = Path(tree).resolve()
    if args.cold and not os.access(DROP_CACHES, os.W_OK):
        parser.error(f"--cold drops the page cache: {DROP_CACHES} is not writable (root only)")
    tool = cuobjdump.find()
    bytecode(variants.values())
    libs = list(args.libraries)
    if args.site is not None:
        libs += installed(args.site)
    if not libs:
        libs = [fetch(args.cache, lib) for lib in LIBRARIES]
    start_machine = machine()
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as private:
        env = {**os.environ, "CUDA_GATE_CACHE_DIR": private}
        results = run_all(
            libs, tool, env, runs=args.runs, cold=args.cold, names_only=args.names_only,
            variants=variants,
        )  # fmt: skip
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


def render(results: Results, libs: list[Path], tool: str, runs: int, where: str) -> str:
    version = cuobjdump.version(tool)
    caches = [c for c in (WARM, COLD) if any(k[1] == c for k in results)]
    lines = [
        "# cuda-gate inspect vs cuobjdump",
        "",
        f"Machine: {where}. cuobjdump: {version}.",
        f"Whole process, output to /dev/null, median of {runs} interleaved runs; peak = the",
        "largest per-process max RSS over the runs (os.wait4 rusage). Names mode with",
        "--no-cache and a private cache folder (the inspection cache would answer every later",
        "run). Warm: the page cache holds the library (one untimed run of each command first);",
        "cold: the page cache dropped before every command (`sync; echo 3 >",
        "/proc/sys/vm/drop_caches`), as on a first audit.",
        "",
        "Inputs: " + "; ".join(f"`{p.name}` ({p.stat().st_size / 1e6:.0f} MB)" for p in libs),
        "",
        (
            f"## Kernel names against the targets (>= {NAMES_TARGET:.0f}x `-symbols`, peak "
            f"memory <= 1/{MEMORY_TARGET})"
        ),
        "",
        (
            "| library | page cache | gate s | `-symbols` s | x | x `--no-scan` | gate peak MB "
            "| `-symbols` peak MB | memory | time | memory |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for cache in caches:
        lines += [_names_row(results, lib.name, cache) for lib in libs]
    lines += ["", "## Every command", "", "| library | page cache | command | median s | peak MB |"]
    lines.append("|---|---|---|---:|---:|")
    lines += [
        f"| {n} | {c} | {label}{_failed(status)} | {s:.3f} | {kb / 1024:.1f} |"
        for (n, c, label), (s, kb, status) in results.items()
    ]
    listings = [lib.name for lib in libs if (lib.name, WARM, LIST_ELF) in results]
    if listings:
        lines += ["", "## Listing and `--no-scan`, warm", ""]
        lines += [_listing_line(results, name) for name in listings]
    return "\n".join(lines) + "\n"


def _names_row(results: Results, name: str, cache: str) -> str:
    """One library's names against the targets. The default read scans every section for
    containers; ``--no-scan`` reads ``.nv_fatbin`` alone, what cuobjdump reads: its ratio
    is the like-for-like one (the default may read hundreds of MB more, and find device
    code cuobjdump never sees)."""
    ours, ours_kb, _ = results[name, cache, NAMES]
    theirs, theirs_kb, status = results[name, cache, SYMBOLS]
    memory = f"1/{theirs_kb / max(ours_kb, 1):.1f}"
    if status != 0:  # cuobjdump read nothing: no ratio to judge
        return (
            f"| {name} | {cache} | {ours:.3f} | {theirs:.3f}{_failed(status)} | - | - | "
            f"{ours_kb / 1024:.0f} | {theirs_kb / 1024:.0f} | {memory} | - | - |"
        )
    ratio = theirs / ours
    no_scan = results.get((name, cache, NAMES_NO_SCAN))
    like = f"{theirs / no_scan[0]:.2f}" if no_scan is not None else "-"
    return (
        f"| {name} | {cache} | {ours:.3f} | {theirs:.3f} | {ratio:.2f} | {like} | "
        f"{ours_kb / 1024:.0f} | {theirs_kb / 1024:.0f} | {memory} | "
        f"{_met(ratio >= NAMES_TARGET)} | {_met(ours_kb * MEMORY_TARGET <= theirs_kb)} |"
    )


def _listing_line(results: Results, name: str) -> str:
    elf, elf_kb, _ = results[name, WARM, LIST_ELF]
    fast, _, _ = results[name, WARM, LISTING_NO_SCAN]
    full, full_kb, _ = results[name, WARM, LISTING]
    names_ns, _, _ = results[name, WARM, NAMES_NO_SCAN]
    sym, _, _ = results[name, WARM, SYMBOLS]
    return (
        f"- {name}: listing, every section scanned (default) {full:.3f} s, {elf / full:.1f}x "
        f"`--list-elf` ({elf:.3f} s), `--no-scan` {fast:.3f} s ({elf / fast:.1f}x); peak "
        f"{full_kb / 1024:.0f} MB vs {elf_kb / 1024:.0f} MB; names `--no-scan` (what cuobjdump "
        f"reads) {names_ns:.3f} s ({sym / names_ns:.2f}x `-symbols`)"
    )


def _failed(status: int) -> str:
    return f" (exit {status}: no device code it can see)" if status else ""


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
