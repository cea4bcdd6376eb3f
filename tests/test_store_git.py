"""RunMeta from a real git checkout in a temp folder: revision, dirty flag, repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gate.errors import ConfigError
from gate.store import find_repository, run_meta_from_evidence
from gate.system import git
from tests.matrix_helpers import run_matrix

pytestmark = pytest.mark.integration


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "my kernels"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "k.cu").write_text("__global__ void k() {}\n")
    _git(repo, "add", "k.cu")
    _git(repo, "commit", "-q", "-m", "first")
    return repo


def test_revision_and_dirty_flag_come_from_git_without_result_json(checkout: Path) -> None:
    evidence = checkout / "gate-evidence"
    evidence.mkdir()
    (evidence / "driver.txt").write_text("580\n")
    env = {"RUNNER_NAME": "box"}
    meta = run_meta_from_evidence(evidence, env=env, cwd=checkout)
    assert meta.revision == _git(checkout, "rev-parse", "HEAD")
    # The gate's own evidence folder is untracked: that does not make the tree dirty.
    assert not meta.dirty
    assert meta.repository == "local/my-kernels"
    assert meta.run_id.startswith("local-")
    assert run_meta_from_evidence(evidence, env=env, cwd=checkout).run_id == meta.run_id
    (checkout / "k.cu").write_text("__global__ void k2() {}\n")
    assert run_meta_from_evidence(evidence, env=env, cwd=checkout).dirty


def test_revisions_resolve_through_git_in_the_checkout(checkout: Path, tmp_path: Path) -> None:
    head = _git(checkout, "rev-parse", "HEAD")
    _git(checkout, "tag", "v1.0")
    assert git.resolve("HEAD", checkout) == head
    assert git.resolve(head[:8], checkout) == head
    assert git.resolve("v1.0", checkout) == head
    assert git.resolve(head.upper(), tmp_path) == head  # a full id needs no checkout
    with pytest.raises(ConfigError, match="git cannot resolve it"):
        git.resolve("no-such-ref", checkout)
    with pytest.raises(ConfigError, match="git cannot resolve it"):
        git.resolve("HEAD", tmp_path)
    with pytest.raises(ConfigError, match="not a commit id or a ref"):
        git.resolve("--upload-pack=evil", checkout)


def test_repository_comes_from_the_origin_remote(checkout: Path) -> None:
    _git(checkout, "remote", "add", "origin", "git@github.com:acme/kernels.git")
    assert find_repository({}, checkout) == "acme/kernels"
    assert find_repository({"GITHUB_REPOSITORY": "other/repo"}, checkout) == "other/repo"


def test_outside_a_checkout_the_repository_must_be_given(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a git checkout"):
        find_repository({}, tmp_path)


def test_the_matrix_refuses_a_revision_git_cannot_resolve(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="git cannot resolve it"):
        run_matrix(["--revision", "0bad1dea", "--require", "x", "--store", str(tmp_path)])
