"""Small faults of issue 21: nested remotes, a full destination disk, FIFOs, empty targets."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gate import config, proc
from gate.attest.signing import load_public_key
from gate.errors import BadInputError, ConfigError, ExitCode
from gate.evidence import mark
from gate.github.matrix import Status, evaluate
from gate.store import (
    LocalStore,
    RunIndex,
    RunMeta,
    fetch_run,
    find_repository,
    list_runs,
    local_settings,
    publish,
    run_meta_from_evidence,
)
from gate.store.records import split_repository
from gate.system import git
from gate.system.git import SourceInfo
from tests.matrix_helpers import keys
from tests.records import verdict_record, write_record
from tests.store_helpers import REVISION, make_evidence, meta, reseal, validate_index

NESTED = "group/sub/project"
OTHER_REVISION = "e" * 40


def _gate(cwd: Path, *args: str) -> proc.Result:
    """``cuda-gate ARGS`` as a real process (the environment is the test's isolated one)."""
    return proc.run([sys.executable, "-m", "gate", *args], cwd=cwd, timeout=120)


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


# -- a. the repository of a git remote: the whole path, nested groups kept -----------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:acme/kernels.git", "acme/kernels"),
        ("git@github.com:acme/kernels", "acme/kernels"),
        ("github.com:acme/kernels.git/", "acme/kernels"),
        ("https://github.com/acme/kernels.git", "acme/kernels"),
        ("https://github.com/acme/kernels", "acme/kernels"),
        ("https://github.com/acme/kernels/", "acme/kernels"),
        ("https://github.com/acme/kernels.git/", "acme/kernels"),
        ("https://user:token@ghe.example.com:8443/acme/kernels.git", "acme/kernels"),
        ("ssh://git@host:22/acme/kernels.git/", "acme/kernels"),
        ("ssh://git@host/acme/kernels", "acme/kernels"),
        ("git://host/acme/kernels.git", "acme/kernels"),
        ("git@gitlab.example.com:group/sub/project.git", NESTED),
        ("gitlab.example.com:group/sub/project", NESTED),
        ("https://gitlab.example.com/group/sub/project.git", NESTED),
        ("https://gitlab.example.com/group/sub/project/", NESTED),
        ("https://oauth2@gitlab.example.com:8443/group/sub/project", NESTED),
        ("ssh://git@gitlab.example.com:2222/group/sub/project.git", NESTED),
        ("ssh://gitlab.example.com/group/sub/deeper/project.git/", "group/sub/deeper/project"),
        ("  git@gitlab.example.com:group/sub/project.git\n", NESTED),
        ("https://github.com/kernels", None),
        ("git@github.com:kernels.git", None),
        ("file:///srv/git/acme/kernels.git", None),
        ("/srv/git/acme/kernels.git", None),
        ("../kernels", None),
        ("https://[::1/acme/kernels", None),
        ("not a url", None),
        ("", None),
    ],
)
def test_a_remote_names_its_whole_repository_path(url: str, expected: str | None) -> None:
    assert git.parse_remote(url) == expected


@pytest.mark.unit
def test_a_nested_repository_keeps_one_key_segment_per_group(tmp_path: Path) -> None:
    assert split_repository(NESTED) == ("group/sub", "project")
    assert split_repository("acme/kernels") == ("acme", "kernels")
    nested = RunMeta("group/sub", "project", REVISION, "box", "1")
    assert nested.repository == NESTED
    assert nested.run_key() == f"{NESTED}/{REVISION}/box/1"
    index = RunIndex(nested, (), None, "0")
    assert validate_index(index.to_json())["repository"] == NESTED
    assert RunIndex.from_json(index.to_json(), "index.json").meta == nested
    for bad in ("group/.conflicts/project", "group//project", "group/../project", "project"):
        with pytest.raises(ConfigError):
            split_repository(bad)


@pytest.mark.integration
def test_a_nested_origin_remote_is_stored_under_its_whole_path(tmp_path: Path) -> None:
    checkout = tmp_path / "project"
    checkout.mkdir()
    _git(checkout, "init", "-q")
    (checkout / "k.cu").write_text("__global__ void k() {}\n")
    _git(checkout, "add", "k.cu")
    _git(checkout, "commit", "-q", "-m", "first")
    _git(checkout, "remote", "add", "origin", "git@gitlab.example.com:group/sub/project.git")
    assert find_repository({}, checkout) == NESTED
    # The same project over https is the same repository, hence the same key.
    _git(checkout, "remote", "set-url", "origin", "https://gitlab.example.com/group/sub/project")
    assert find_repository({}, checkout) == NESTED
    evidence = checkout / "gate-evidence"
    evidence.mkdir()
    mark(evidence)
    (evidence / "driver.txt").write_text("580\n")
    # A run outside CI records no repository and no revision: both come from git.
    write_record(evidence, verdict_record(True, source=SourceInfo(None, None, None)))
    reseal(evidence)
    found = run_meta_from_evidence(evidence, env={"RUNNER_NAME": "box"}, cwd=checkout)
    assert (found.owner, found.repo) == ("group/sub", "project")
    settings = local_settings(tmp_path / "store", tmp_path / "spool")
    publish(evidence, found, settings)
    store = LocalStore(tmp_path / "store")
    revision = _git(checkout, "rev-parse", "HEAD")
    assert (tmp_path / "store" / "group" / "sub" / "project" / revision).is_dir()
    [run] = list_runs(store, NESTED, revision)
    assert run.complete
    fetch_run(store, NESTED, revision, runner=run.runner, run_id=run.run_id, dest=tmp_path / "out")
    assert (tmp_path / "out" / "driver.txt").read_text() == "580\n"


