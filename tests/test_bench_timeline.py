"""benchmarks/timeline.py marks a names read where it passes, and benchmarks/forked_check.py
tells a forked read from a threaded one: both run on the GPU machine's libraries in one
device call, so a renamed reader function must fail here, not there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_entry_memory import lz4_ptx_container

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"
TIMELINE = ROOT / "benchmarks" / "timeline.py"
FORKED_CHECK = ROOT / "benchmarks" / "forked_check.py"
# Entries and their decoded size: over decoding.PARALLEL_MIN entries averaging over
# decoding.PARALLEL_MEAN_BYTES, so that a read on 8 or more cores forks its decoders.
ENTRIES = 24
PADDING = 12_000  # lines of "// padding": 132 kB a text, a few hundred bytes in LZ4

FORKED_MARKS = [
    "interpreter up",
    "gate.cli imported",
    "inspect starts",
    "artifact read starts",
    "forking decoders",
    "decoders forked",
    "walk done, results asked",
    "first result back",
    "last result back",
    "decoders shut down",
    "decoders reaped",
    "artifact read done",
    "exit",
]


def _ptx_fatbin(path: Path) -> None:
    """A fatbin of ENTRIES distinct PTX texts, kernel ``k<i>`` each, LZ4-compressed."""
    texts = [
        (
            f".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry k{i}()\n"
            "{\n ret;\n}\n"
        ).encode()
        + b"// padding\n" * PADDING
        for i in range(ENTRIES)
    ]
    path.write_bytes(lz4_ptx_container(texts))


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUDA_GATE_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("T0", None)
    return subprocess.run(
        [sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip


def _marks(stderr: str) -> list[tuple[str, float]]:
    """The marks timeline.py printed: (what, wall seconds), in order."""
    marks = []
    for line in stderr.splitlines():
        wall, _cpu, what = line.split(maxsplit=2)
        marks.append((what, float(wall)))
    return marks


def test_the_timeline_marks_every_step_of_a_forked_names_read_in_order(tmp_path: Path) -> None:
    file = tmp_path / "ptx.fatbin"
    _ptx_fatbin(file)
    names = ["inspect", "--no-detect", "--names", "--no-cache", str(file)]
    done = _run(tmp_path, str(TIMELINE), "--cpus", "16", *names)
    assert done.returncode == 0, done.stderr
    assert f"{ENTRIES} PTX, 0 LTO IR, {ENTRIES} kernels" in done.stdout  # the command's own
    marks = _marks(done.stderr)
    assert [what for what, _ in marks] == FORKED_MARKS
    walls = [wall for _, wall in marks]
    assert walls == sorted(walls)
    # Two cores made to appear: the same read on threads, nothing forked.
    done = _run(tmp_path, str(TIMELINE), "--cpus", "2", *names)
    assert done.returncode == 0, done.stderr
    threaded = [what for what, _ in _marks(done.stderr)]
    assert threaded == [m for m in FORKED_MARKS if "decoders" not in m]
    # A core count that is not one: one line, exit 2, no read.
    for bad in (["--cpus"], ["--cpus", "x", *names], ["--cpus", "0", *names]):
        done = _run(tmp_path, str(TIMELINE), *bad)
        assert done.returncode == 2
        assert done.stderr.strip() == (
            "timeline.py: error: --cpus wants a whole number of cores, 1 or more"
        )


def test_the_forked_check_passes_a_forked_read_and_fails_one_that_forked_nothing(
    tmp_path: Path,
) -> None:
    file = tmp_path / "ptx.fatbin"
    _ptx_fatbin(file)
    done = _run(tmp_path, str(FORKED_CHECK), str(file))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ptx.fatbin" in done.stdout
    assert ": identical" in done.stdout
    assert "processes left behind: 0" in done.stdout
    # One cubin: nothing worth forking for, so the check has not checked the forked path.
    done = _run(tmp_path, str(FORKED_CHECK), str(GOLDEN / "sm_90a.cubin"))
    assert done.returncode == 1
    assert "the first read forked no decoders" in done.stdout
    # Two reads failing alike (the gate's JSON error document) are not a pass.
    done = _run(tmp_path, str(FORKED_CHECK), str(tmp_path / "missing.so"))
    assert done.returncode == 1
    assert "a read failed" in done.stdout
