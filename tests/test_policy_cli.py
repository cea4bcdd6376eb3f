"""``[policy]`` through the real `cuda-gate run`, on real nvcc builds, without a GPU.

A configuration error is one line and exit status 7 before anything is built; a shared
library of compute_90 PTX alone fails under the default policy and is accepted as device
code under ``ptx_as_device_code = true``; surplus SASS, PTX for the highest target and
the devices a runner class requires are judged as the policy says, into result.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.errors import ExitCode
from gate.rules.verdict import CheckState
from tests.conftest import gpu_unavailable_reason

pytestmark = [
    pytest.mark.integration,
    # With a device the runs would execute; these cases are about the static verdict.
    pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is visible here"),
]

SOURCE = "__global__ void write_value(int *p) { *p = 7; }\n"


def nvcc() -> str:
    found = shutil.which("nvcc")
    assert found is not None, "nvcc is needed (the CI machine has it)"
    return found


def build(folder: Path, *gencode: str) -> Path:
    folder.mkdir()
    (folder / "k.cu").write_text(SOURCE, encoding="utf-8")
    flags = [f for code in gencode for f in ("-gencode", code)]
    subprocess.run(
        [nvcc(), "-shared", "-Xcompiler", "-fPIC", "-o", "libk.so", "k.cu", *flags],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return folder / "libk.so"


@pytest.fixture(scope="module")
def ptx_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared library with compute_90 PTX and no SASS."""
    return build(tmp_path_factory.mktemp("ptx") / "b", "arch=compute_90,code=compute_90")


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sm_86 and sm_90 SASS, compute_90 PTX."""
    return build(
        tmp_path_factory.mktemp("wide") / "b",
        "arch=compute_86,code=sm_86",
        "arch=compute_90,code=[sm_90,compute_90]",
    )


def gate(
    cwd: Path, *args: str, runner_class: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_GATE_RUNNER_CLASS"}
    if runner_class is not None:
        env["CUDA_GATE_RUNNER_CLASS"] = runner_class
    return subprocess.run(
        [sys.executable, "-m", "gate", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def project(tmp_path: Path, library: Path | None, config: str) -> Path:
    folder = tmp_path / "project"
    folder.mkdir(parents=True)
    if library is not None:
        shutil.copy2(library, folder / library.name)
    (folder / "cuda-gate.toml").write_text(config, encoding="utf-8")
    return folder


def result_of(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "ev/result.json").read_text(encoding="utf-8"))
    schema = resources.files("gate").joinpath("schemas/result.schema.json").read_text("utf-8")
    jsonschema.Draft202012Validator(json.loads(schema)).validate(data)
    return data


def states(result: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["state"] for c in result["checks"]}


def run(folder: Path, runner_class: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = ("run", "--target", "sm_90", "--no-store", "--evidence", "ev")
    return gate(folder, *argv, runner_class=runner_class)


@pytest.mark.parametrize(
    ("table", "line"),
    [
        (
            '[policy]\nsurplus_targets = "maybe"\n',
            'policy.surplus_targets: expected one of "allow", "warn", "fail", got "maybe"',
        ),
        ("[policy]\nstrict = true\n", "policy.strict: unknown key (known: baseline, "),
    ],
)
def test_a_bad_policy_stops_the_run_with_one_line_and_the_config_status(
    tmp_path: Path, table: str, line: str
) -> None:
    folder = project(tmp_path, None, table)
    done = gate(folder, "run", "--no-store", "--evidence", "ev")
    assert done.returncode == ExitCode.CONFIG, done.stderr
    assert "Traceback" not in done.stderr
    errors = [x for x in done.stderr.splitlines() if "error:" in x]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"cuda-gate: error: {folder / 'cuda-gate.toml'}: {line}")
    assert sorted(p.name for p in folder.iterdir()) == ["cuda-gate.toml"]  # nothing ran


def test_ptx_only_fails_by_default_and_is_device_code_under_ptx_as_device_code(
    tmp_path: Path, ptx_only: Path
) -> None:
    artifact = '[[artifact]]\npath = "libk.so"\nkernels = ["write_value"]\n'
    strict = project(tmp_path / "default", ptx_only, artifact)
    done = run(strict)
    assert done.returncode == 1, done.stderr
    result = result_of(strict)
    found = states(result)
    assert found["libk.so: SASS for sm_90"] == "failed"
    assert found["libk.so: ELF listing lists a cubin"] == "failed"
    assert result["policy"]["ptx_as_device_code"] is False

    accepting = project(
        tmp_path / "ptx", ptx_only, "[policy]\nptx_as_device_code = true\n" + artifact
    )
    done = run(accepting)
    # Nothing failed: only the missing device keeps the run from being accepted.
    assert done.returncode == ExitCode.NO_DEVICE, done.stderr
    result = result_of(accepting)
    by_name = {c["name"]: c for c in result["checks"]}
    sass = by_name["libk.so: SASS for sm_90"]
    assert sass["state"] == CheckState.WARNED.value
    assert (
        "compute_90 PTX stands in as device code (policy.ptx_as_device_code = true)"
        in (sass["message"])
    )
    kernel = "libk.so: kernel write_value in compute_90 PTX (standing in for sm_90 SASS)"
    assert by_name[kernel]["state"] == "passed"
    assert [c["name"] for c in result["checks"] if c["state"] == "failed"] == []
    assert "libk.so: ELF listing lists a cubin" not in by_name
    assert result["policy"]["ptx_as_device_code"] is True
    assert result["verdict"]["reasons"] == [
        "execution not verified (no CUDA device; see the probe stage)"
    ]


def test_surplus_highest_and_the_runner_classs_devices_are_judged_as_the_policy_says(
    tmp_path: Path, wide: Path
) -> None:
    config = (
        '[policy]\nsurplus_targets = "fail"\nptx_for_highest = "warn"\n'
        'required_devices = { gb10 = ["12.1", "8.0"], h200 = ["9.0"] }\n'
        '[[artifact]]\npath = "libk.so"\n'
    )
    folder = project(tmp_path, wide, config)
    done = run(folder, runner_class="gb10")
    assert done.returncode == 1, done.stderr
    result = result_of(folder)
    by_name = {c["name"]: c for c in result["checks"]}
    surplus = by_name["libk.so: no SASS beyond the required targets"]
    assert (surplus["state"], surplus["cause"]) == ("failed", "wrong-target")
    assert surplus["message"] == (
        "SASS for sm_86, which no required target (sm_90) asked for "
        '(policy.surplus_targets = "fail")'
    )
    assert by_name["libk.so: PTX for the highest required target"]["state"] == "passed"
    assert by_name["libk.so: runs on 12.1"]["state"] == "passed"  # compute_90 JIT-compiles
    eighty = by_name["libk.so: runs on 8.0"]
    assert eighty["state"] == "failed"
    assert eighty["message"].startswith(
        "does not run on 8.0, required on runner class gb10 (policy.required_devices)"
    )
    assert "smoke: no SASS beyond the required targets" not in by_name  # it never ships
    assert result["run"]["runner_class"] == "gb10"
    assert result["policy"]["required_devices"] == {"gb10": ["12.1", "8.0"], "h200": ["9.0"]}

    elsewhere = tmp_path / "h200"
    shutil.copytree(folder, elsewhere, ignore=shutil.ignore_patterns("ev"))
    run(elsewhere, runner_class="h200")
    names = set(states(result_of(elsewhere)))
    assert "libk.so: runs on 9.0" in names
    assert "libk.so: runs on 8.0" not in names