@pytest.mark.unit
def test_the_matrix_sees_older_evidence_of_a_nested_repository_as_stale(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "store", tmp_path / "spool")
    older = RunMeta("group/sub", "project", OTHER_REVISION, "gpu-box-1", "1", runner_class="h200")
    publish(make_evidence(tmp_path / "ev"), older, settings)
    _, pub = keys(tmp_path / "keys")
    report = evaluate(
        LocalStore(tmp_path / "store"),
        NESTED,
        REVISION,
        ["h200"],
        key=load_public_key(pub),
        workdir=tmp_path / "work",
    )
    [result] = report.results
    assert result.status is Status.STALE, result.detail
    assert OTHER_REVISION[:12] in result.detail


# -- b. `evidence get` into a full disk: the destination's fault, exit 5 -------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted for the test (root only), unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"needs root to mount a tmpfs (mount said: {done.stderr.strip()})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _stored_big_run(tmp_path: Path) -> Path:
    """A local store holding one run with a 256 KiB file; the store's folder."""
    settings = local_settings(tmp_path / "store", tmp_path / "spool")
    publish(make_evidence(tmp_path / "ev", big=256 << 10), meta(), settings)
    return tmp_path / "store"


def _get(tmp_path: Path, store: Path, dest: Path) -> proc.Result:
    return _gate(
        tmp_path, "evidence", "get", "--store", str(store), "--repository", "acme/kernels",
        "--revision", REVISION, "--runner", "gpu-box-1", "--run", "20261129T180000Z-1a2b3c",
        "--dest", str(dest),
    )  # fmt: skip


@pytest.mark.integration
def test_evidence_get_into_a_full_disk_is_exit_5_naming_the_destination(
    tmp_path: Path, small_disk: Path
) -> None:
    store = _stored_big_run(tmp_path)
    dest = small_disk / "out"
    result = _get(tmp_path, store, dest)
    assert result.returncode == ExitCode.EVIDENCE, result.stderr
    (line,) = result.stderr.splitlines()
    assert line == (
        f"cuda-gate: error: cannot write the evidence into {dest}: No space left on device"
    )
    # Nothing half-written is left behind to look like a fetched run.
    assert list(small_disk.iterdir()) == []


@pytest.mark.integration
def test_evidence_get_from_a_store_that_cannot_be_read_stays_exit_20(tmp_path: Path) -> None:
    store = _stored_big_run(tmp_path)
    stored = store / "acme" / "kernels" / REVISION / "gpu-box-1" / "20261129T180000Z-1a2b3c"
    (stored / "libkernels.so").unlink()
    (stored / "libkernels.so").mkdir()  # the store's file cannot be read: not the disk's fault
    result = _get(tmp_path, store, tmp_path / "out")
    assert result.returncode == ExitCode.STORAGE, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"cuda-gate: error: cannot read {stored / 'libkernels.so'}: ")


# -- c. a FIFO as an artifact: not a regular file, never opened ----------------------------


@pytest.mark.integration
def test_inspect_of_a_fifo_says_not_a_regular_file(tmp_path: Path) -> None:
    pipe = tmp_path / "lib.so"
    os.mkfifo(pipe)
    result = _gate(tmp_path, "inspect", "--device", "9.0", str(pipe))  # would block if opened
    assert result.returncode == ExitCode.BAD_INPUT, result.stderr
    assert result.stderr.splitlines() == [f"cuda-gate: error: {pipe}: not a regular file (a FIFO)"]


@pytest.mark.unit
def test_a_fifo_matched_by_an_artifact_glob_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    pipe = tmp_path / "build" / "lib.so"
    os.mkfifo(pipe)
    (tmp_path / "cuda-gate.toml").write_text('[[artifact]]\npath = "build/*.so"\n')
    loaded = config.load(tmp_path)
    with pytest.raises(BadInputError) as info:  # exit 6, as `inspect` of the same path
        config.resolve_artifact_specs(loaded)
    where = loaded.project_dir
    assert info.value.one_line() == (
        f"{where / 'cuda-gate.toml'}: artifact[0].path: {where / 'build' / 'lib.so'}: "
        "not a regular file (a FIFO)"
    )
    # Beside a regular file it is refused too: the glob named it as an artifact.
    (tmp_path / "build" / "real.so").write_bytes(b"x")
    with pytest.raises(BadInputError, match=r"lib\.so: not a regular file \(a FIFO\)"):
        config.resolve_artifact_specs(loaded)


# -- d. `run --target ''` and empty --sass/--ptx: usage errors naming the option ----------


@pytest.mark.integration
@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--target", ""], "--target"),
        (["--target="], "--target"),
        (["--target", "  "], "--target"),
        (["--sass", ""], "--sass"),
        (["--sass", "sm_90", ""], "--sass"),
        (["--ptx", " "], "--ptx"),
    ],
)
def test_an_empty_target_is_a_usage_error_naming_the_option(
    tmp_path: Path, argv: list[str], option: str
) -> None:
    result = _gate(tmp_path, "run", "--no-store", "--evidence", str(tmp_path / "ev"), *argv)
    assert result.returncode == ExitCode.USAGE, result.stderr
    last = result.stderr.splitlines()[-1]
    why = "empty target (like sm_121, sm_90a or 12.1)"
    assert last == f"cuda-gate run: error: argument {option}: {why}"
    assert not (tmp_path / "ev").exists()
