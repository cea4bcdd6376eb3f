"""The gpu tier of issue 20's decisions: on the device, with both paths really run.

* a required arch-specific target (``sm_90a`` on an H200) is not met by plain code,
  although plain code runs there: the gate says "not accepted"; ``sm_90a`` code meets it;
* an artifact this run's build did not write is a warning, with the switch a failure;
* a program whose native path lacks SASS and whose PTX needs a newer driver than the one
  installed fails both paths, each for its own reason: the headline and the diagnosis
  name both, with the numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gate.rules.routes import min_driver
from gate.rules.targets import Version
from tests.decision_builds import isa_too_new, nvcc, smoke

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def device() -> tuple[int, int, Version]:
    """Device 0's capability and the driver's CUDA version, from nvidia-smi."""
    query = ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]
    smi = subprocess.run(query, capture_output=True, text=True, check=True)
    major, minor = smi.stdout.split()[0].split(".")
    full = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=True).stdout
    cuda = full.split("CUDA Version:", 1)[1].split()[0]
    return int(major), int(minor), Version.parse(cuda)


def run_gate(project: Path, evidence: str = "ev") -> tuple[subprocess.CompletedProcess[str], Any]:
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--no-store", "--evidence", evidence],
        cwd=project,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    result = json.loads((project / evidence / "result.json").read_text(encoding="utf-8"))
    print(f"\n{project.name}: exit {done.returncode}; {result['verdict']['statement']}")
    return done, result


def checks_of(result: Any) -> dict[str, Any]:
    return {c["name"]: c for c in result["checks"]}


ENTRY = '[[entry_point]]\nname = "app"\ncommand = ["./app"]\n'


def _accepts(gencode: str) -> bool:
    """Whether this nvcc builds ``gencode`` (an a target exists for this SM number)."""
    argv = [nvcc(), "--dryrun", "-gencode", gencode, "-x", "cu", "-c", os.devnull, "-o", os.devnull]
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def test_a_required_arch_specific_target_is_not_met_by_plain_code_that_runs(
    tmp_path: Path, device: tuple[int, int, Version]
) -> None:
    number = f"{device[0]}{device[1]}"
    if not _accepts(f"arch=compute_{number}a,code=sm_{number}a"):
        pytest.skip(f"this toolkit builds no sm_{number}a")
    project = tmp_path / "plain"
    config = f'smoke = false\ntargets = ["sm_{number}a"]\n[[artifact]]\npath = "app"\n{ENTRY}'
    smoke(project, f"arch=compute_{number},code=[sm_{number},compute_{number}]")
    (project / "cuda-gate.toml").write_text(config, encoding="utf-8")
    done, result = run_gate(project)
    assert done.returncode == 1, done.stderr
    assert result["verdict"]["accepted"] is False
    # Both paths ran and passed: the code runs here, it just is not sm_XYa code.
    assert all(e["passed"] for e in result["executions"]), result["executions"]
    sass = checks_of(result)[f"app: SASS for sm_{number}a"]
    assert sass["state"] == "failed"
    assert sass["message"].startswith(f"no SASS for sm_{number}a: sm_{number} present")
    assert result["verdict"]["statement"].startswith(f"not accepted: app: SASS for sm_{number}a")
    # The same program built for sm_XYa meets it, and is accepted.
    built = tmp_path / "arch"
    smoke(built, f"arch=compute_{number}a,code=[sm_{number}a,compute_{number}a]")
    (built / "cuda-gate.toml").write_text(config, encoding="utf-8")
    done, result = run_gate(built)
    assert done.returncode == 0, done.stdout + done.stderr
    assert checks_of(result)[f"app: SASS for sm_{number}a"]["state"] == "passed"


def test_a_stale_artifact_warns_and_with_the_switch_fails(
    tmp_path: Path, device: tuple[int, int, Version]
) -> None:
    number = f"{device[0]}{device[1]}"
    project = tmp_path / "stale"
    smoke(project, f"arch=compute_{number},code=[sm_{number},compute_{number}]")
    hour_ago = time.time() - 3600
    os.utime(project / "app", (hour_ago, hour_ago))
    config = f'smoke = false\n[[build]]\ncommand = ["true"]\n[[artifact]]\npath = "app"\n{ENTRY}'
    (project / "cuda-gate.toml").write_text(config, encoding="utf-8")
    done, result = run_gate(project)
    assert done.returncode == 0, done.stdout + done.stderr  # accepted, with the warning
    stale = checks_of(result)["app: written by this run's build"]
    assert stale["state"] == "warned"
    statement = json.loads((project / "ev" / "test-result.json").read_text(encoding="utf-8"))
    assert statement["predicate"]["result"] == "WARNED"
    assert (
        "default.gate.inspect::app: written by this run's build"
        in (statement["predicate"]["warnedTests"])
    )
    (project / "cuda-gate.toml").write_text('stale_artifacts = "fail"\n' + config, encoding="utf-8")
    done, result = run_gate(project, "ev2")
    assert done.returncode == 1
    assert result["verdict"]["cause"] == "stale-artifact"


def test_both_paths_failing_for_different_reasons_are_both_named_with_the_numbers(
    tmp_path: Path, device: tuple[int, int, Version]
) -> None:
    major, minor, driver = device
    if (major, minor) < (9, 0):
        pytest.skip(f"compute_90 PTX does not JIT for {major}.{minor}")
    need = min_driver(Version(9, 2))
    assert need is not None
    if driver >= need:
        pytest.skip(f"the driver (CUDA {driver}) can JIT ISA 9.2: no second cause here")
    project = tmp_path / "isa"
    isa_too_new(project)
    config = f'smoke = false\n[[artifact]]\npath = "app"\n{ENTRY}'
    (project / "cuda-gate.toml").write_text(config, encoding="utf-8")
    done, result = run_gate(project)
    assert done.returncode == 1, done.stderr
    runs = {e["path"]: e for e in result["executions"]}
    assert not runs["native"]["passed"]
    assert runs["jit"]["failure"] == "the provided PTX was compiled with an unsupported toolchain"
    cap = f"{major}.{minor}"
    numbers = f"PTX ISA 9.2 needs driver CUDA >= {need}; the driver is CUDA {driver}"
    headline = result["verdict"]["statement"]
    assert headline.startswith(f"not accepted: app: SASS for device {cap}: no SASS for device")
    assert f"; and for forced JIT: app: driver can JIT compute_90 PTX: {numbers}" in headline
    assert result["verdict"]["cause"] == "missing-sass"
    (said,) = result["diagnoses"]
    diagnosis = said["text"]
    assert "both paths fail, each for its own reason" in diagnosis
    assert f"needs driver CUDA >= {need}; this driver is CUDA {driver}" in diagnosis
    assert "investigate the toolchain" not in diagnosis
    shown = headline.removeprefix("not accepted: ")
    assert f"Verdict: not accepted: {shown}" in done.stdout.splitlines()
