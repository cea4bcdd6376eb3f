"""What `cuda-gate run` prints by default, on a real project (examples/dlopen-kernels, CMake):
short when nothing is wrong, each cause once with what to do next when something is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dlopen-kernels"


def gate(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("cmake") is None:
        pytest.fail("cmake is needed (the CI machine has it)")
    copy = tmp_path_factory.mktemp("example") / "dlopen-kernels"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("build*", "gate-*"))
    return copy


def said(done: subprocess.CompletedProcess[str]) -> list[str]:
    """stdout and stderr as a terminal shows them, in order enough for counting."""
    return done.stderr.splitlines() + done.stdout.splitlines()


def test_a_clean_static_run_prints_a_short_report(project: Path) -> None:
    done = gate(project)
    assert done.returncode == 4, done.stdout + done.stderr  # clean, but never run on a device
    lines = said(done)
    assert len(lines) <= 25, "\n".join(lines)
    assert not [line for line in lines if line.startswith(("PASS", "SKIP"))]
    [count] = [line for line in lines if " passed" in line and "," in line]
    assert count.endswith("skipped")
    assert [line for line in lines if line.startswith("Verdict:")] == [
        "Verdict: not accepted: execution not verified (no CUDA device; see the probe stage)"
    ]
    assert lines[-1].startswith("Evidence: gate-evidence/ (")
    # -v lists every check, as summary.md always does.
    every = gate(project, "-v", "--evidence", "ev-v")
    assert len([line for line in every.stdout.splitlines() if line.startswith("PASS")]) > 20


def test_a_dropped_arch_names_each_cause_once_and_what_to_do(project: Path) -> None:
    done = gate(project, "--config", "cuda-gate-drop-arch.toml", "--evidence", "ev-drop")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    fails = [line.split(None, 2)[2] for line in out.splitlines() if line.startswith("FAIL")]
    assert [f.split("  ")[0] for f in fails] == [
        "libkernels.so: SASS for sm_90",
        "libkernels.so: PTX for compute_90",
    ]
    steps = out.split("What to do next:\n", 1)[1].split("\n\n", 1)[0]
    assert " ".join(steps.split()) == (
        "- add 90 (SASS and PTX) to CMAKE_CUDA_ARCHITECTURES "
        '(e.g. -DCMAKE_CUDA_ARCHITECTURES="90"), rebuild, and check the final link keeps it'
    )
    assert out.count("Verdict:") == 1
    assert "no SASS for sm_90" not in done.stderr  # said once, on stdout
    summary = (project / "ev-drop" / "summary.md").read_text(encoding="utf-8")
    assert "### What to do next" in summary
    assert "| PASS |" in summary  # the summary keeps every row
