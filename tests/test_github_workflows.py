"""The workflows keep the hardening the issue asks for (zizmor checks more in `nox -s lint`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", re.M)


def test_there_are_the_three_workflows() -> None:
    assert {f.name for f in FILES} == {"gate.yml", "pr.yml", "release.yml"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_default_permissions_and_no_pull_request_target(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert re.search(r"^permissions: \{\}$", text, re.M)
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert "pull_request_target" not in code
    assert "secrets: inherit" not in text


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_actions_are_pinned_by_commit_with_a_version_comment(path: Path) -> None:
    for ref, rest in USES.findall(path.read_text(encoding="utf-8")):
        if ref.startswith("./"):
            continue
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
        assert re.match(r"\s+# v\d+\.\d+\.\d+", rest), f"{ref}: no version comment"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_checkout_keeps_the_token(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    checkouts = text.count("uses: actions/checkout@")
    assert checkouts == text.count("persist-credentials: false")


def test_the_gpu_job_is_isolated_and_recorded() -> None:
    text = (WORKFLOWS / "gate.yml").read_text(encoding="utf-8")
    assert "environment: ${{ inputs.approval-environment }}" in text
    assert "options: --gpus all" in text
    assert "CUDA_GATE_IMAGE: ${{ matrix.container }}" in text
    assert "CUDA_GATE_IMAGE_DIGEST: ${{ matrix.image_digest }}" in text
    assert 'CUDA_CACHE_PATH="$RUNNER_TEMP/cuda-jit-cache"' in text
    assert text.count("find . -mindepth 1 -delete") == 2
    assert "-m nox -s gate --" in text


def test_forks_wait_for_approval_and_get_no_status_token() -> None:
    text = (WORKFLOWS / "pr.yml").read_text(encoding="utf-8")
    assert "'cuda-gate-fork'" in text
    assert (
        "post-status: ${{ github.event.pull_request.head.repo.full_name == github.repository }}"
        in text
    )
    assert "cancel-in-progress: true" in text
