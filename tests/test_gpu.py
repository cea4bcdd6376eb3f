"""The gpu tier: the gate on a real device, for each way a build can be wrong.

Runs wherever a CUDA device is visible (our H200, users' self-hosted runners); the
conftest skips it elsewhere with nvidia-smi's own reason. The target is detected,
never assumed, so the same tests hold on a GB10 or a Thor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from gate.config import EntryPoint
from gate.rules.causes import ExecPath
from gate.rules.require import Requirement
from gate.rules.targets import Capability
from gate.stages.runs import run_entry_point

pytestmark = pytest.mark.gpu

ACCEPTED = "Passed with the current driver, current artifacts, and tested entry points."
EVIDENCE_SETS = {
    "host, driver, toolkit, build commands": (
        "host-arch.txt",
        "driver.txt",
        "toolkit.txt",
        "commands.txt",
    ),
    "capability and SASS/PTX inspection": (
        "compute-capability.txt",
        "elf-list.txt",
        "sass.txt",
        "ptx.txt",
    ),
    "exit codes and logs of both paths": ("execution-status.txt", "native.log", "ptx-jit.log"),
    "revision, hashes, dependencies": ("sha256.txt", "dependencies.txt", "result.json"),
}


def gate(
    tmp_path: Path, name: str, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    ev = tmp_path / name
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gate",
            "run",
            "--evidence",
            str(ev),
            "--build-dir",
            str(tmp_path / f"{name}-build"),
            *args,
        ],
        cwd=tmp_path,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    result = json.loads((ev / "result.json").read_text(encoding="utf-8"))
    return done, result, ev


def by_path(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["path"]: e for e in result["executions"]}


@pytest.fixture(scope="module")
def target() -> str:
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    )
    major, minor = smi.stdout.split()[0].split(".")
    return f"{major}{minor}"


def test_sass_and_ptx_build_passes_both_paths(tmp_path: Path, target: str) -> None:
    done, result, ev = gate(tmp_path, "full")
    assert done.returncode == 0, done.stdout + done.stderr
    assert result["verdict"]["statement"] == ACCEPTED
    assert result["device"]["target"] == f"sm_{target}"
    assert {p: e["passed"] for p, e in by_path(result).items()} == {"native": True, "jit": True}
    for label, files in EVIDENCE_SETS.items():
        for name in files:
            assert (ev / name).is_file(), (label, name)
            assert (ev / name).stat().st_size > 0, (label, name)
    assert (ev / "execution-status.txt").read_text(encoding="utf-8") == "native=0\nptx_jit=0\n"
    assert "PASS" in (ev / "native.log").read_text(encoding="utf-8")
    root = ET.parse(ev / "junit.xml").getroot()  # noqa: S314
    assert all(c.find("failure") is None for c in root.iter("testcase"))
    print(f"\nsummary table (full build):\n{done.stdout}")


def test_ptx_only_fails_native_even_with_a_warm_cache_and_passes_jit(
    tmp_path: Path, target: str
) -> None:
    done, result, _ = gate(tmp_path, "ptx", "--sass", "--ptx", f"compute_{target}")
    runs = by_path(result)
    assert (runs["native"]["passed"], runs["jit"]["passed"]) == (False, True)
    assert runs["native"]["failure"] == "PTX JIT compilation was disabled"
    assert done.returncode == 1
    assert any(
        "revisit the native target and the final link step" in d
        for d in (x["text"] for x in result["diagnoses"])
    )
    # The headline is the cause (no SASS for the device), not the first failing row.
    cap = f"{target[:-1]}.{target[-1]}"
    needs = " or ".join(
        str(t) for t in Requirement.of_device(Capability.parse(cap)).accepted(ptx=False)
    )
    headline = (
        f"smoke: SASS for device {cap}: no SASS for device {cap} (needs {needs}); "
        "SASS targets: none"
    )
    assert result["verdict"]["statement"] == f"not accepted: {headline}"
    assert f"Verdict: not accepted: {headline}" in done.stdout.splitlines()
    print(f"\nheadline (PTX-only build): {headline}")
    # Warm a cache with the same artifact, as a user's default cache would be after one
    # normal run; the gate's native run must still fail.
    binary = tmp_path / "ptx-build" / "smoke"
    warm = tmp_path / "warm-cache"
    normal = subprocess.run(
        [str(binary)],
        env={**os.environ, "CUDA_CACHE_PATH": str(warm)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert normal.returncode == 0, normal.stderr
    assert "PASS" in normal.stdout
    assert any(warm.rglob("*")), "the driver did not populate the JIT cache"
    done, result, _ = gate(
        tmp_path,
        "ptx-warm",
        "--sass",
        "--ptx",
        f"compute_{target}",
        env={"CUDA_CACHE_PATH": str(warm)},
    )
    assert by_path(result)["native"]["passed"] is False
    assert not result["verdict"]["accepted"]
    # The gate's runner isolates the cache even when called on a binary directly.
    native = run_entry_point(EntryPoint("smoke", (str(binary),)), ExecPath.NATIVE)
    assert not native.passed


def test_sass_only_passes_native_and_fails_jit(tmp_path: Path, target: str) -> None:
    done, result, _ = gate(tmp_path, "sass", "--sass", f"sm_{target}", "--ptx")
    runs = by_path(result)
    assert (runs["native"]["passed"], runs["jit"]["passed"]) == (True, False)
    assert runs["jit"]["failure"] == "no kernel image is available for execution on the device"
    assert done.returncode == 1
    assert any("check that PTX is present" in d for d in (x["text"] for x in result["diagnoses"]))
    assert result["verdict"]["cause"] == "missing-ptx"
    predicted = [c for c in result["checks"] if c["classname"] == "gate.predict"]
    assert predicted
    assert all(c["state"] == "passed" for c in predicted)


def test_foreign_target_fails_both_paths_with_no_kernel_image(tmp_path: Path, target: str) -> None:
    foreign = "sm_120" if target != "120" else "sm_90"
    done, result, _ = gate(tmp_path, "foreign", "--target", foreign)
    runs = by_path(result)
    assert (runs["native"]["passed"], runs["jit"]["passed"]) == (False, False)
    for run in runs.values():
        assert run["failure"] == "no kernel image is available for execution on the device"
    assert done.returncode == 1
    assert any("both paths fail" in d for d in (x["text"] for x in result["diagnoses"]))
    assert not result["verdict"]["accepted"]
