"""The gate's own work kept per toolchain (gate.tools.buildcache) and loaded libraries remembered
by identity (gate.scan.cache.loaded_library): reused only when nothing it depends on
changed, rebuilt on any doubt, never written with --no-cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gate import proc
from gate.scan.cache import loaded_library, settled
from gate.tools import buildcache
from tests.work import wait_for

GOLDEN = Path(__file__).resolve().parent / "golden" / "libkernels.so"


@pytest.fixture
def fake_nvcc(tmp_path: Path) -> Path:
    """An "nvcc" that writes its input, upper-cased, to the -o file and counts its calls."""
    tool = tmp_path / "bin" / "nvcc"
    tool.parent.mkdir()
    tool.write_text(
        '#!/bin/sh\necho run >> "$(dirname "$0")/calls"\n'
        'out=""; src=""\nwhile [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift;; *.cu) src="$1";;'
        " esac; shift; done\n"
        'tr a-z A-Z < "$src" > "$out"; echo compiled; echo "a warning" >&2\n',
        encoding="utf-8",
    )
    tool.chmod(0o755)
    return tool


def calls(nvcc: Path) -> int:
    counter = nvcc.parent / "calls"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def build(
    nvcc: Path, work: Path, cache: Path, *, flag: str = "-O2", use: bool = True
) -> proc.Result:
    source, output = work / "smoke.cu", work / "smoke"
    return buildcache.compile_program(
        [str(nvcc), flag, str(source), "-o", str(output)],
        output=output,
        inputs=[source],
        cwd=work,
        timeout=60,
        use_cache=use,
        folder=cache,
    )


@pytest.mark.integration
def test_an_identical_build_is_reused_and_says_so(tmp_path: Path, fake_nvcc: Path) -> None:
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    (work / "smoke.cu").write_text("kernel\n", encoding="utf-8")
    first = build(fake_nvcc, work, cache)
    assert first.ok
    assert first.reused is None
    (work / "smoke").unlink()
    second = build(fake_nvcc, work, cache)
    assert calls(fake_nvcc) == 1
    assert second.reused is not None
    assert (second.stdout, second.stderr) == ("compiled\n", "a warning\n")
    assert (work / "smoke").read_text() == "KERNEL\n"
    assert os.access(work / "smoke", os.X_OK)


@pytest.mark.integration
def test_a_change_to_source_options_or_toolchain_rebuilds(tmp_path: Path, fake_nvcc: Path) -> None:
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    source = work / "smoke.cu"
    source.write_text("one\n", encoding="utf-8")
    build(fake_nvcc, work, cache)
    source.write_text("two\n", encoding="utf-8")
    assert build(fake_nvcc, work, cache).reused is None
    assert (work / "smoke").read_text() == "TWO\n"
    assert build(fake_nvcc, work, cache, flag="-O3").reused is None
    stat = fake_nvcc.stat()
    os.utime(fake_nvcc, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # reinstalled
    assert build(fake_nvcc, work, cache).reused is None
    assert calls(fake_nvcc) == 4
    assert build(fake_nvcc, work, cache).reused is not None


@pytest.mark.integration
def test_a_damaged_entry_is_rebuilt_and_written_again(tmp_path: Path, fake_nvcc: Path) -> None:
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    (work / "smoke.cu").write_text("k\n", encoding="utf-8")
    build(fake_nvcc, work, cache)
    (program,) = cache.glob("builds/*/*/program")
    program.write_bytes(b"tampered")
    again = build(fake_nvcc, work, cache)
    assert again.reused is None
    assert (work / "smoke").read_text() == "K\n"
    (meta,) = cache.glob("builds/*/*/meta.json")
    meta.write_text("{not json", encoding="utf-8")
    assert build(fake_nvcc, work, cache).reused is None
    assert build(fake_nvcc, work, cache).reused is not None
    assert calls(fake_nvcc) == 3


@pytest.mark.integration
def test_no_cache_compiles_and_writes_nothing(tmp_path: Path, fake_nvcc: Path) -> None:
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    (work / "smoke.cu").write_text("k\n", encoding="utf-8")
    build(fake_nvcc, work, cache, use=False)
    build(fake_nvcc, work, cache, use=False)
    assert calls(fake_nvcc) == 2
    assert not cache.exists()


@pytest.mark.integration
def test_a_failed_build_is_never_kept(tmp_path: Path, fake_nvcc: Path) -> None:
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    (work / "smoke.cu").write_text("k\n", encoding="utf-8")
    fake_nvcc.write_text("#!/bin/sh\necho 'error: no' >&2\nexit 2\n", encoding="utf-8")
    assert not build(fake_nvcc, work, cache).ok
    assert not list(cache.glob("builds/*/*/program"))


@pytest.mark.unit
def test_a_tool_output_is_kept_by_the_file_digest(tmp_path: Path) -> None:
    subject = tmp_path / "lib.so"
    subject.write_bytes(b"bytes")
    asked: list[int] = []

    def run() -> proc.Result:
        asked.append(1)
        return proc.Result(("cuobjdump",), 0, "ELF file 1: lib.1.sm_90.cubin\n", "", 0.2)

    def ask(digest: str, args: str = "--list-elf", use: bool = True) -> proc.Result:
        return buildcache.tool_output(
            ["true", args, str(subject)],
            subject=subject,
            digest=digest,
            run=run,
            use_cache=use,
            folder=tmp_path / "cache",
        )

    assert ask("aa").reused is None
    kept = ask("aa")
    assert kept.reused is not None
    assert kept.stdout == "ELF file 1: lib.1.sm_90.cubin\n"
    assert ask("bb").reused is None  # other bytes
    assert ask("aa", "--list-ptx").reused is None  # other options
    assert ask("aa", use=False).reused is None
    assert len(asked) == 4


@pytest.mark.unit
def test_a_loaded_library_is_remembered_until_the_file_changes(tmp_path: Path) -> None:
    lib = tmp_path / "libkernels.so"
    shutil.copyfile(GOLDEN, lib)
    cache = tmp_path / "cache"
    report, digest = loaded_library(lib, folder=cache)
    assert digest is not None
    assert report.listing.entries
    # Written just now, its times may not move at its next write: not remembered yet.
    assert not list(cache.glob("loaded/*/*.json"))
    wait_for(lambda: settled(lib.stat()), f"{lib} settled (RACY_NS after it was written)")
    assert loaded_library(lib, folder=cache) == (report, digest)
    (entry,) = cache.glob("loaded/*/*.json")
    again, same = loaded_library(lib, folder=cache)
    assert (same, again.listing) == (digest, report.listing)
    # Remembered, not re-read: a forged entry for this identity would be believed ...
    text = entry.read_text(encoding="utf-8")
    entry.write_text(text.replace(digest, "f" * 64), encoding="utf-8")
    assert loaded_library(lib, folder=cache)[1] == "f" * 64
    # ... but any write to the file changes its identity, and it is read again.
    data = lib.read_bytes()
    lib.write_bytes(data)
    assert loaded_library(lib, folder=cache)[1] == digest
    assert loaded_library(lib, folder=cache, use_cache=False)[1] == digest


@pytest.mark.unit
def test_a_library_without_device_code_is_not_hashed(tmp_path: Path) -> None:
    plain = Path(sys.executable).resolve()
    report, digest = loaded_library(plain, folder=tmp_path / "cache")
    assert digest is None
    assert not report.listing.entries
    assert loaded_library(plain, folder=tmp_path / "cache")[1] is None


@pytest.mark.integration
def test_commands_run_side_by_side_never_take_each_other_for_strays(tmp_path: Path) -> None:
    results: dict[str, proc.Result] = {}

    def one(name: str, argv: list[str]) -> None:
        results[name] = proc.run(argv, timeout=30)

    # The quick ones look for strays when they end, while the slow one (started after
    # they took their "before" snapshot) still runs: it is not theirs to kill.
    quick = [
        threading.Thread(target=one, args=(f"quick{i}", ["sh", "-c", "sleep 0.4"]))
        for i in range(4)
    ]
    for t in quick:
        t.start()
    time.sleep(0.1)
    slow = threading.Thread(target=one, args=("slow", ["sh", "-c", "sleep 1.2; echo done"]))
    slow.start()
    for t in [*quick, slow]:
        t.join()
    assert results["slow"].ok, results["slow"]
    assert results["slow"].stdout == "done\n"
    assert all(not r.strays for r in results.values()), results


@pytest.mark.integration
def test_a_second_run_reuses_the_probe_and_smoke_builds(tmp_path: Path) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    env = {**os.environ, "CUDA_GATE_CACHE_DIR": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store", "-v"]

    def gate(*extra: str) -> str:
        done = subprocess.run(
            [*argv, "--evidence", "ev", *extra],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert "build smoke" in done.stdout, done.stdout + done.stderr
        return (tmp_path / "ev" / "build.log").read_text(encoding="utf-8")

    assert "reused" not in gate()
    log = gate()
    assert "# reused: the same toolchain built this" in log
    assert (tmp_path / "ev" / "sass.txt").read_text(encoding="utf-8").strip()  # cuobjdump kept
    assert "reused" not in gate("--no-cache")


@pytest.mark.unit
def test_kept_outputs_stay_within_their_budget_least_recently_used_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subject = tmp_path / "lib.so"
    subject.write_bytes(b"bytes")
    cache = tmp_path / "cache"

    def ask(digest: str) -> proc.Result:
        return buildcache.tool_output(
            ["true", "-symbols", str(subject)],
            subject=subject,
            digest=digest,
            run=lambda: proc.Result(("cuobjdump",), 0, digest * 1000, "", 0.1),
            folder=cache,
        )

    def kept() -> dict[str, Path]:
        found = cache.glob("outputs/*/*.json")
        return {json.loads(p.read_text())["stdout"][0]: p for p in found}

    ask("a")
    ask("b")
    size = max(p.stat().st_size for p in kept().values())
    monkeypatch.setattr(buildcache, "KEPT_OUTPUTS_TOTAL", 2 * size + size // 2)
    now = time.time()
    for age, digest in ((100, "a"), (50, "b")):
        os.utime(kept()[digest], (now - age, now - age))
    assert ask("a").reused  # used now: b is the least recently used
    ask("c")
    assert sorted(kept()) == ["a", "c"]
