"""`cuda-gate run --prebuilt SHA256SUMS`: gating bytes built elsewhere, never rebuilding them.

The release builds once and gates the same bytes on every runner class. These tests
build a real binary with nvcc outside the gate, list it with its SHA-256, and check
that the gate inspects exactly those bytes without running the project's build
commands, and that bytes which differ from the list stop it with one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.errors import BadInputError
from gate.scan import checksums
from tests.conftest import gpu_unavailable_reason
from tests.decision_builds import nvcc

SOURCE = """
#include <cstdio>
__global__ void scale_f32(float *p) { *p *= 2.0f; }
int main() {
  float *d = nullptr;
  if (cudaMalloc(&d, sizeof(float)) != cudaSuccess) { std::puts("no device"); return 1; }
  scale_f32<<<1, 1>>>(d);
  std::puts(cudaDeviceSynchronize() == cudaSuccess ? "PASS" : "FAIL");
  return 0;
}
"""

CONFIG = """
smoke = false

[[build]]
name = "marker"
command = ["sh", "-c", "echo ran > build-ran"]  # must never run with --prebuilt

[[artifact]]
path = "out/app"
kernels = ["scale_f32"]

[[entry_point]]
name = "app"
command = ["out/app"]
expected_output = "PASS"
"""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A binary nvcc built for sm_90 (SASS and PTX), as a build job leaves it."""
    folder = tmp_path_factory.mktemp("build")
    source = folder / "app.cu"
    source.write_text(SOURCE, encoding="utf-8")
    argv = [nvcc(), "-O2", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
    subprocess.run([*argv, str(source), "-o", str(folder / "app")], check=True, timeout=600)
    return folder / "app"


@pytest.fixture
def project(tmp_path: Path, built: Path) -> Path:
    """A project with the binary unpacked where the build would put it, and its list."""
    root = tmp_path / "project"
    (root / "out").mkdir(parents=True)
    app = root / "out" / "app"
    app.write_bytes(built.read_bytes())
    app.chmod(0o755)
    (root / "cuda-gate.toml").write_text(CONFIG, encoding="utf-8")
    (root / "SHA256SUMS").write_text(f"{_sha256(app)}  out/app\n", encoding="utf-8")
    return root


def gate(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gate", "run", "--no-store", "--evidence", "ev", *args],
        cwd=root,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _schema(name: str) -> dict[str, Any]:
    text = resources.files("gate").joinpath(f"schemas/{name}").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@pytest.mark.integration
@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is visible here")
def test_matching_bytes_are_gated_without_running_the_build(project: Path) -> None:
    listed = _sha256(project / "out" / "app")
    done = gate(project, "--target", "sm_90", "--prebuilt", "SHA256SUMS")
    # A clean static run: only the missing device stands in the way (exit 4).
    assert done.returncode == 4, done.stdout + done.stderr
    assert not (project / "build-ran").exists()
    commands = (project / "ev" / "commands.txt").read_text(encoding="utf-8")
    assert "build-ran" not in commands
    result = _json(project / "ev" / "result.json")
    states = {c["name"]: (c["state"], c["message"]) for c in result["checks"]}
    state, message = states["build prebuilt"]
    assert state == "passed"
    assert "build commands not run: marker" in message
    assert "build marker" not in states
    assert [(a["name"], a["sha256"]) for a in result["artifacts"]] == [("app", listed)]
    assert not [c for c in result["checks"] if c["state"] == "failed"]
    # The evidence says the bytes came from outside, with the list's digest and theirs.
    prebuilt = _json(project / "ev" / "prebuilt.json")
    jsonschema.Draft202012Validator(_schema("prebuilt.schema.json")).validate(prebuilt)
    assert prebuilt["sha256sums"]["sha256"] == _sha256(project / "SHA256SUMS")
    assert [(f["name"], f["sha256"]) for f in prebuilt["files"]] == [("out/app", listed)]
    assert prebuilt["build_commands_not_run"] == ["marker"]
    # ...and the statements name the very same bytes as their subject.
    manifest = _json(project / "ev" / "manifest.json")
    assert manifest["subject"] == [{"name": "app", "digest": {"sha256": listed}}]
    evidence = {e["name"] for e in manifest["predicate"]["evidence"]}
    assert "prebuilt.json" in evidence


@pytest.mark.integration
def test_bytes_that_differ_from_the_list_stop_the_run_with_one_line(project: Path) -> None:
    app = project / "out" / "app"
    listed = _sha256(app)
    with app.open("ab") as f:
        f.write(b"\0")  # one byte more than the build wrote
    done = gate(project, "--target", "sm_90", "--prebuilt", "SHA256SUMS")
    assert done.returncode == 6
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("cuda-gate: error: SHA256SUMS: out/app: sha256 is ")
    assert f"the list says {listed}: these are not the bytes that were built" in line
    assert not (project / "build-ran").exists()
    assert not (project / "ev" / "result.json").exists()  # nothing ran


@pytest.mark.integration
def test_a_listed_file_no_artifact_names_is_refused(project: Path) -> None:
    extra = project / "out" / "notes.txt"
    extra.write_text("not gated\n", encoding="utf-8")
    with (project / "SHA256SUMS").open("a", encoding="utf-8") as f:
        f.write(f"{_sha256(extra)}  out/notes.txt\n")
    done = gate(project, "--target", "sm_90", "--prebuilt", "SHA256SUMS")
    assert done.returncode not in (0, 4), done.stdout + done.stderr
    result = _json(project / "ev" / "result.json")
    [check] = [c for c in result["checks"] if c["name"] == "build prebuilt"]
    assert check["state"] == "failed"
    assert "out/notes.txt is listed, but no [[artifact]] names it" in check["message"]
    assert result["artifacts"] == []  # nothing inspected, nothing attested
    assert not (project / "build-ran").exists()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "lists no file"),
        ("abc  out/app\n", ":1: not a sha256sum line"),
        (f"{'a' * 64}  /etc/passwd\n", ":1: /etc/passwd is not a path inside the list's folder"),
        (f"{'a' * 64}  ../app\n", ":1: ../app is not a path inside"),
        (f"{'a' * 64}  app\n\n{'b' * 64} *app\n", ":3: app is listed twice"),
        (f"\\{'a' * 64}  a\\nb\n", ":1: an escaped file name (newline or backslash) is refused"),
    ],
)
def test_a_bad_list_is_one_line_naming_the_line(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "SHA256SUMS"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BadInputError) as caught:
        checksums.read(path)
    assert problem in caught.value.one_line()
    assert "\n" not in caught.value.one_line()


@pytest.mark.unit
def test_the_list_reads_both_sha256sum_modes(tmp_path: Path) -> None:
    path = tmp_path / "SHA256SUMS"
    path.write_text(f"{'A' * 64}  dir/one\n{'b' * 64} *two\n", encoding="utf-8")
    listed = checksums.read(path)
    assert [(f.name, f.basename, f.sha256) for f in listed.files] == [
        ("dir/one", "one", "a" * 64),
        ("two", "two", "b" * 64),
    ]
    assert listed.files[0].path == (tmp_path / "dir" / "one").resolve()
