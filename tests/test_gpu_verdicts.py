"""The gpu tier: what the verdict says when the cause is not in the artifacts themselves.

* a library the program loads at run time (not declared as an artifact) that has
  nothing for this device: the headline names the library, not the failed run;
* an entry point whose run disagrees with what inspection predicted: a wrapper that
  warms its own JIT cache lets a PTX-only program "pass" natively (CUDA-FACTS' cache
  pitfall); the gate's prediction check catches it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dlopen-kernels"


@pytest.fixture(scope="module")
def capability() -> tuple[int, int]:
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    )
    major, minor = smi.stdout.split()[0].split(".")
    return int(major), int(minor)


def run_gate(project: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--evidence", "ev", "--no-store", *args],
        cwd=project,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    result = json.loads((project / "ev" / "result.json").read_text(encoding="utf-8"))
    print(f"\n{project.name}: exit {done.returncode}; headline: {result['verdict']['statement']}")
    return done, result


def test_a_loaded_library_with_nothing_for_this_device_is_the_headline(
    tmp_path: Path, capability: tuple[int, int]
) -> None:
    if shutil.which("cmake") is None:
        pytest.skip("cmake not found")
    foreign = "120" if capability[0] != 12 else "90"  # SASS only, of another major: no route
    project = tmp_path / "dlopen-kernels"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "build-*"))
    (project / "cuda-gate.toml").write_text(
        f"""
smoke = false
[[build]]
command = ["cmake", "-S", ".", "-B", "build", "-DCMAKE_CUDA_ARCHITECTURES={foreign}-real",
           "-DCMAKE_CUDA_COMPILER={{nvcc}}"]
[[build]]
command = ["cmake", "--build", "build", "--parallel", "4"]
[[artifact]]
path = "build/app"            # libkernels.so is not declared: the gate finds it at run time
[[entry_point]]
name = "app-f32"
command = ["build/app", "f32"]
expected_output = "(?m)^f32: PASS$"
""",
        encoding="utf-8",
    )
    done, result = run_gate(project)
    assert done.returncode == 1, done.stderr
    cap = f"{capability[0]}.{capability[1]}"
    headline = result["verdict"]["statement"]
    assert headline.startswith(f"not accepted: loaded libkernels.so: device code for {cap}: ")
    assert "nothing in it runs on this device" in headline
    assert f"SASS sm_{foreign}" in headline
    assert result["verdict"]["cause"] == "loaded-library"
    [library] = [x for x in result["loaded_libraries"] if x["path"].endswith("libkernels.so")]
    assert (library["declared"], library["runs"], library["route"]) == (False, False, "nothing")


def test_a_run_that_disagrees_with_its_prediction_is_a_failing_predict_check(
    tmp_path: Path, capability: tuple[int, int]
) -> None:
    compute = f"compute_{capability[0]}{capability[1]}"
    project = tmp_path / "warm-wrapper"
    project.mkdir()
    source = Path(__file__).resolve().parent.parent / "gate" / "cuda" / "smoke.cu"
    shutil.copy(source, project / "app.cu")
    # The wrapper defeats the gate's isolation the way a careless script would: it gives
    # the program its own cache, runs it once with JIT allowed to fill it, then again.
    wrapper = (
        'export CUDA_CACHE_PATH="$(mktemp -d)"; '
        "env -u CUDA_DISABLE_PTX_JIT -u CUDA_CACHE_DISABLE ./app >/dev/null && "
        "env -u CUDA_CACHE_DISABLE ./app"
    )
    (project / "cuda-gate.toml").write_text(
        f"""
smoke = false
[[build]]
command = ["{{nvcc}}", "-gencode", "arch={compute},code={compute}", "app.cu", "-o", "app"]
[[artifact]]
path = "app"
[[entry_point]]
name = "warm-wrapper"
command = ["sh", "-c", {json.dumps(wrapper)}]
""",
        encoding="utf-8",
    )
    done, result = run_gate(project)
    assert done.returncode == 1, done.stderr
    runs = {e["path"]: e for e in result["executions"]}
    assert runs["native"]["passed"], "the warm cache should have let the PTX-only app run"
    [predict] = [c for c in result["checks"] if c["classname"] == "gate.predict"]
    assert predict["state"] == "failed"
    assert predict["cause"] == "prediction-mismatch"
    assert "native: predicted cannot run" in predict["message"]
    assert "JIT cache" in predict["message"]
    # The missing SASS is still what the headline says first.
    assert result["verdict"]["cause"] == "missing-sass"
    print(f"predict check: {predict['message']}")
