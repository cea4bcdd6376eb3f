"""The local folder store, the spool, settings and records: no processes, no network."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import jsonschema
import pytest

from gate.errors import (
    BadInputError,
    ConfigError,
    EvidenceChangedError,
    ExitCode,
    StorageConflictError,
    StorageError,
)
from gate.store import (
    LocalStore,
    ObjectExistsError,
    ProgressEvent,
    ResumeReport,
    RunIndex,
    RunMeta,
    fetch_run,
    kept_aside,
    latest_run,
    list_runs,
    load_settings,
    local_settings,
    pending,
    publish,
    resume,
    run_meta_from_evidence,
)
from gate.store.base import PutOutcome
from gate.store.progress import StderrProgress
from gate.store.records import check_file_name
from gate.store.settings import STORE_VARIABLES, StoreSettings
from gate.system.git import parse_remote
from tests.store_helpers import REVISION, make_evidence, meta, reseal, run_cli, validate_index

pytestmark = pytest.mark.unit

RUN_KEY = f"acme/kernels/{REVISION}/gpu-box-1/20261129T180000Z-1a2b3c"


@pytest.fixture
def settings(tmp_path: Path) -> StoreSettings:
    return local_settings(tmp_path / "store", tmp_path / "spool")


# -- settings ---------------------------------------------------------------------------


def test_nothing_configured_is_the_local_store_under_data_home(tmp_path: Path) -> None:
    s = load_settings(tmp_path, env={"XDG_DATA_HOME": str(tmp_path / "data")})
    assert s.kind == "local"
    assert s.local_dir == tmp_path / "data" / "cuda-gate" / "evidence"
    assert s.spool_dir == tmp_path / "data" / "cuda-gate" / "spool"


def test_environment_configures_s3(tmp_path: Path) -> None:
    s = load_settings(
        tmp_path,
        env={
            "CUDA_GATE_STORE": "s3://evidence-bucket/ci/gate/",
            "CUDA_GATE_S3_ENDPOINT": "http://127.0.0.1:9000",
            "CUDA_GATE_S3_PATH_STYLE": "yes",
            "CUDA_GATE_S3_REGION": "eu-west-1",
            "CUDA_GATE_OBJECT_LOCK_MODE": "compliance",
            "CUDA_GATE_OBJECT_LOCK_DAYS": "365",
            "CUDA_GATE_SPOOL_DIR": str(tmp_path / "sp"),
        },
    )
    assert (s.kind, s.bucket, s.prefix, s.endpoint, s.region) == (
        "s3",
        "evidence-bucket",
        "ci/gate",
        "http://127.0.0.1:9000",
        "eu-west-1",
    )
    assert s.path_style
    assert (s.object_lock_mode, s.object_lock_days) == ("COMPLIANCE", 365)
    assert s.spool_dir == tmp_path / "sp"
    assert s.describe() == "s3://evidence-bucket/ci/gate at http://127.0.0.1:9000"


def test_pyproject_table_is_read_and_environment_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.cuda-gate.store]\nurl = "s3://from-file/p"\npath-style = true\n'
        'object-lock-mode = "GOVERNANCE"\nobject-lock-days = 7\n'
    )
    s = load_settings(tmp_path, env={})
    assert (s.bucket, s.prefix, s.path_style, s.object_lock_mode) == (
        "from-file",
        "p",
        True,
        "GOVERNANCE",
    )
    s = load_settings(tmp_path, env={"CUDA_GATE_STORE": "s3://from-env"})
    assert (s.bucket, s.prefix) == ("from-env", "")


def test_cuda_gate_toml_comes_before_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-gate.store]\nurl = "s3://pyproj"\n')
    (tmp_path / "cuda-gate.toml").write_text(f'[store]\nurl = "{tmp_path / "folder"}"\n')
    s = load_settings(tmp_path, env={})
    assert (s.kind, s.local_dir) == ("local", tmp_path / "folder")


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('url = "s3://b"\n', "bucket name 'b' is not 3-63 characters"),
        (
            'url = "s3://bucket"\nobject-lock-mode = "FOREVER"\nobject-lock-days = 1\n',
            "'FOREVER' is not COMPLIANCE or GOVERNANCE",
        ),
        ('url = "s3://bucket"\nobject-lock-mode = "COMPLIANCE"\n', "needs object-lock-days"),
        (
            'url = "s3://bucket"\nobject-lock-mode = "COMPLIANCE"\nobject-lock-days = 0\n',
            "key 'object-lock-days': 0 is not a whole number from 1 to 36500",
        ),
        ('url = "s3://bucket"\npath-style = "maybe"\n', "'maybe' is not true or false"),
        (
            'url = "s3://bucket"\nmultipart-threshold = 1024\n',
            "is not a whole number from 5242880 to",
        ),
        ('bucket = "x"\n', "store.bucket: unknown key"),  # refused as the config loads
        ('endpoint = "http://x"\n', "the store is the local folder"),
    ],
)
def test_bad_config_names_the_file_and_key(tmp_path: Path, table: str, expected: str) -> None:
    (tmp_path / "cuda-gate.toml").write_text("[store]\n" + table)
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env={})
    assert str(tmp_path / "cuda-gate.toml") in info.value.one_line()
    assert expected in info.value.one_line()


def test_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="environment variable CUDA_GATE_OBJECT_LOCK_DAYS"):
        load_settings(
            tmp_path,
            env={
                "CUDA_GATE_STORE": "s3://bucket",
                "CUDA_GATE_OBJECT_LOCK_MODE": "GOVERNANCE",
                "CUDA_GATE_OBJECT_LOCK_DAYS": "ten",
            },
        )


def test_unreadable_toml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "cuda-gate.toml").write_text("[store\n")
    with pytest.raises(ConfigError, match=r"cuda-gate\.toml: not valid TOML"):
        load_settings(tmp_path, env={})


# -- records ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"revision": "abc123"},
        {"revision": "g" * 40},
        {"runner": "a/b"},
        {"run_id": ".."},
        {"owner": ""},
    ],
)
def test_run_meta_refuses_what_cannot_be_a_key(fields: dict[str, str]) -> None:
    base = {"owner": "acme", "repo": "kernels", "revision": REVISION, "runner": "r", "run_id": "1"}
    values = {**base, **fields}
    with pytest.raises(ConfigError):
        RunMeta(
            values["owner"], values["repo"], values["revision"], values["runner"], values["run_id"]
        )


def test_run_meta_normalises_the_revision_to_lower_case() -> None:
    m = RunMeta("acme", "kernels", REVISION.upper(), "r", "1")
    assert m.run_key() == f"acme/kernels/{REVISION}/r/1"


@pytest.mark.parametrize("name", ["../x", "a//b", "a/./b", "sp ace.txt", "/abs"])
def test_file_names_that_cannot_be_keys_are_refused(name: str) -> None:
    with pytest.raises(BadInputError):
        check_file_name(name)


def test_remote_urls_give_owner_and_repo() -> None:
    assert parse_remote("git@github.com:acme/kernels.git") == "acme/kernels"
    assert parse_remote("https://github.com/acme/kernels") == "acme/kernels"
    assert parse_remote("ssh://git@host:22/acme/kernels.git/") == "acme/kernels"
    assert parse_remote("nonsense") is None


def test_run_meta_from_result_json_and_environment(tmp_path: Path) -> None:
    evidence = make_evidence(tmp_path / "ev")
    m = run_meta_from_evidence(evidence, env={}, cwd=tmp_path)
    assert m == meta()
    overridden = run_meta_from_evidence(
        evidence, env={}, cwd=tmp_path, overrides={"runner": "box-2", "run_id": None}
    )
    assert (overridden.runner, overridden.run_id) == ("box-2", "20261129T180000Z-1a2b3c")


def test_names_the_machine_supplies_are_made_key_safe(tmp_path: Path) -> None:
    evidence = tmp_path / "ev"
    evidence.mkdir()
    (evidence / "driver.txt").write_text("x")
    env = {"GITHUB_REPOSITORY": "acme/kernels", "RUNNER_NAME": "my runner #2"}
    m = run_meta_from_evidence(evidence, env=env, cwd=tmp_path, overrides={"revision": REVISION})
    assert m.runner == "my-runner-2"


@pytest.mark.parametrize(
    ("option", "value"),
    [("--run-id", "../.."), ("--run-id", ""), ("--runner", "a/b"), ("--runner", "my runner #2")],
)
def test_a_name_given_on_the_command_line_is_refused_not_rewritten(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
) -> None:
    message = f"{option} {value!r} cannot be used in a storage key"
    evidence = make_evidence(tmp_path / "ev")
    store = tmp_path / "store"
    code, out, err = run_cli(
        monkeypatch, capsys, "upload", str(evidence), "--store", str(store), option, value
    )
    assert code == int(ExitCode.CONFIG)
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("cuda-gate: error: ")
    assert message in err
    assert not store.exists()


@pytest.mark.parametrize("dest", [None, "got"])
def test_evidence_get_refuses_a_run_id_that_is_not_one_segment(
    tmp_path: Path,
    settings: StoreSettings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    dest: str | None,
) -> None:
    publish(make_evidence(tmp_path / "ev"), meta(), settings)
    monkeypatch.chdir(tmp_path)
    argv = ["evidence", "get", "--revision", REVISION, "--repository", "acme/kernels"]
    argv += ["--store", str(tmp_path / "store"), "--runner", "gpu-box-1", "--run", "../x"]
    code, out, err = run_cli(monkeypatch, capsys, *argv, *(["--dest", dest] if dest else []))
    assert code == int(ExitCode.CONFIG)
    assert out == ""
    assert err.strip() == (
        "cuda-gate: error: --run '../x' cannot be used in a storage key (letters, digits, _.-)"
    )
    with pytest.raises(ConfigError, match=r"run id '\.\.' cannot be used"):
        fetch_run(
            LocalStore(tmp_path / "store"),
            "acme/kernels",
            REVISION,
            runner="gpu-box-1",
            run_id="..",
            dest=tmp_path / "d",
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ev", "spool", "store"]


def test_run_meta_without_result_json_uses_github_environment(tmp_path: Path) -> None:
    evidence = tmp_path / "ev"
    evidence.mkdir()
    (evidence / "driver.txt").write_text("x")
    env = {
        "GITHUB_REPOSITORY": "acme/kernels",
        "GITHUB_RUN_ID": "987",
        "GITHUB_RUN_ATTEMPT": "2",
        "RUNNER_NAME": "runner-7",
        "CUDA_GATE_RUNNER_CLASS": "spark",
    }
    m = run_meta_from_evidence(evidence, env=env, cwd=tmp_path, overrides={"revision": REVISION})
    assert (m.repository, m.run_id, m.runner, m.runner_class) == (
        "acme/kernels",
        "gh-987-2",
        "runner-7",
        "spark",
    )


def test_index_is_deterministic_schema_valid_and_round_trips(
    tmp_path: Path, settings: StoreSettings
) -> None:
    result = publish(make_evidence(tmp_path / "ev"), meta(), settings)
    data = result.index.to_json()
    assert data == result.index.to_json()
    doc = validate_index(data)
    assert doc["verdict"] == {
        "accepted": True,
        "statement": "Passed with the current driver, current artifacts, and tested entry points.",
    }
    assert RunIndex.from_json(data, "x") == result.index


def test_the_index_schema_takes_what_the_code_writes_and_no_more(
    tmp_path: Path, settings: StoreSettings
) -> None:
    # A SHA-256 repository's revision is 64 hex digits; check_revision takes it.
    long_revision = "0123abcd" * 8
    m = RunMeta("acme", "kernels", long_revision, "gpu-box-1", "1")
    result = publish(make_evidence(tmp_path / "ev"), m, settings)
    doc = validate_index(result.index.to_json())
    assert doc["revision"] == long_revision
    files = doc["files"]
    assert isinstance(files, list)
    assert {".cuda-gate", "manifest.json"} <= {f["path"] for f in files}
    dotted = json.loads(result.index.to_json())
    dotted["repository"] = ".conflicts/kernels"
    with pytest.raises(jsonschema.ValidationError):
        validate_index(json.dumps(dotted).encode())


def test_an_index_of_another_version_is_refused() -> None:
    with pytest.raises(BadInputError, match="where: unsupported evidence index version 2"):
        RunIndex.from_json(json.dumps({"version": 2}).encode(), "where")
    with pytest.raises(BadInputError, match="where: not a valid evidence index"):
        RunIndex.from_json(b'{"version": 1}', "where")


HOSTILE = b'{"version": 1, "files": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def test_a_hostile_index_is_one_line_not_a_recursion_error() -> None:
    with pytest.raises(BadInputError, match="where: JSON nested too deeply"):
        RunIndex.from_json(HOSTILE, "where")
    # Deep enough to hurt a recursive reader, shallow enough for json.loads: refused too.
    nested = b'{"version": 1, "x": ' + b"[" * 70 + b"]" * 70 + b"}"
    with pytest.raises(BadInputError, match="over 64 levels"):
        RunIndex.from_json(nested, "where")


def test_evidence_list_shows_an_unreadable_run_as_one_row_and_lists_the_others(
    tmp_path: Path,
    settings: StoreSettings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    publish(make_evidence(tmp_path / "ev"), meta(), settings)
    store = LocalStore(tmp_path / "store")
    bad_key = f"acme/kernels/{REVISION}/gpu-box-2/20261129T170000Z-000000"
    store.put_bytes(f"{bad_key}/driver.txt", b"x")
    store.put_bytes(f"{bad_key}/index.json", HOSTILE)
    with pytest.raises(BadInputError, match="nested too deeply"):
        list_runs(store, "acme/kernels", REVISION)  # a decision never skips an unreadable run
    code, out, err = run_cli(
        monkeypatch,
        capsys,
        "evidence",
        "list",
        "--revision",
        REVISION,
        "--repository",
        "acme/kernels",
        "--store",
        str(tmp_path / "store"),
    )
    assert code == int(ExitCode.BAD_INPUT)
    lines = out.splitlines()
    # Newest first: the good run finished 18:00, the unreadable one's id says 17:00.
    assert lines[2].split() == [
        "accepted", "2026-11-29", "18:00:00", REVISION[:12], "gpu-box-1", "h200", "1a2b3c",
    ]  # fmt: skip
    assert lines[3].split() == ["unreadable", "-", REVISION[:12], "gpu-box-2", "-", "000000"]
    assert lines[4] == (
        f"20261129T170000Z-000000 (gpu-box-2): {tmp_path / 'store'}/{bad_key}/index.json: "
        "JSON nested too deeply (over 64 levels)"
    )
    assert lines[5] == "2 runs: 1 accepted, 1 unreadable"
    expected = (
        "cuda-gate: error: 1 of 2 runs have an unreadable index "
        "(first: run 20261129T170000Z-000000 of gpu-box-2)"
    )
    assert err.strip().splitlines() == [expected]


# -- local store --------------------------------------------------------------------------


def test_put_is_write_once(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    assert store.put_bytes("a/b.txt", b"one") is PutOutcome.STORED
    assert store.put_bytes("a/b.txt", b"one") is PutOutcome.PRESENT
    with pytest.raises(ObjectExistsError, match="refusing to overwrite"):
        store.put_bytes("a/b.txt", b"two")
    assert store.get_bytes("a/b.txt") == b"one"
    assert store.get_bytes("a/missing") is None
    assert not os.access(tmp_path / "s" / "a" / "b.txt", os.W_OK) or os.geteuid() == 0


def test_a_link_in_the_store_is_never_taken_for_stored_evidence(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    same = tmp_path / "same-bytes"
    same.write_bytes(b"one")
    (tmp_path / "s" / "a").mkdir(parents=True)
    (tmp_path / "s" / "a" / "b.txt").symlink_to(same)
    with pytest.raises(ObjectExistsError, match=r"a/b\.txt: it is not a regular file"):
        store.put_bytes("a/b.txt", b"one")
    (tmp_path / "s" / "a" / "dangling.txt").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ObjectExistsError, match="not a regular file"):
        store.put_file("a/dangling.txt", same, hashlib.sha256(b"one").hexdigest(), 3)
    assert not (tmp_path / "nowhere").exists()


def test_put_file_detects_a_source_that_does_not_match(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    src = tmp_path / "f"
    src.write_bytes(b"content")
    with pytest.raises(StorageError, match="changed while it was stored"):
        store.put_file("k", src, "0" * 64, 7)
    assert list(store.list_keys("")) == []


def test_publish_lands_in_the_local_store_and_drops_the_spool(
    tmp_path: Path, settings: StoreSettings
) -> None:
    result = publish(make_evidence(tmp_path / "ev"), meta(), settings)
    assert result.location == f"{tmp_path / 'store'}/{RUN_KEY}"
    assert set(result.uploaded) == {
        ".cuda-gate",
        "driver.txt",
        "sass.txt",
        "logs/native.log",
        "result.json",
        "manifest.json",
        "test-result.json",
        "index.json",
    }
    assert result.uploaded[-1] == "index.json"
    assert pending(settings.spool_dir) == ()
    assert not any(settings.spool_dir.iterdir())
    assert (tmp_path / "store" / RUN_KEY / "logs" / "native.log").read_text() == "value=42\n"


def test_rerun_of_the_same_run_is_idempotent(tmp_path: Path, settings: StoreSettings) -> None:
    evidence = make_evidence(tmp_path / "ev")
    publish(evidence, meta(), settings)
    again = publish(evidence, meta(), settings)
    assert again.uploaded == ()
    assert len(again.already_present) == 8


def test_changed_evidence_under_the_same_run_id_is_a_conflict_kept_aside(
    tmp_path: Path,
    settings: StoreSettings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CUDA_GATE_SPOOL_DIR", str(settings.spool_dir))
    evidence = make_evidence(tmp_path / "ev")
    publish(evidence, meta(), settings)
    (evidence / "driver.txt").write_text("tampered\n")
    reseal(evidence)  # a second gate run that reused the run id
    code, out, err = run_cli(
        monkeypatch, capsys, "upload", str(evidence), "--store", str(settings.local_dir)
    )
    assert (code, out) == (int(ExitCode.STORAGE_CONFLICT), "")
    (line,) = err.strip().splitlines()
    (kept,) = kept_aside(settings.spool_dir)
    assert line.startswith(
        f"cuda-gate: error: {tmp_path / 'store'}/{RUN_KEY}: another run with this id is already "
        f"stored (its index differs); run {RUN_KEY} was not stored and is kept in {kept.folder}"
    )
    assert f"cuda-gate upload {kept.folder / 'evidence'} --run-id NEW-ID" in line
    assert "--resume" not in line
    # Out of the queue, kept whole, and nothing of it added to the stored run.
    assert pending(settings.spool_dir) == ()
    assert kept.folder.parent == settings.spool_dir / ".conflicts"
    assert (kept.folder / "evidence" / "driver.txt").read_text() == "tampered\n"
    assert kept.index is not None
    assert kept.index.meta.run_key() == RUN_KEY
    stored = tmp_path / "store" / RUN_KEY / "driver.txt"
    assert stored.read_text() == "NVIDIA H200, 580.159.04\n"
    # The same refusal again keeps no second copy.
    with pytest.raises(StorageConflictError):
        publish(evidence, meta(), settings)
    assert kept_aside(settings.spool_dir) == (kept,)
    # What the hint says works: the kept evidence goes up under a new id.
    code, out, _ = run_cli(
        monkeypatch,
        capsys,
        "upload",
        str(kept.folder / "evidence"),
        "--store",
        str(settings.local_dir),
        "--run-id",
        "20261129T180000Z-1a2b3c-2",
    )
    assert code == 0
    assert "/gpu-box-1/20261129T180000Z-1a2b3c-2 (8 stored, 0 already present)" in out


def test_a_conflict_does_not_block_resume(
    tmp_path: Path,
    settings: StoreSettings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CUDA_GATE_SPOOL_DIR", str(settings.spool_dir))
    publish(make_evidence(tmp_path / "first"), meta(), settings)
    # Two runs queued during an outage; one of them reuses the stored run's id.
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the store should be")
    broken = local_settings(blocker / "store", settings.spool_dir)
    clash = reseal(make_evidence(tmp_path / "clash", runner="gpu-box-1"))
    (clash / "sass.txt").write_text("other SASS\n")
    reseal(clash)
    other = make_evidence(tmp_path / "other", run_id="20261129T190000Z-000002")
    for folder, m in ((clash, meta()), (other, meta(run_id="20261129T190000Z-000002"))):
        with pytest.raises(StorageError, match="kept in the spool"):
            publish(folder, m, broken)
    assert len(pending(settings.spool_dir)) == 2

    argv = ("upload", "--resume", "--store", str(settings.local_dir))
    code, out, err = run_cli(monkeypatch, capsys, *argv)
    assert code == int(ExitCode.STORAGE_CONFLICT)
    (kept,) = kept_aside(settings.spool_dir)
    assert (
        f"stored {tmp_path / 'store'}/acme/kernels/{REVISION}/gpu-box-1/20261129T190000Z-000002"
        in (out)
    )
    assert f"  {kept.folder} ({RUN_KEY})" in out.splitlines()
    assert err.startswith(
        "cuda-gate: error: 1 of 2 spooled runs conflict with evidence already stored and were "
        "set aside; first: "
    )
    assert pending(settings.spool_dir) == ()
    # Later resumes are not held up by it (they used to exit 20 for ever): listed, exit 0.
    code, out, err = run_cli(monkeypatch, capsys, *argv)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"nothing to resume: no run is waiting in the spool {settings.spool_dir}",
        "1 run(s) kept aside after a conflict (not retried):",
        f"  {kept.folder} ({RUN_KEY})",
    ]


def test_unwritable_store_keeps_the_spool_and_resume_finishes(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store should be")
    broken = local_settings(blocker / "store", tmp_path / "spool")
    with pytest.raises(StorageError, match="kept in the spool") as info:
        publish(make_evidence(tmp_path / "ev"), meta(), broken)
    assert "cuda-gate upload --resume" in info.value.one_line()
    assert int(info.value.exit_code) == 20
    assert len(pending(tmp_path / "spool")) == 1
    # Still unreachable: the run stays queued and resume says so with status 20.
    report = resume(broken)
    assert (report.stored, report.conflicts, len(report.failures)) == ((), (), 1)
    error = report.error()
    assert error is not None
    assert int(error.exit_code) == 20
    assert len(pending(tmp_path / "spool")) == 1
    fixed = local_settings(tmp_path / "store", tmp_path / "spool")
    report = resume(fixed)
    assert [r.index.meta.run_id for r in report.stored] == ["20261129T180000Z-1a2b3c"]
    assert report.error() is None
    assert pending(tmp_path / "spool") == ()
    assert resume(fixed) == ResumeReport((), (), (), ())


def test_a_dotted_owner_cannot_be_mistaken_for_the_conflicts_area() -> None:
    with pytest.raises(ConfigError, match="cannot start with a dot"):
        RunMeta(".conflicts", "kernels", REVISION, "r", "1")


def test_list_runs_shows_complete_and_incomplete_runs(
    tmp_path: Path, settings: StoreSettings
) -> None:
    publish(make_evidence(tmp_path / "a"), meta(), settings)
    publish(
        make_evidence(tmp_path / "b", run_id="20261129T190000Z-ffffff", accepted=False),
        meta(run_id="20261129T190000Z-ffffff"),
        settings,
    )
    store = LocalStore(tmp_path / "store")
    half = f"acme/kernels/{REVISION}/other-box/20261129T200000Z-000000/driver.txt"
    store.put_bytes(half, b"partial upload")
    runs = list_runs(store, "acme/kernels", REVISION)
    assert [(r.runner, r.run_id, r.complete) for r in runs] == [
        ("gpu-box-1", "20261129T180000Z-1a2b3c", True),
        ("gpu-box-1", "20261129T190000Z-ffffff", True),
        ("other-box", "20261129T200000Z-000000", False),
    ]
    assert latest_run(runs, "gpu-box-1").run_id == "20261129T190000Z-ffffff"
    with pytest.raises(EvidenceChangedError, match="no complete run of runner 'other-box'"):
        latest_run(runs, "other-box")
    assert list_runs(store, "acme/kernels", "f" * 40) == ()


def test_fetch_run_checks_every_file(tmp_path: Path, settings: StoreSettings) -> None:
    evidence = make_evidence(tmp_path / "ev")
    publish(evidence, meta(), settings)
    store = LocalStore(tmp_path / "store")
    dest = tmp_path / "got"
    index = fetch_run(
        store, "acme/kernels", REVISION, runner="gpu-box-1", run_id=meta().run_id, dest=dest
    )
    assert (dest / "logs" / "native.log").read_bytes() == (
        evidence / "logs/native.log"
    ).read_bytes()
    validate_index((dest / "index.json").read_bytes())
    assert index.verdict is not None
    assert index.verdict.accepted

    stored = tmp_path / "store" / RUN_KEY / "sass.txt"
    stored.chmod(0o644)
    stored.write_text("swapped\n")
    with pytest.raises(EvidenceChangedError, match=r"sass.txt: sha256 .* does not match the index"):
        fetch_run(
            store,
            "acme/kernels",
            REVISION,
            runner="gpu-box-1",
            run_id=meta().run_id,
            dest=tmp_path / "got2",
        )
    assert not (tmp_path / "got2").exists()
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []


# -- progress and CLI -----------------------------------------------------------------------


def test_progress_prints_quarters_in_a_log() -> None:
    stream = io.StringIO()
    bar = StderrProgress(stream)
    total = 40 << 20
    for done in range(0, total + 1, 5 << 20):
        bar(ProgressEvent("acme/x/artifact.bin", done, total, multipart=True))
    bar(ProgressEvent("acme/x/small.txt", 10, 10, multipart=False))
    lines = stream.getvalue().splitlines()
    assert [line.split("]")[1].split("%")[0].strip() for line in lines] == [
        "0",
        "25",
        "50",
        "75",
        "100",
    ]
    assert lines[-1].endswith("40.0/40.0 MiB artifact.bin")


def test_cli_upload_list_and_get_on_the_local_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/kernels")
    for name in STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    make_evidence(tmp_path / "gate-evidence")
    code, out, _ = run_cli(monkeypatch, capsys, "upload", "--quiet")
    assert code == 0
    assert f"stored {tmp_path}/data/cuda-gate/evidence/{RUN_KEY} (8 stored" in out

    code, out, _ = run_cli(monkeypatch, capsys, "evidence", "list", "--revision", REVISION)
    assert code == 0
    assert "accepted  2026-11-29 18:00:00  0123456789ab  gpu-box-1  h200   1a2b3c\n" in out

    code, out, _ = run_cli(
        monkeypatch, capsys, "evidence", "get", "--revision", REVISION, "--runner", "gpu-box-1"
    )
    assert code == 0
    assert (tmp_path / "evidence-gpu-box-1-20261129T180000Z-1a2b3c" / "result.json").is_file()

    code, _, err = run_cli(monkeypatch, capsys, "evidence", "list", "--revision=-bad")
    assert code == int(ConfigError.exit_code)
    assert err.strip() == "cuda-gate: error: revision '-bad' is not a commit id or a ref"

    code, out, _ = run_cli(monkeypatch, capsys, "upload", "--resume")
    assert code == 0
    assert out.startswith("nothing to resume")
