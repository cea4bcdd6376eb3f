"""`cuda-gate run` end to end with real nvcc and cuobjdump, on a machine without a usable GPU.

These are the behaviours of a GPU-less CI machine, so they skip where a device is visible
(the gpu tier covers that machine).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import gpu_unavailable_reason

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is visible here"),
]

SEED_FILES = (
    "host-arch.txt",
    "driver.txt",
    "toolkit.txt",
    "supported-targets.txt",
    "compute-capability.txt",
    "junit.xml",
    "summary.md",
    "result.json",
)


def gate(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gate", "run", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def result_of(evidence: Path) -> dict[str, Any]:
    data = json.loads((evidence / "result.json").read_text(encoding="utf-8"))
    schema = json.loads(
        resources.files("gate").joinpath("schemas/result.schema.json").read_text(encoding="utf-8")
    )
    jsonschema.validate(data, schema)
    assert isinstance(data, dict)
    return data


def test_no_gpu_records_everything_and_says_why_in_one_line(tmp_path: Path) -> None:
    done = gate("--evidence", "ev", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    # Said once, as the verdict on stdout: not again on stderr.
    [verdict] = [line for line in done.stdout.splitlines() if line.startswith("Verdict:")]
    assert verdict.startswith("Verdict: not accepted: no CUDA device was usable: ")
    assert not [line for line in done.stderr.splitlines() if line.startswith("cuda-gate:")]
    assert "Traceback" not in done.stderr
    ev = tmp_path / "ev"
    for name in SEED_FILES:
        assert (ev / name).is_file(), name
    assert "sm_121" in (ev / "supported-targets.txt").read_text(encoding="utf-8")
    result = result_of(ev)
    verdict = result["verdict"]
    assert isinstance(verdict, dict)
    assert verdict["accepted"] is False
    ET.parse(ev / "junit.xml")  # noqa: S314
    assert "not accepted" in (ev / "summary.md").read_text(encoding="utf-8")


def test_explicit_target_builds_and_inspects_but_is_never_accepted(tmp_path: Path) -> None:
    build = tmp_path / "build"
    done = gate("--target", "sm_121", "--evidence", "ev", "--build-dir", str(build), cwd=tmp_path)
    assert done.returncode != 0
    assert "Verdict: not accepted: execution not verified" in done.stdout
    ev = tmp_path / "ev"
    assert "sm_121" in (ev / "elf-list.txt").read_text(encoding="utf-8")
    ptx = (ev / "ptx.txt").read_text(encoding="utf-8")
    assert ".target sm_121" in ptx
    assert ".entry _Z11write_valuePi" in ptx
    assert "compute_121,code=[sm_121,compute_121]" in (ev / "commands.txt").read_text(
        encoding="utf-8"
    )
    result = result_of(ev)
    artifacts = result["artifacts"]
    assert isinstance(artifacts, list)
    (artifact,) = artifacts
    assert artifact["sha256"] == hashlib.sha256((build / "smoke").read_bytes()).hexdigest()
    assert (ev / "sha256.txt").read_text(encoding="utf-8").startswith(artifact["sha256"])
    root = ET.parse(ev / "junit.xml").getroot()  # noqa: S314
    # Classnames start with the runner class (gate.render.junit); the check's own follows.
    skipped = [
        str(c.get("classname")).split(".", 1)[1]
        for c in root.iter("testcase")
        if c.find("skipped") is not None
    ]
    # Not run: the device's capability and both paths. The missing driver is no check that
    # did not run: nvidia-smi was asked, and its answer is a warning (a passed case).
    assert sorted(skipped) == ["gate.execute.jit", "gate.execute.native", "gate.probe"]
    (driver,) = [c for c in root.iter("testcase") if c.get("name") == "driver"]
    assert driver.find("skipped") is None
    assert str(driver.findtext("system-out")).startswith("WARNING: ")
    assert done.returncode == 4
    inspect_cases = [
        c for c in root.iter("testcase") if str(c.get("classname")).endswith(".gate.inspect")
    ]
    assert inspect_cases
    assert all(c.find("failure") is None for c in inspect_cases)
    # The full SASS dump runs beside the later stages; the run waits for it and checks it.
    assert "Function : _Z11write_valuePi" in (ev / "sass.txt").read_text(encoding="utf-8")
    assert "smoke: SASS dump holds SASS" in {c.get("name") for c in inspect_cases}
    # ... and reported among the inspect stage's checks, before the execute stage's.
    cases = [(str(c.get("classname")), str(c.get("name"))) for c in root.iter("testcase")]
    dump = next(i for i, (_, name) in enumerate(cases) if "SASS dump" in name)
    first_run = next(i for i, (cls, _) in enumerate(cases) if ".gate.execute." in cls)
    assert dump < first_run


def test_target_the_toolkit_cannot_build_stops_with_that_message(tmp_path: Path) -> None:
    done = gate("--target", "sm_72", "--evidence", "ev", cwd=tmp_path)
    assert done.returncode == 3
    assert "sm_72 is not in this toolkit's supported targets" in done.stderr
    assert "do not substitute an older target" in done.stderr
    assert not (tmp_path / "ev").exists()  # refused before the run: nothing built or written


def test_missing_nvcc_is_one_line_and_keeps_the_evidence(tmp_path: Path) -> None:
    done = gate("--nvcc", str(tmp_path / "no-nvcc"), "--evidence", "ev", cwd=tmp_path)
    assert done.returncode == 3
    assert (
        f"Verdict: not accepted: nvcc not found: {tmp_path / 'no-nvcc'} is not an executable file"
    ) in done.stdout.splitlines()
    ev = tmp_path / "ev"
    assert (ev / "host-arch.txt").is_file()
    assert result_of(ev)["verdict"]["statement"].startswith("not accepted: nvcc not found")


def test_broken_nvidia_smi_is_recorded_with_its_own_words(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\nexit 18\n",
        encoding="utf-8",
    )
    smi.chmod(0o755)
    done = gate(
        "--evidence", "ev", cwd=tmp_path, env={"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    )
    assert done.returncode != 0
    driver = (tmp_path / "ev" / "driver.txt").read_text(encoding="utf-8")
    assert "Driver/library version mismatch" in driver
    checks = {c["name"]: c for c in result_of(tmp_path / "ev")["checks"]}
    assert checks["driver"]["message"].startswith(
        "nvidia-smi failed with exit status 18: Failed to initialize NVML"
    )
    assert "Failed to initialize" in done.stdout


def test_unwritable_evidence_folder_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    done = gate("--evidence", str(blocker / "ev"), cwd=tmp_path)
    assert done.returncode == 5
    assert done.stderr.strip().splitlines() == [
        f"cuda-gate: error: {blocker / 'ev'}: evidence folder is not writable: Not a directory"
    ]


def test_a_folder_that_is_not_evidence_is_never_replaced(tmp_path: Path) -> None:
    precious = tmp_path / "src"
    precious.mkdir()
    (precious / "main.cu").write_text("// mine", encoding="utf-8")
    done = gate("--evidence", str(precious), cwd=tmp_path)
    assert done.returncode == 5
    assert "refusing to replace it" in done.stderr
    assert (precious / "main.cu").read_text(encoding="utf-8") == "// mine"


def test_rerun_replaces_the_previous_evidence(tmp_path: Path) -> None:
    gate("--stop-after", "environment", "--evidence", "ev", cwd=tmp_path)
    (tmp_path / "ev" / "stale.log").write_text("old", encoding="utf-8")
    done = gate("--stop-after", "environment", "--evidence", "ev", cwd=tmp_path)
    assert "stopped after the environment stage" in done.stdout
    assert not (tmp_path / "ev" / "stale.log").exists()


def test_git_revision_and_dirty_flag_are_recorded(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "a.txt").write_text("a", encoding="utf-8")
    subprocess.run([*git, "add", "a.txt"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "a"], cwd=repo, check=True)
    subprocess.run(
        [*git, "remote", "add", "origin", "git@github.com:acme/kernels.git"], cwd=repo, check=True
    )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    gate(
        "--stop-after",
        "environment",
        "--evidence",
        str(tmp_path / "ev"),
        cwd=repo,
        env={"GITHUB_REPOSITORY": ""},
    )
    source = result_of(tmp_path / "ev")["source"]
    assert source == {"revision": head, "dirty": False, "repository": "acme/kernels"}
    (repo / "a.txt").write_text("changed", encoding="utf-8")
    gate("--stop-after", "environment", "--evidence", str(tmp_path / "ev"), cwd=repo)
    assert result_of(tmp_path / "ev")["source"]["dirty"] is True


def test_the_run_signs_its_manifest_and_keeps_secrets_out(tmp_path: Path) -> None:
    keys = subprocess.run(
        [sys.executable, "-m", "gate", "keygen", "--out", str(tmp_path / "k")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert keys.returncode == 0, keys.stderr
    secret = "s3cr3t-value-planted-123"
    pem = (tmp_path / "k.key").read_text(encoding="utf-8")
    done = gate(
        "--target",
        "sm_90",
        "--evidence",
        "ev",
        cwd=tmp_path,
        env={"CUDA_GATE_SIGNING_KEY": pem, "MY_API_TOKEN": secret},
    )
    assert "manifest signed with key" in done.stdout
    ev = tmp_path / "ev"
    assert (ev / "manifest.dsse.json").is_file()
    for path in ev.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data, path
            assert b"PRIVATE KEY" not in data, path
    verified = subprocess.run(
        [
            sys.executable,
            "-m",
            "gate",
            "verify",
            str(ev / "manifest.dsse.json"),
            "--key",
            str(tmp_path / "k.pub"),
            "--offline",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "1. signature: ok" in verified.stdout
    assert "2. artifacts: ok" in verified.stdout
    assert "3. evidence: ok" in verified.stdout


def test_without_a_key_the_run_says_it_did_not_sign(tmp_path: Path) -> None:
    done = gate(
        "--stop-after",
        "environment",
        "--evidence",
        "ev",
        cwd=tmp_path,
        env={"CUDA_GATE_SIGNING_KEY": "", "CUDA_GATE_SIGNING_KEY_FILE": ""},
    )
    assert "manifest not signed: no signing key configured" in done.stdout
    assert not (tmp_path / "ev" / "manifest.dsse.json").exists()


def test_an_unusable_key_fails_before_anything_runs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.key"
    bad.write_text("not a key", encoding="utf-8")
    done = gate("--signing-key", str(bad), "--evidence", "ev", cwd=tmp_path)
    assert done.returncode == 10
    assert len(done.stderr.strip().splitlines()) == 1
    assert str(bad) in done.stderr
    assert not (tmp_path / "ev").exists()


def test_without_cuobjdump_our_reader_alone_inspects(tmp_path: Path) -> None:
    done = gate("--target", "sm_90", "--no-cuobjdump", "--evidence", "ev", cwd=tmp_path)
    assert "Verdict: not accepted: execution not verified" in done.stdout
    ev = tmp_path / "ev"
    assert "sm_90" in (ev / "device-code.txt").read_text(encoding="utf-8")
    assert "ELF file" in (ev / "elf-list.txt").read_text(encoding="utf-8")
    result = result_of(ev)
    checks = {c["name"]: c for c in result["checks"]}
    # A cross-check that did not run is no check at all (never "passed"): a note says why.
    assert "smoke: cuobjdump agrees with the cuda-gate reader" not in checks
    assert result["notes"] == ["cuobjdump cross-check not run: turned off with --no-cuobjdump"]
    assert "Not done:\n  - cuobjdump cross-check not run" in done.stdout
    assert checks["smoke: kernel write_value in sm_90 SASS"]["state"] == "passed"


def test_a_cuobjdump_without_nvdisasm_still_lists_and_says_why_sass_is_absent(
    tmp_path: Path,
) -> None:
    from gate.tools import cuobjdump

    alone = tmp_path / "bin"
    alone.mkdir()
    shutil.copy2(cuobjdump.find(), alone / "cuobjdump")  # a copy: no nvdisasm beside it
    done = gate(
        "--target",
        "sm_90",
        "--evidence",
        "ev",
        cwd=tmp_path,
        env={"PATH": f"{alone}{os.pathsep}{os.environ['PATH']}"},
    )
    assert "Verdict: not accepted: execution not verified" in done.stdout, done.stdout
    ev = tmp_path / "ev"
    assert "nvdisasm" in (ev / "sass-not-dumped.txt").read_text(encoding="utf-8")
    assert not (ev / "sass.txt").exists()
    assert "smoke.1.sm_90.cubin" in (ev / "elf-list.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("variant", "headline"),
    [
        (
            ["--sass", "--ptx", "compute_90"],
            "smoke: SASS for sm_90: no SASS for sm_90 (needs sm_90); SASS targets: none",
        ),
        (
            ["--sass", "sm_90", "--ptx"],
            (
                "smoke: PTX for compute_90: no PTX for compute_90 (needs compute_90); "
                "PTX targets: none"
            ),
        ),
        (
            # Both paths lack what they need, for different reasons: both are named.
            ["--sass", "sm_80", "--ptx", "compute_80"],
            (
                "smoke: SASS for sm_90: no SASS for sm_90 (needs sm_90); SASS targets: "
                "sm_80; and for forced JIT: smoke: PTX for compute_90: no PTX for compute_90 "
                "(needs compute_90); PTX targets: compute_80"
            ),
        ),
    ],
    ids=["ptx-only", "sass-only", "wrong-arch"],
)
def test_the_headline_is_the_cause_not_the_first_failing_row(
    tmp_path: Path, variant: list[str], headline: str
) -> None:
    done = gate("--target", "sm_90", *variant, "--evidence", "ev", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # found without a GPU: a verdict, not "no device"
    assert f"Verdict: not accepted: {headline}" in done.stdout.splitlines()
    assert headline not in done.stderr  # said once, on stdout
    verdict = result_of(tmp_path / "ev")["verdict"]
    assert headline.startswith(verdict["reasons"][0])  # the first-ranked failure leads
    assert "execution not verified" in verdict["reasons"][-1]


def test_an_arch_specific_target_is_built_as_asked(tmp_path: Path) -> None:
    done = gate("--target", "sm_90a", "--evidence", "ev", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    commands = (tmp_path / "ev" / "commands.txt").read_text(encoding="utf-8")
    assert "arch=compute_90a,code=[sm_90a,compute_90a]" in commands
    listing = result_of(tmp_path / "ev")["artifacts"][0]["listing"]["entries"]
    assert {e["target"] for e in listing if e["kind"] == "SASS"} == {"sm_90a"}
    assert {e["target"] for e in listing if e["kind"] == "PTX"} == {"compute_90a"}


def test_every_stage_appears_and_the_missing_driver_is_said_once(tmp_path: Path) -> None:
    done = gate("--evidence", "ev", cwd=tmp_path)
    assert done.returncode == 4
    result = result_of(tmp_path / "ev")
    assert [(s["name"], s["status"]) for s in result["stages"]] == [
        ("environment", "ran"),
        ("probe", "failed"),
        ("build", "skipped"),
        ("inspect", "skipped"),
        ("execute", "skipped"),
    ]
    # This machine has no driver at all: the runtime's "driver version is insufficient"
    # must not be what the user reads first.
    statement = result["verdict"]["statement"]
    assert statement.startswith("not accepted: no CUDA device was usable: no NVIDIA driver")
    assert "--target" in statement
    assert done.stdout.count("no NVIDIA driver installed") <= 2  # the row and the verdict
    # ...and the whole console says the long sentence at most three times (the row, the
    # verdict, the stderr line scripts read); the progress line only says what stopped.
    console = done.stdout + done.stderr
    assert console.count("to check the artifacts without a GPU") <= 3
    assert "[2/8] probe stopped: no CUDA device was usable: no NVIDIA driver installed\n" in (
        done.stderr
    )
    # No driver at all: what the runtime says about the driver's version is not quoted.
    assert "driver version is insufficient" not in console
    root = ET.parse(tmp_path / "ev" / "junit.xml").getroot()  # noqa: S314
    classes = {c.get("classname") for c in root.iter("testcase") if c.find("skipped") is not None}
    assert {"default.gate.execute.native", "default.gate.execute.jit"} <= classes
