"""Time `cuda-gate inspect` against cuobjdump loops over a corpus of real CUDA wheels.

    python benchmarks/bench_corpus.py [--runs 3] [--output FILE] [--no-write]
    nox -s bench -- --corpus [--runs 3]

The wheels (``CORPUS``: about 7 GB, 31 distributions, x86-64 and aarch64 builds) are
downloaded once with pip into ``$GATE_BENCH_WHEELS`` (default .work/wheels, shared with
the tests) and installed by unzipping (about 16 GB), each into a folder of its own
(``.work/bench-corpus/<name>-<arch>/lib/python3.12/site-packages``) and, by hard links,
all into environments side by side (``.work/bench-corpus/all/<arch>``: see link_all).
Both tools read the same files:

- cuda-gate: ``inspect --no-detect ENV`` (listing: headers, every section scanned) and
  ``inspect --names --no-cache ENV`` (names), one process per distribution and one over
  the whole corpus (every environment named at once); the audit by distribution, as a
  user runs it.
- cuobjdump: a shell loop of ``cuobjdump --list-elf FILE`` (and ``-symbols FILE``) over
  every file of the distribution that holds device code (found by the reader first),
  one file after the other; the total is the sum of the distributions' loops in the
  same round.
- each distribution's share of the whole-corpus audit: one more run of each mode
  (benchmarks/attribute.py) times every file's read; a distribution is given the
  median whole-corpus time times its files' share of all read time (the walk, start-up
  and report shared out in the same proportion). What a distribution costs inside an
  audit of everything, beside what a process of its own costs (start-up included).
- the warm re-audit: ``inspect --names ENV`` of the whole corpus with the inspection
  cache filled by a run before (a private cache folder).
- the gate's start-up floor: both modes over an environment of one distribution holding
  one Python file (an empty one is an error), in every round; each
  distribution is also compared with that floor taken off its own process's time (the
  interpreter and the gate's imports: a few distributions take cuobjdump less).

Medians of ``--runs`` rounds, each round running every command once, interleaved, so
machine noise hits both tools alike; a distribution's files (and before the whole-corpus
runs, the corpus's) are read once, untimed, before its commands, so that neither tool
pays for the page cache the other's runs emptied. Writes its part of benchmarks/RESULTS.md, between
its own two marker lines. subprocess is called directly (the child's rusage is needed).
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import bench_inspect  # noqa: E402

from gate.tools import cuobjdump  # noqa: E402
from tests.pypi_wheels import SMALL, Wheel, fetch, folder  # noqa: E402

# The small wheels the tests use and a few more (x86-64), then the kind of corpus issue 23
# measured: the large CUDA distributions people install, for x86-64 and aarch64 (about
# 6.5 GB of wheels, 13 GB installed).
_LARGE = (
    ("torch==2.14.1", "torch-2.14.1-cp312-*"),
    ("vllm==0.34.0", "vllm-0.34.0-*"),
    ("sgl-kernel==0.3.21", "sgl_kernel-0.3.21-*"),
    ("jax-cuda13-plugin==0.10.2", "jax_cuda13_plugin-0.10.2-cp312-*"),
    ("jax-cuda13-pjrt==0.10.2", "jax_cuda13_pjrt-0.10.2-*"),
    ("onnxruntime-gpu==1.31.1", "onnxruntime_gpu-1.31.1-cp312-*"),
    ("nvidia-cublas==13.10.0.20", "nvidia_cublas-13.10.0.20-*"),
    ("nvidia-cudnn-cu13==9.28.1.4", "nvidia_cudnn_cu13-9.28.1.4-*"),
    ("nvidia-nccl-cu13==2.32.3", "nvidia_nccl_cu13-2.32.3-*"),
    ("cupy-cuda13x==14.2.0", "cupy_cuda13x-14.2.0-cp312-*"),
    ("bitsandbytes==0.50.2", "bitsandbytes-0.50.2-*"),
)
CORPUS = (
    *SMALL,
    Wheel("nvidia-nvjitlink-cu12==12.9.86", "nvidia_nvjitlink_cu12-12.9.86-*.whl"),
    Wheel("nvidia-cuda-nvrtc-cu12==12.9.86", "nvidia_cuda_nvrtc_cu12-12.9.86-*.whl"),
    Wheel("nvidia-curand-cu12==10.3.10.19", "nvidia_curand_cu12-10.3.10.19-*.whl"),
    Wheel("cupy-cuda12x==14.2.0", "cupy_cuda12x-14.2.0-cp312-*.whl"),
    Wheel("nvidia-cufft-cu12==11.4.1.4", "nvidia_cufft_cu12-11.4.1.4-*.whl"),
    Wheel("nvidia-nccl-cu12==2.32.3", "nvidia_nccl_cu12-2.32.3-*.whl"),
    *(
        Wheel(requirement, f"{pattern}_{arch}.whl", arch)
        for arch in ("x86_64", "aarch64")
        for requirement, pattern in _LARGE
        if not (arch == "x86_64" and requirement.startswith("bitsandbytes"))  # in SMALL
    ),
    Wheel("flashinfer-cubin==0.6.13", "flashinfer_cubin-0.6.13-py3-none-any.whl", "any"),
)
SITE = Path("lib") / "python3.12" / "site-packages"
BEGIN = "<!-- bench_corpus.py writes from here: do not edit by hand -->"
END = "<!-- bench_corpus.py writes up to here -->"
LISTING, NAMES, LIST_ELF, SYMBOLS, WARM = "listing", "names", "--list-elf", "-symbols", "warm"
TOTAL = "all"
FLOOR = "(start-up)"  # the gate's audit of one distribution of one Python file
# A loop over the files named in $LIST, one a line (flashinfer-cubin's 15,970 cubins are
# too many for one command line): cuobjdump exits non-zero on a file it cannot read; the
# loop goes on.
LOOP = 'while IFS= read -r f; do "$CUOBJDUMP" "$MODE" "$f" >/dev/null 2>&1; done <"$LIST"; exit 0'
DEVICE_LIST = ".device-files"  # beside each distribution's folder: its files with device code


@dataclass(frozen=True)
class Dist:
    """One installed distribution: its folder, every file, and the files with device code."""

    name: str
    arch: str  # the folder of the whole environment it is linked into
    root: Path
    files: int
    size: int
    device: tuple[Path, ...]


def label(wheel: Wheel) -> str:
    """How a distribution is named in the table: ``torch (aarch64)``; x86-64 and pure
    Python wheels by their name alone."""
    return wheel.name if wheel.arch in ("x86_64", "any") else f"{wheel.name} ({wheel.arch})"


def install(wheel: Path, into: Path) -> None:
    """Unzip ``wheel`` into ``into``/lib/python3.12/site-packages, once."""
    stamp = into / ".installed"
    if stamp.is_file() and stamp.read_text() == f"{wheel.name} {wheel.stat().st_size}":
        return
    shutil.rmtree(into, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(into / SITE)
    stamp.write_text(f"{wheel.name} {wheel.stat().st_size}")


def link_all(dists: list[Dist], into: Path) -> tuple[list[Path], dict[str, str]]:
    """Every distribution's files in environments side by side under ``into``, by hard
    links (no second copy); the environments' folders, and each linked file's
    distribution (by its path, normalised).

    One environment per architecture (``into/aarch64``), since both builds of a
    distribution have the same paths, and a further one (``into/x86_64-2``) for a
    distribution whose files would land on another's (nvidia-nccl-cu12 and -cu13 both
    install nvidia/nccl/lib/libnccl.so.2; cupy-cuda12x and -cuda13x both install cupy/):
    in one environment the second would overwrite the first. A file both hold with the
    same bytes (a namespace's ``__init__.py``) is shared.
    """
    shutil.rmtree(into, ignore_errors=True)
    envs: dict[str, dict[Path, Path]] = {}  # environment -> its files (relative -> source)
    owners: dict[str, str] = {}
    for d in dists:
        site = d.root / SITE
        files = {p.relative_to(site): p for p in site.rglob("*") if p.is_file()}
        n = 1
        while True:
            env = d.arch if n == 1 else f"{d.arch}-{n}"
            taken = envs.setdefault(env, {})
            if all(_same(taken[rel], path) for rel, path in files.items() if rel in taken):
                break
            n += 1
        for rel, path in files.items():
            if rel not in taken:
                taken[rel] = path
                target = into / env / SITE / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, target)
                owners[os.path.normpath(target)] = d.name
    return [into / env for env in envs], owners


def _same(a: Path, b: Path) -> bool:
    return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


def prepare(cache: Path, work: Path) -> list[Dist]:
    dists = []
    for wheel in CORPUS:
        path = fetch(wheel, cache)
        arch = "aarch64" if wheel.arch == "aarch64" else "x86_64"
        root = work / f"{wheel.name}-{arch}"
        install(path, root)
        files = [p for p in (root / SITE).rglob("*") if p.is_file()]
        device = _device_files(root)
        size = sum(p.stat().st_size for p in files)
        dists.append(Dist(label(wheel), arch, root, len(files), size, device))
    return dists


# Lists a folder's files with device code, one a line, relative to it (the reader's own
# listing; archive members are left out: cuobjdump is given files).
_DEVICE = """
import os, sys
from gate.scan.walk import read_paths
for r in read_paths([sys.argv[1]], names=False):
    if r.listing.entries and "(" not in r.path:
        print(os.path.relpath(r.path, sys.argv[1]))
"""


def _device_files(root: Path) -> tuple[Path, ...]:
    """The files with device code under ``root``, found by the reader in a child process
    (kept beside ``root``): this process stays small, and the children it times start
    from its peak RSS (Linux keeps the high-water mark across fork and exec)."""
    kept = root.with_name(root.name + ".device-relative")
    stamp = root / ".installed"
    if not kept.is_file() or kept.stat().st_mtime < stamp.stat().st_mtime:
        found = subprocess.run(
            [sys.executable, "-c", _DEVICE, str(root / SITE)],
            capture_output=True, text=True, check=True, cwd=ROOT,
        ).stdout  # fmt: skip
        kept.write_text(found)
    device = tuple(root / SITE / line for line in kept.read_text().splitlines())
    # What the cuobjdump loop reads: this checkout's paths, one a line.
    root.with_name(root.name + DEVICE_LIST).write_text("".join(f"{p}\n" for p in device))
    return device


def warm(paths: list[Path]) -> None:
    """Read every file under ``paths`` once, untimed: whoever runs first after another
    tool's run (cuobjdump -symbols maps 5.6 GB for libtorch_cuda.so) must not pay for
    the page cache alone."""
    buf = bytearray(1 << 20)
    for top in paths:
        for where, _, names in os.walk(top):
            for name in names:
                try:
                    with Path(where, name).open("rb", buffering=0) as f:
                        while f.readinto(buf):
                            pass
                except OSError:
                    continue


def commands(d: Dist, tool: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    listed = d.root.with_name(d.root.name + DEVICE_LIST)
    ours = [sys.executable, "-m", "gate", "inspect", "--no-detect"]
    loop = ["sh", "-c", LOOP]
    return {
        LISTING: ([*ours, str(d.root)], {}),
        NAMES: ([*ours, "--names", "--no-cache", str(d.root)], {}),
        LIST_ELF: (loop, {"CUOBJDUMP": tool, "MODE": "--list-elf", "LIST": str(listed)}),
        SYMBOLS: (loop, {"CUOBJDUMP": tool, "MODE": "-symbols", "LIST": str(listed)}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="store_true", help="(this benchmark; for nox)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=folder("GATE_BENCH_WHEELS"))
    parser.add_argument("--work", type=Path, default=ROOT / ".work" / "bench-corpus")
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--no-write", action="store_true", help="print only, keep RESULTS.md")
    args = parser.parse_args()
    tool = cuobjdump.find()
    bench_inspect.bytecode()
    where = bench_inspect.machine()
    dists = prepare(args.cache, args.work)
    folders, owners = link_all(dists, args.work.resolve() / TOTAL)
    envs = [str(env) for env in folders]
    times: dict[tuple[str, str], list[float]] = {}
    peaks: dict[tuple[str, str], int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as private:
        cold_env = {**os.environ, "CUDA_GATE_CACHE_DIR": str(Path(private) / "cold")}
        warm_env = {**os.environ, "CUDA_GATE_CACHE_DIR": str(Path(private) / "warm")}
        ours = [sys.executable, "-m", "gate", "inspect", "--no-detect"]
        whole = {
            LISTING: ([*ours, *envs], cold_env),
            NAMES: ([*ours, "--names", "--no-cache", *envs], cold_env),
            WARM: ([*ours, "--names", *envs], warm_env),
        }
        empty = _floor(args.work / "floor")
        floor = {
            LISTING: ([*ours, str(empty)], cold_env),
            NAMES: ([*ours, "--names", "--no-cache", str(empty)], cold_env),
        }
        # Fills the warm re-audit's cache.
        bench_inspect.measure(whole[WARM][0], warm_env)
        for _ in range(args.runs):
            for label, (argv, env) in floor.items():
                _record(times, peaks, (FLOOR, label), argv, env)
            for d in dists:
                warm([d.root])
                for label, (argv, extra) in commands(d, tool).items():
                    _record(times, peaks, (d.name, label), argv, {**cold_env, **extra})
            warm(folders)
            for label, (argv, env) in whole.items():
                _record(times, peaks, (TOTAL, label), argv, env)
            for label in (LIST_ELF, SYMBOLS):  # the whole corpus's loop: this round's sum
                times.setdefault((TOTAL, label), []).append(
                    sum(times[d.name, label][-1] for d in dists)
                )
        shares = {
            LISTING: attribute(["--no-detect", *envs], owners, cold_env),
            NAMES: attribute(["--no-detect", "--names", "--no-cache", *envs], owners, cold_env),
        }
    text = render(dists, times, peaks, shares, tool, args.runs, where)
    print(text)
    if not args.no_write:
        bench_inspect.write_results(args.output, text, BEGIN, END)
    return 0


def _floor(root: Path) -> Path:
    """An environment of one distribution holding one Python file: the least an audit reads."""
    site = root / SITE
    info = site / "floor-1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (site / "floor.py").write_text("")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: floor\nVersion: 1\n")
    (info / "RECORD").write_text(
        "floor.py,,\nfloor-1.dist-info/METADATA,,\nfloor-1.dist-info/RECORD,,\n"
    )
    return root


def attribute(argv: list[str], owners: dict[str, str], env: dict[str, str]) -> dict[str, float]:
    """Each distribution's share (0 to 1) of the read time of one whole-corpus audit."""
    with tempfile.TemporaryDirectory(prefix="bench-attribute-") as folder:
        out = Path(folder) / "reads.tsv"
        subprocess.run(
            [sys.executable, str(HERE / "attribute.py"), str(out), *argv],
            env=env, stdout=subprocess.DEVNULL, check=True,
        )  # fmt: skip
        by: dict[str, float] = {}
        for line in out.read_text().splitlines():
            seconds, path = line.split("\t", 1)
            owner = owners.get(os.path.normpath(path), "?")
            by[owner] = by.get(owner, 0.0) + float(seconds)
    total = sum(by.values()) or 1.0
    return {name: seconds / total for name, seconds in by.items()}


def _record(
    times: dict[tuple[str, str], list[float]],
    peaks: dict[tuple[str, str], int],
    key: tuple[str, str],
    argv: list[str],
    env: dict[str, str],
) -> None:
    sample = bench_inspect.measure(argv, env)
    times.setdefault(key, []).append(sample.seconds)
    peaks[key] = max(peaks.get(key, 0), sample.peak_kb)
    print(f"{key[0]:28} {key[1]:12} {sample.seconds:8.3f} s", flush=True)


def render(  # noqa: PLR0917  (one call, in main)
    dists: list[Dist],
    times: dict[tuple[str, str], list[float]],
    peaks: dict[tuple[str, str], int],
    shares: dict[str, dict[str, float]],
    tool: str,
    runs: int,
    where: str,
) -> str:
    med = {k: statistics.median(v) for k, v in times.items()}
    # Each distribution's part of the whole-corpus audit (see the module docstring).
    inside = {
        (d.name, mode): med[TOTAL, mode] * shares[mode].get(d.name, 0.0)
        for d in dists
        for mode in (LISTING, NAMES)
    }
    total_mb = sum(d.size for d in dists) / 1e6
    device = sum(len(d.device) for d in dists)
    lines = [
        "# The corpus: cuda-gate inspect vs cuobjdump loops over real CUDA wheels",
        "",
        f"Machine: {where}. cuobjdump: {cuobjdump.version(tool)}.",
        f"Medians of {runs} interleaved rounds (`python benchmarks/bench_corpus.py`, or",
        "`nox -s bench -- --corpus`). cuda-gate audits each installed distribution",
        "(`inspect ENV`, `inspect --names --no-cache ENV`) and the whole corpus in one",
        "process; cuobjdump runs once per file with device code, one after the other.",
        '"In the audit": a distribution\'s part of the whole-corpus run (the median whole',
        "time times its files' share of the read time, measured in a run of its own).",
        (
            f"Inputs: {len(dists)} distributions, {sum(d.files for d in dists)} files, "
            f"{total_mb:.0f} MB installed, {device} files with device code."
        ),
        "",
        (
            "| distribution | files (device code) | MB | listing s | `--list-elf` loop s | x "
            "| in the audit s (x) | names s | `-symbols` loop s | x | in the audit s (x) |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, files, mb in [(d.name, f"{d.files} ({len(d.device)})", f"{d.size / 1e6:.0f}")
                            for d in dists] + [(TOTAL, "", f"{total_mb:.0f}")]:  # fmt: skip
        listing, elf = med[name, LISTING], med[name, LIST_ELF]
        names, sym = med[name, NAMES], med[name, SYMBOLS]
        part_l = _part(inside.get((name, LISTING)), elf)
        part_n = _part(inside.get((name, NAMES)), sym)
        lines.append(
            f"| {name} | {files} | {mb} | {listing:.3f} | {elf:.3f} | {elf / listing:.1f} "
            f"| {part_l} | {names:.3f} | {sym:.3f} | {sym / names:.2f} | {part_n} |"
        )
    listing_x = med[TOTAL, LIST_ELF] / med[TOTAL, LISTING]
    names_x = med[TOTAL, SYMBOLS] / med[TOTAL, NAMES]
    pairs = ((LISTING, LIST_ELF), (NAMES, SYMBOLS))
    slower = [
        f"{d.name} ({mode})"
        for d in dists
        for mode, theirs in pairs
        if d.device and med[d.name, mode] > med[d.name, theirs]
    ]
    start = {mode: med[FLOOR, mode] for mode in (LISTING, NAMES)}
    slower_past_start = [
        f"{d.name} ({mode})"
        for d in dists
        for mode, theirs in pairs
        if d.device and med[d.name, mode] - start[mode] > med[d.name, theirs]
    ]
    slower_inside = [
        f"{d.name} ({mode})"
        for d in dists
        for mode, theirs in pairs
        if d.device and inside[d.name, mode] > med[d.name, theirs]
    ]
    warm = med[TOTAL, WARM]
    met = bench_inspect._met
    lines += [
        "",
        (
            f"- listing, whole environment: {listing_x:.1f}x the `--list-elf` loop "
            f"(target >= 20x: {met(listing_x >= 20)})"
        ),
        (
            f"- names, whole environment: {names_x:.2f}x the `-symbols` loop "
            f"(target >= 3x: {met(names_x >= 3)})"
        ),
        "- no distribution (with device code) slower than cuobjdump in either mode, each "
        "audited by a process of its own: "
        + (met(True) if not slower else f"{met(False)} ({', '.join(slower)})"),
        "- the same, each in a process of its own less the gate's start-up "
        f"({start[LISTING]:.3f} s listing, {start[NAMES]:.3f} s names: the audit of one "
        "distribution of one Python file): "
        + (
            met(True) if not slower_past_start else f"{met(False)} ({', '.join(slower_past_start)})"
        ),
        "- the same, each distribution's part of the whole-corpus audit: "
        + (met(True) if not slower_inside else f"{met(False)} ({', '.join(slower_inside)})"),
        (
            f"- warm re-audit of the whole environment from the inspection cache: {warm:.3f} s "
            f"(target <= 2 s: {met(warm <= 2)})"
        ),
        (
            f"- peak RSS of the whole-corpus names audit's main process: "
            f"{peaks[TOTAL, NAMES] / 1024:.0f} MB (each worker's own is not counted here; "
            "memory per library and wheel against cuobjdump: bench_memory.py below)"
        ),
    ]
    return "\n".join(lines)


def _part(seconds: float | None, theirs: float) -> str:
    """``0.012 (8.3x)``: a distribution's part of the audit and cuobjdump's loop over it."""
    if seconds is None:
        return ""
    ratio = f"{theirs / seconds:.1f}x" if seconds > 0 else "-"
    return f"{seconds:.3f} ({ratio})"


if __name__ == "__main__":
    raise SystemExit(main())
