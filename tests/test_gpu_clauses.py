"""The gpu tier of issue 42, item 1: each path's clause carries that path's own outcome.

A driver-API program keeps its kernel as a PTX image (``nvcc -ptx``, ``compute_90``) in a
byte array, loads it with ``cuModuleLoadData``, launches it with ``cuLaunchKernel`` and
checks the result (tests/decision_builds.py ``ptx_image``):

* ISA 9.0: natively the driver refuses it (JIT disabled, error 223), forced JIT runs it.
  The headline names the native path only; the runtime module passes on forced JIT;
* ISA 9.2, too new for a CUDA 13.0 driver: native fails with 223, forced JIT with 222
  (``CUDA_ERROR_UNSUPPORTED_PTX_VERSION``). The headline's and the diagnosis's clause of
  each path quotes that path's own code.

tests/test_path_clauses.py feeds the same recorded runs to the rules without a device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gate.rules.routes import min_driver
from gate.rules.targets import Version
from tests.decision_builds import ptx_image

pytestmark = pytest.mark.gpu

CONFIG = 'smoke = false\n[[artifact]]\npath = "app"\n[[entry_point]]\nname = "app"\ncommand = ["./app"]\nexpected_output = "PASS"\n'  # noqa: E501


@pytest.fixture(scope="module")
def device() -> tuple[int, int, Version]:
    """Device 0's capability and the driver's CUDA version, from nvidia-smi."""
    query = ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]
    smi = subprocess.run(query, capture_output=True, text=True, check=True)
    major, minor = smi.stdout.split()[0].split(".")
    full = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=True).stdout
    cuda = full.split("CUDA Version:", 1)[1].split()[0]
    if (int(major), int(minor)) < (9, 0):
        pytest.skip(f"compute_90 PTX does not JIT for {major}.{minor}")
    return int(major), int(minor), Version.parse(cuda)


def run_gate(project: Path) -> tuple[subprocess.CompletedProcess[str], Any]:
    (project / "cuda-gate.toml").write_text(CONFIG, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gate",
            "run",
            "--no-store",
            "--record-launches",
            "--evidence",
            "ev",
        ],
        cwd=project,
        env={**os.environ, "XDG_CACHE_HOME": str(project / "cache")},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    result = json.loads((project / "ev" / "result.json").read_text(encoding="utf-8"))
    print(f"\n{project.name}: exit {done.returncode}; {result['verdict']['statement']}")
    for diagnosis in result["diagnoses"]:
        print(f"diagnosis: {diagnosis['text']}")
    return done, result


def modules(result: Any) -> dict[str, Any]:
    """The runtime module checks, by path."""
    found = [c for c in result["checks"] if c["name"].startswith("runtime module ")]
    return {c["path"]: c for c in found}


def path_clauses(clauses: list[Any]) -> list[tuple[str, str, int | None]]:
    return [(c["path"], c["state"], c["error"]) for c in clauses if c["path"] is not None]


def test_a_ptx_image_refused_natively_and_run_by_forced_jit_names_only_native(
    tmp_path: Path, device: tuple[int, int, Version]
) -> None:
    project = tmp_path / "isa90"
    ptx_image(project, "9.0")
    done, result = run_gate(project)
    assert done.returncode == 1, done.stdout + done.stderr
    runs = {e["path"]: e for e in result["executions"]}
    assert runs["native"]["failure"] == "PTX JIT compilation was disabled", runs
    assert runs["jit"]["passed"], runs
    by_path = modules(result)
    assert by_path["native"]["state"] == "failed", by_path
    assert by_path["native"]["error"] == 223
    assert "app [jit]" not in by_path["native"]["message"]
    assert by_path["jit"]["state"] == "passed", by_path
    headline = result["verdict"]["statement"]
    assert "app [jit]" not in headline, headline
    assert "error 223" in headline, headline
    # Forced JIT is named only by a check that failed, never by the JIT run or the module
    # it loaded (a static finding on the program's own code may stand against it: the
    # static CUDA runtime's kernels carry no PTX for the device).
    for clause in result["verdict"]["clauses"]:
        at = int(clause["source"].removeprefix("/checks/"))
        assert result["checks"][at]["state"] == "failed", clause
        if clause["path"] == "jit":
            assert not result["checks"][at]["name"].startswith(("app [jit]", "runtime module"))
    assert path_clauses(result["verdict"]["clauses"])[0] == ("native", "failed", 223)
    (diagnosis,) = result["diagnoses"]
    assert path_clauses(diagnosis["clauses"]) == [
        ("native", "failed", 223),
        ("jit", "passed", None),
    ]
    assert "PTX JIT passes" in diagnosis["text"]


def test_a_ptx_image_too_new_for_the_driver_says_each_path_s_own_code(
    tmp_path: Path, device: tuple[int, int, Version]
) -> None:
    need = min_driver(Version(9, 2))
    assert need is not None
    if device[2] >= need:
        pytest.skip(f"the driver (CUDA {device[2]}) can JIT ISA 9.2")
    project = tmp_path / "isa92"
    ptx_image(project, "9.2")
    done, result = run_gate(project)
    assert done.returncode == 1, done.stdout + done.stderr
    runs = {e["path"]: e for e in result["executions"]}
    assert runs["native"]["failure"] == "PTX JIT compilation was disabled", runs
    unsupported = "the provided PTX was compiled with an unsupported toolchain"
    assert runs["jit"]["failure"] == unsupported, runs
    by_path = modules(result)
    assert (by_path["native"]["error"], by_path["jit"]["error"]) == (223, 222), by_path
    native_part, jit_part = result["verdict"]["statement"].split("; and for forced JIT: ")
    assert "error 223" in native_part
    assert "error 222" not in native_part
    assert "error 222" in jit_part
    assert "error 223" not in jit_part
    assert path_clauses(result["verdict"]["clauses"]) == [
        ("native", "failed", 223),
        ("jit", "failed", 222),
    ]
    (diagnosis,) = result["diagnoses"]
    assert path_clauses(diagnosis["clauses"]) == [
        ("native", "failed", 223),
        ("jit", "failed", 222),
    ]
