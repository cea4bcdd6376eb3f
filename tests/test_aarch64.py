"""On the DGX Spark's own host shape (issue 40): an aarch64 machine, sm_121 (and Jetson's
sm_110 and sm_87), a CUDA toolkit from NVIDIA's wheels alone.

These run on an aarch64 host only: ``nox -s aarch64`` runs them in an arm64 Debian chroot
under qemu-user on an x86-64 machine (docs/development.md, "The aarch64 tier"), and natively
on GitHub's arm64 runners (the ``aarch64`` job of .github/workflows/ci.yml). Elsewhere each
skips saying so. The tier installs the ``toolkit`` extra: no nvcc is on PATH there, so the
gate must find the wheels' own, and link from their ``lib/`` folder.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gate.errors import ExitCode
from gate.launch import recorder
from gate.reader.hostelf import read_format
from gate.reader.read import read_artifact
from gate.system import machine
from tests.pypi_wheels import Wheel, fetch, folder

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        platform.machine() != "aarch64",
        reason="an aarch64 host only: nox -s aarch64 runs these (under qemu on x86-64)",
    ),
]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "dlopen-kernels"
SOURCE = "__global__ void scale(float *x) { x[threadIdx.x] *= 2; }\nint main() { return 0; }\n"
CONFIG = """\
[[build]]
name = "app"
command = ["{nvcc}", "{gencode}", "k.cu", "-o", "app"]

[[artifact]]
path = "app"
"""
# CUPTI 13.0 for aarch64: the recorder builds against it; libcupti carries sm_121 SASS.
CUPTI = Wheel("nvidia-cuda-cupti==13.0.85", "nvidia_cuda_cupti-13.0.85-*_aarch64.whl", "aarch64")


def _environ() -> dict[str, str]:
    """This environment less any nvcc a user named: the gate must find the wheels' own."""
    drop = ("CUDA_GATE_NVCC", "CUDA_HOME", "CUDA_PATH", "LIBRARY_PATH", "COLUMNS", "NO_COLOR")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gate", *args],
        cwd=cwd, env=_environ(), capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip


def _summary(project: Path, evidence: str = "gate-evidence") -> str:
    return (project / evidence / "summary.md").read_text(encoding="utf-8")


def test_the_host_is_aarch64_and_no_toolkit_is_installed() -> None:
    assert machine.host_arch() == "aarch64"
    # The interpreter's own ELF, read by the gate's reader: EM_AARCH64.
    own = read_format(Path(sys.executable).resolve())
    assert own.matches_host("aarch64"), own.machine_text
    assert shutil.which("nvcc", path=_environ().get("PATH", "")) is None, (
        "an nvcc is on PATH: the tier proves the wheel toolkit alone"
    )
    found = machine.nvcc_path()
    assert "/nvidia/cu13/bin/nvcc" in found, found


@pytest.mark.parametrize("target", ["sm_121", "sm_110", "sm_87"])
def test_the_static_gate_passes_with_the_wheel_toolkit_alone(tmp_path: Path, target: str) -> None:
    (tmp_path / "k.cu").write_text(SOURCE, encoding="utf-8")
    (tmp_path / "cuda-gate.toml").write_text(CONFIG, encoding="utf-8")
    done = _gate(tmp_path, "run", "--target", target, "--no-store")
    out = done.stdout + done.stderr
    # Every static check passed; nothing ran (no device): exit 4, not 1.
    assert done.returncode == ExitCode.NO_DEVICE, out
    summary = _summary(tmp_path)
    assert "| FAIL |" not in summary, summary
    assert "from NVIDIA's wheels at " in summary
    assert "| app: host ELF machine | ARM aarch64 matches aarch64" in summary, summary
    ptx = target.replace("sm_", "compute_")
    assert f"SASS for {target} present" in summary
    assert f"PTX for {ptx} present" in summary


def test_the_example_passes_its_static_checks_for_the_spark(tmp_path: Path) -> None:
    if shutil.which("cmake") is None:
        pytest.fail("cmake is needed (the tier's rootfs and GitHub's runners have it)")
    project = tmp_path / "dlopen-kernels"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build*", "gate-*"))
    done = _gate(project, "run", "--target", "sm_121", "--no-store")
    out = done.stdout + done.stderr
    assert done.returncode == ExitCode.NO_DEVICE, out
    summary = _summary(project)
    assert "| FAIL |" not in summary, summary
    assert "matches aarch64" in summary


def test_an_aarch64_wheel_is_read_and_runs_natively_on_the_spark(tmp_path: Path) -> None:
    wheel = fetch(CUPTI, folder())
    done = _gate(tmp_path, "inspect", str(wheel), "--device", "12.1")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    [row] = [line for line in done.stdout.splitlines() if line.startswith("nvidia-cuda-cupti ")]
    assert "native: exact SASS (sm_121)" in row, out


def test_the_launch_recorder_builds_against_the_aarch64_cupti_wheel(tmp_path: Path) -> None:
    nvcc = machine.nvcc_path()
    built = recorder.build(nvcc, tmp_path / "work", use_cache=False)
    assert built.library is not None, built.note
    # The CUPTI wheel unpacks into nvidia/cu13 beside the toolkit wheels: the toolkit's.
    assert built.cupti is not None
    assert "/nvidia/cu13/" in str(built.cupti)
    assert read_format(built.library).matches_host("aarch64")
    assert read_artifact(built.library).listing.entries == ()  # no device code of its own
