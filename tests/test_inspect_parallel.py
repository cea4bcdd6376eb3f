"""Names read by a pool of processes, and the warm path: files known by their identity.

The pool must give what a serial read gives, in the same order; files and wheels the
inspection cache knows (unchanged since read) must come from it without a worker and
without being read; a changed file must be read again. Integration: the pool forks.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from gate.reader import artifacts
from gate.reader.limits import Limits
from gate.reader.read import ArtifactReport
from gate.scan import parallel
from gate.scan.audit import audit_paths
from gate.scan.cache import RACY_NS
from gate.scan.walk import read_paths

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Libraries, an archive, a cubin, a fatbin, a wheel of two libraries, a broken ELF."""
    root = tmp_path / "tree"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    for name in ("libkernels.so", "libkernels.a", "sm_90a.cubin", "debug.fatbin", "multi.o"):
        shutil.copy(GOLDEN / name, root / "a" / name)
    shutil.copy(GOLDEN / "libkernels.so", root / "b" / "libcopy.so")
    (root / "b" / "broken.so").write_bytes(b"\x7fELF" + b"\x00" * 60)
    with zipfile.ZipFile(root / "k-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
        z.write(GOLDEN / "libkernels.so", "k/libone.so")
        z.write(GOLDEN / "sm_90a.cubin", "k/kern.cubin")
        z.writestr("k-1.0.dist-info/METADATA", "Name: k\nVersion: 1.0\n")
    settle()
    return root


def settle() -> None:
    """Wait until what was just written may be known by its identity (files changed
    within RACY_NS of a read are read again next time)."""
    time.sleep(RACY_NS / 1e9 + 0.05)


def _read(root: Path, *, cache: bool = False) -> tuple[list[ArtifactReport], int]:
    """Every report under ``root`` in names mode, and how many times the pool was seen."""
    pooled = 0

    def progress(_done: int, _total: int, _name: str) -> None:
        nonlocal pooled
        pooled += bool(multiprocessing.active_children())

    reports = list(read_paths([root], names=True, cache=cache, progress=progress))
    return reports, pooled


def test_the_pool_reads_what_a_serial_read_does_in_the_same_order(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serial, pooled = _read(tree)
    assert pooled == 0  # a few kB: read in this process
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "SMALL_FILE", 0)
    both, pooled = _read(tree)
    assert pooled > 0
    assert both == serial
    # The folder's own files first (a wheel's members in the zip's order), then its
    # folders, each sorted (as discover walks).
    assert [r.path.removeprefix(f"{tree}/") for r in serial] == [
        "k-1.0-py3-none-any.whl!k/libone.so", "k-1.0-py3-none-any.whl!k/kern.cubin",
        "a/debug.fatbin", "a/libkernels.a(lto.o)", "a/libkernels.so", "a/multi.o",
        "a/sm_90a.cubin", "b/broken.so", "b/libcopy.so",
    ]  # fmt: skip
    assert [r.error is not None for r in serial].count(True) == 1  # broken.so, in its place
    assert any(r.listing.kernels() for r in serial)


def _poison(folder: Path) -> int:
    """Rename every kernel in every cached report to ``_Z6cachedv``: a report that says
    so afterwards came from the cache, not from reading the file."""
    changed = 0
    for entry in folder.rglob("*.names.json"):
        doc = json.loads(entry.read_text())
        reports = [r for _, r in doc["members"]] if "members" in doc else [doc["report"]]
        for report in reports:  # kernels are named by index into kernel_names
            report["kernel_names"] = ["_Z6cachedv"] * len(report["kernel_names"])
        entry.write_text(json.dumps(doc))
        changed += 1
    return changed


def test_a_warm_read_takes_every_report_from_the_cache_without_a_worker(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CUDA_GATE_CACHE_DIR", str(folder))
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "SMALL_FILE", 0)
    (tree / "b" / "broken.so").unlink()  # never cached (an error): it would be read again
    cold, pooled = _read(tree, cache=True)
    assert pooled > 0  # the workers wrote the cache
    assert (folder / "files").is_dir()
    assert (folder / "wheels").is_dir()
    # 4 distinct files (libcopy.so holds libkernels.so's bytes) and the wheel; archives
    # are not cached.
    assert _poison(folder) == 5
    warm, pooled = _read(tree, cache=True)
    assert pooled == 0  # left to read: the archive alone, in this process
    assert [r.path for r in warm] == [r.path for r in cold]
    for before, after in zip(cold, warm, strict=True):
        if "libkernels.a(" in before.path:  # read again
            assert after == before
        elif before.listing.kernels():
            assert set(after.listing.kernels()) == {"_Z6cachedv"}, after.path


def test_a_changed_file_or_wheel_is_read_again(tree: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    found = list(artifacts.discover([tree]))

    def each() -> list[tuple[ArtifactReport, ...]]:
        limits = Limits.from_env()
        return list(parallel.read_each(found, names=True, scan=True, limits=limits, cache=True))

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDA_GATE_CACHE_DIR", str(folder))
        each()
        _poison(folder)
        lib, wheel = tree / "a" / "libkernels.so", tree / "k-1.0-py3-none-any.whl"
        with lib.open("ab") as f:
            f.write(b"\0")  # trailing bytes: a new hash, the same device code
        with zipfile.ZipFile(wheel, "a") as z:
            z.writestr("k/README", "changed\n")
        reports = {r.path: r for rs in each() for r in rs}
    assert "_Z6cachedv" not in reports[str(lib)].listing.kernels()
    assert reports[str(lib)].listing.kernels()
    member = reports[f"{wheel}!k/libone.so"]
    assert "_Z6cachedv" not in member.listing.kernels()
    assert set(reports[str(tree / "b" / "libcopy.so")].listing.kernels()) == {"_Z6cachedv"}


def test_an_audit_of_a_wheel_folder_is_the_same_warm_or_cold(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in ("k-1.0-py3-none-any.whl",):
        shutil.copy(tree / name, wheels / name)
    with zipfile.ZipFile(wheels / "j-2.0-py3-none-any.whl", "w") as z:
        z.write(GOLDEN / "libkernels.so", "j/libj.so")
        z.writestr("j-2.0.dist-info/METADATA", "Name: j\nVersion: 2.0\n")
    monkeypatch.setenv("CUDA_GATE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "SMALL_FILE", 0)
    cold = audit_paths([wheels], names=True, cache=True)
    warm = audit_paths([wheels], names=True, cache=True)
    assert [g.distribution.name for g in cold.groups] == ["j", "k"]
    assert warm == cold
    assert cold == audit_paths([wheels], names=True, cache=False)


def test_small_files_read_here_while_the_pool_reads_the_large(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each file under SMALL_FILE is read in this process, the others by the pool, at the
    # same time: what comes back is still the serial read, in its order.
    serial, _ = _read(tree)
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "SMALL_FILE", (GOLDEN / "libkernels.so").stat().st_size)
    mixed, pooled = _read(tree)
    assert pooled > 0
    assert mixed == serial
