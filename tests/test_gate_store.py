"""`cuda-gate run` stores its evidence under the revision: local by default, S3 when set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate.store.settings import STORE_VARIABLES
from tests.s3server import WeedServer

pytestmark = pytest.mark.integration

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run([*GIT, "init", "-q"], cwd=path, check=True)
    (path / "README").write_text("x", encoding="utf-8")
    subprocess.run([*GIT, "add", "README"], cwd=path, check=True)
    subprocess.run([*GIT, "commit", "-qm", "x"], cwd=path, check=True)
    subprocess.run(
        [*GIT, "remote", "add", "origin", "https://github.com/acme/kernels.git"],
        cwd=path,
        check=True,
    )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=True
    ).stdout.strip()
    return path, head


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in STORE_VARIABLES and not k.startswith(("GITHUB_", "AWS_"))
    }
    env.update(
        XDG_DATA_HOME=str(tmp_path / "data"),
        RUNNER_NAME="gpu-box-1",
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
    )
    env.update(extra)
    return env


def run_gate(cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gate",
            "run",
            "--target",
            "sm_90",
            "--no-cuobjdump",
            "--evidence",
            str(cwd.parent / "ev"),
            "--quiet",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_without_settings_the_evidence_lands_in_the_local_store(
    tmp_path: Path, repo: tuple[Path, str]
) -> None:
    path, head = repo
    done = run_gate(path, clean_env(tmp_path))
    assert "evidence stored:" in done.stdout, done.stdout + done.stderr
    runs = tmp_path / "data" / "cuda-gate" / "evidence" / "acme" / "kernels" / head / "gpu-box-1"
    (run,) = runs.iterdir()
    index = json.loads((run / "index.json").read_text(encoding="utf-8"))
    names = {f["path"] for f in index["files"]}
    assert {"result.json", "junit.xml", "manifest.json", "elf-list.txt"} <= names
    assert (run / "result.json").read_bytes() == (tmp_path / "ev" / "result.json").read_bytes()


def test_with_s3_settings_the_evidence_lands_in_the_bucket_under_the_revision(
    tmp_path: Path, repo: tuple[Path, str], server: WeedServer
) -> None:
    path, head = repo
    server.client().create_bucket(Bucket="gate-evidence-test")
    env = clean_env(
        tmp_path,
        **server.env(),
        CUDA_GATE_STORE="s3://gate-evidence-test/ci",
        CUDA_GATE_SPOOL_DIR=str(tmp_path / "spool"),
    )
    done = run_gate(path, env)
    assert "evidence stored: s3://gate-evidence-test/ci" in done.stdout, done.stdout + done.stderr
    listed = server.client().list_objects_v2(
        Bucket="gate-evidence-test", Prefix=f"ci/acme/kernels/{head}/gpu-box-1/"
    )
    keys = [o["Key"] for o in listed.get("Contents", [])]
    assert any(k.endswith("/index.json") for k in keys)
    assert any(k.endswith("/manifest.json") for k in keys)
    assert not any((tmp_path / "spool").glob("*/*"))  # confirmed, so the spool is gone


def test_unreachable_store_keeps_the_evidence_and_says_so(
    tmp_path: Path, repo: tuple[Path, str]
) -> None:
    path, _ = repo
    env = clean_env(
        tmp_path,
        CUDA_GATE_STORE="s3://gate-evidence-test/ci",
        CUDA_GATE_S3_ENDPOINT="http://127.0.0.1:9",
        CUDA_GATE_S3_PATH_STYLE="true",
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="y",
        CUDA_GATE_SPOOL_DIR=str(tmp_path / "spool"),
    )
    done = run_gate(path, env)
    assert "evidence not stored:" in done.stdout
    assert "cuda-gate: error:" in done.stderr
    assert "Traceback" not in done.stderr
    assert (tmp_path / "ev" / "result.json").is_file()
    assert any((tmp_path / "spool").rglob("result.json"))
