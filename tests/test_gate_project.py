"""`cuda-gate run --config` on the real example project: builds, artifacts, entry points, libraries.

The integration tests run here without a GPU (build and inspect for sm_90); the gpu test
runs the same project end to end on a device and checks the dlopen'd library's evidence.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gpu_unavailable_reason

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dlopen-kernels"
needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found")


def gate(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--no-store", "--evidence", str(cwd / "ev"), *args],
        cwd=cwd,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    path = cwd / "ev" / "result.json"
    return done, json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "dlopen-kernels"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("build*"))
    return copy


def failed(result: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["message"] for c in result["checks"] if c["state"] == "failed"}


@pytest.mark.integration
@needs_cmake
@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is visible here")
def test_the_project_builds_for_the_target_and_every_artifact_is_inspected(project: Path) -> None:
    done, result = gate(project, "--target", "sm_90", "--config", str(project / "cuda-gate.toml"))
    assert "Verdict: not accepted: execution not verified" in done.stdout, done.stderr
    assert done.returncode == 4  # a clean static run: only the missing device stands in the way
    commands = (project / "ev" / "commands.txt").read_text(encoding="utf-8")
    assert "-DCMAKE_CUDA_ARCHITECTURES=90 " in commands
    names = [a["name"] for a in result["artifacts"]]
    assert names == ["smoke", "libkernels.so", "app"]
    assert failed(result) == {}
    states = {c["name"]: c["state"] for c in result["checks"]}
    not_run = {name for name, state in states.items() if state == "not-run"}
    assert {"compute capability", "app-f32 [native]", "app-f32 [jit]"} <= not_run
    assert states["driver"] == "warned"  # nvidia-smi was asked: no driver here
    lib = project / "ev" / "artifacts" / "libkernels.so"
    assert "sm_90" in (lib / "device-code.txt").read_text(encoding="utf-8")
    assert (lib / "sha256.txt").exists() is False  # one sha256.txt for every artifact
    sha = (project / "ev" / "sha256.txt").read_text(encoding="utf-8")
    assert "libkernels.so" in sha
    assert "/app\n" in sha


@pytest.mark.integration
@needs_cmake
def test_a_build_that_drops_the_target_is_caught_naming_artifact_and_target(project: Path) -> None:
    done, result = gate(
        project, "--target", "sm_90", "--config", str(project / "cuda-gate-drop-arch.toml")
    )
    # A defect found without a GPU is the verdict (exit 1), not "no device" (exit 4).
    assert done.returncode == 1, done.stderr
    problems = failed(result)
    sass = "no SASS for sm_90 (needs sm_90); SASS targets: sm_80"
    assert problems["libkernels.so: SASS for sm_90"] == sass
    ptx = problems["libkernels.so: PTX for compute_90"]
    assert ptx.startswith("no PTX for compute_90")
    # Both paths lack what they need: the headline names the native cause, then the JIT's.
    headline = (
        f"libkernels.so: SASS for sm_90: {sass}; and for forced JIT: "
        f"libkernels.so: PTX for compute_90: {ptx}"
    )
    assert f"Verdict: not accepted: {headline}" in done.stdout.splitlines()
    assert headline not in done.stderr  # the verdict is said once, on stdout
    assert result["verdict"]["statement"] == f"not accepted: {headline}"
    assert result["verdict"]["cause"] == "missing-sass"


@pytest.mark.integration
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bogus = 1\n", "cuda-gate.toml: bogus: unknown key"),
        ("[[entry_point]]\nname = 'x'\n", "cuda-gate.toml: entry_point[0].command"),
        ("[[build]]\ncommand = []\n", "cuda-gate.toml: build[0].command"),
        (
            "[[entry_point]]\ncommand = ['x']\ntimeout = 'soon'\n",
            "cuda-gate.toml: entry_point[0].timeout: expected a number",
        ),
    ],
)
def test_bad_configuration_is_one_line_naming_file_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "cuda-gate.toml").write_text(text, encoding="utf-8")
    done, _ = gate(tmp_path)
    assert done.returncode == 7
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert message in lines[0]


@pytest.mark.integration
def test_an_artifact_glob_matching_nothing_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "cuda-gate.toml").write_text("[[artifact]]\npath = 'dist/*.so'\n", encoding="utf-8")
    done, result = gate(tmp_path, "--target", "sm_90")
    assert done.returncode != 0
    assert "artifact[0].path: 'dist/*.so' matches no file" in done.stdout + done.stderr
    assert result["verdict"]["accepted"] is False


@pytest.mark.gpu
@needs_cmake
def test_the_project_passes_on_the_device_and_records_the_dlopened_library(project: Path) -> None:
    done, result = gate(project, "--config", str(project / "cuda-gate.toml"))
    assert done.returncode == 0, done.stdout + done.stderr
    entry_points = {e["entry_point"] for e in result["executions"]}
    assert {"app-f32", "app-f64", "app-sum"} <= entry_points
    assert all(e["passed"] for e in result["executions"])
    (lib,) = [x for x in result["loaded_libraries"] if x["path"].endswith("libkernels.so")]
    assert lib["declared"] is True
    assert len(lib["sha256"]) == 64
    assert {e["target"] for e in lib["listing"]["entries"]} >= {
        f"sm_{result['device']['target'][3:]}"
    }
    listing = project / "ev" / lib["evidence"] / "device-code.txt"
    assert "libkernels.so" in listing.read_text(encoding="utf-8")
    loaded = (project / "ev" / "loaded-libraries.txt").read_text(encoding="utf-8")
    # The project's library, with how it runs on the device (the summary counts the rest).
    assert re.search(
        r"libkernels\.so  \[device code \(project\): runs [^]]+\]  loaded by app-f32", loaded
    )
    print(f"\nsummary table (example project):\n{done.stdout}")


@pytest.mark.integration
@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is visible here")
def test_a_wheel_artifact_is_inspected_library_by_library(tmp_path: Path) -> None:
    import zipfile

    from gate.system import machine as environment
    from gate.tools.programs import cuda_source

    source = tmp_path / "k.cu"
    source.write_text(
        cuda_source("smoke.cu").replace("int main()", "int unused_main()"), encoding="utf-8"
    )
    lib = tmp_path / "libk.so"
    subprocess.run(
        [
            environment.nvcc_path(),
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-gencode",
            "arch=compute_80,code=[sm_80,compute_80]",
            str(source),
            "-o",
            str(lib),
        ],
        check=True,
        capture_output=True,
    )
    wheel = tmp_path / "dist" / "pkg-1.0-py3-none-linux_x86_64.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(lib, "pkg/libk.so")
        archive.writestr("pkg/__init__.py", "")
    (tmp_path / "cuda-gate.toml").write_text(
        "smoke = false\n[[artifact]]\npath = 'dist/*.whl'\nkernels = ['write_value']\n"
        "[[entry_point]]\ncommand = ['true']\n",
        encoding="utf-8",
    )
    done, result = gate(tmp_path, "--target", "sm_90")
    assert done.returncode == 1
    assert [a["name"] for a in result["artifacts"]] == ["libk.so"]
    problems = failed(result)
    assert problems["libk.so: SASS for sm_90"] == (
        "no SASS for sm_90 (needs sm_90); SASS targets: sm_80"
    )
    assert (tmp_path / "ev" / "artifacts" / "libk.so" / "device-code.txt").is_file()
