"""`cuda-gate evidence list`: newest first, short ids `evidence get` takes, --all, --json."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest

from gate.commands.evidence import human_time
from gate.errors import ExitCode
from gate.store import LocalStore, RunMeta, StoreSettings, local_settings, publish
from gate.store.records import short_run_id, started_from_id
from tests.records import WHEN
from tests.store_helpers import REVISION, make_evidence, meta, run_cli

SCHEMA = Path(__file__).parents[1] / "gate" / "schemas" / "evidence-list.schema.json"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"
HOUR = timedelta(hours=1)


@pytest.fixture
def settings(tmp_path: Path) -> StoreSettings:
    return local_settings(tmp_path / "store", tmp_path / "spool")


def store_run(
    tmp_path: Path,
    settings: StoreSettings,
    run_id: str,
    runner: str = "gpu-box-1",
    *,
    accepted: bool = True,
    after: timedelta = timedelta(0),
    run_meta: RunMeta | None = None,
) -> None:
    """Publish a run through the store's own write API, as `cuda-gate upload` does."""
    folder = make_evidence(
        tmp_path / "ev" / runner / run_id,
        run_id=run_id,
        runner=runner,
        accepted=accepted,
        finished=WHEN + after,
    )
    publish(folder, run_meta or meta(run_id, runner), settings)


@pytest.fixture
def four_runs(tmp_path: Path, settings: StoreSettings) -> LocalStore:
    """Three complete runs and one half-written one, stored out of time order."""
    store_run(tmp_path, settings, "gh-77-1", after=1.5 * HOUR)  # 19:30
    store_run(tmp_path, settings, "20261129T180000Z-1a2b3c")  # 18:00
    store_run(
        tmp_path, settings, "20261129T190000Z-4d5e6f", "gpu-box-2", accepted=False, after=HOUR
    )
    store = LocalStore(tmp_path / "store")
    # Started 20:00 (its id says so), never finished: no index.
    half = f"acme/kernels/{REVISION}/gpu-box-1/20261129T200000Z-abcdef"
    store.put_bytes(f"{half}/driver.txt", b"NVIDIA H200\n")
    return store


def listing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str
) -> tuple[int, str, str]:
    return run_cli(
        monkeypatch, capsys, "evidence", "list", "--repository", "acme/kernels",
        "--store", str(tmp_path / "store"), *args,
    )  # fmt: skip


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


@pytest.mark.unit
@pytest.mark.usefixtures("four_runs")
def test_the_table_is_newest_first_with_short_ids_and_a_count_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = listing(monkeypatch, capsys, tmp_path, "--revision", REVISION)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"acme/kernels @ {REVISION[:12]} in {tmp_path / 'store'}"
    assert [cells(line) for line in lines[1:-1]] == [
        ["VERDICT", "FINISHED (UTC)", "REVISION", "RUNNER", "CLASS", "RUN"],
        ["incomplete", "-", REVISION[:12], "gpu-box-1", "-", "abcdef"],
        ["accepted", "2026-11-29 19:30:00", REVISION[:12], "gpu-box-1", "h200", "gh-77-1"],
        ["not accepted", "2026-11-29 19:00:00", REVISION[:12], "gpu-box-2", "h200", "4d5e6f"],
        ["accepted", "2026-11-29 18:00:00", REVISION[:12], "gpu-box-1", "h200", "1a2b3c"],
    ]
    assert lines[-1] == "4 runs: 2 accepted, 1 not accepted, 1 incomplete"


@pytest.mark.unit
@pytest.mark.usefixtures("four_runs")
def test_json_is_versioned_validates_and_keeps_the_full_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = listing(monkeypatch, capsys, tmp_path, "--revision", REVISION, "--json")
    assert code == 0
    doc = json.loads(out)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text(encoding="utf-8")))
    assert (doc["version"], doc["revision"], doc["repository"]) == (1, REVISION, "acme/kernels")
    assert [(r["run_id"], r["short_id"], r["state"]) for r in doc["runs"]] == [
        ("20261129T200000Z-abcdef", "abcdef", "incomplete"),
        ("gh-77-1", "gh-77-1", "accepted"),
        ("20261129T190000Z-4d5e6f", "4d5e6f", "not accepted"),
        ("20261129T180000Z-1a2b3c", "1a2b3c", "accepted"),
    ]
    newest = doc["runs"][1]
    assert newest["finished"] == "2026-11-29T19:30:00Z"
    assert (newest["files"], newest["runner_class"], newest["dirty"]) == (7, "h200", False)
    assert newest["verdict"]["accepted"] is True
    assert doc["runs"][0]["verdict"] is None
    assert doc["runs"][0]["files"] is None


@pytest.mark.unit
def test_all_lists_every_revision_and_passes_over_a_nested_repository(
    tmp_path: Path,
    settings: StoreSettings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store_run(tmp_path, settings, "20261129T180000Z-1a2b3c")
    other = replace(meta("20261130T090000Z-999999"), revision=OTHER, dirty=True)
    store_run(tmp_path, settings, "20261130T090000Z-999999", after=15 * HOUR, run_meta=other)
    # acme/kernels/sub is another repository below this one's folder, not a revision.
    nested = RunMeta("acme/kernels", "sub", REVISION, "gpu-box-1", "20261201T000000Z-000000")
    store_run(tmp_path, settings, nested.run_id, after=30 * HOUR, run_meta=nested)

    code, out, _ = listing(monkeypatch, capsys, tmp_path, "--revision", REVISION)
    assert code == 0
    assert [cells(line)[-1] for line in out.splitlines()[2:-1]] == ["1a2b3c"]
    code, out, _ = listing(monkeypatch, capsys, tmp_path, "--all")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"acme/kernels @ every revision in {tmp_path / 'store'}"
    assert [cells(line)[2:] for line in lines[2:-1]] == [
        [f"{OTHER[:12]}+dirty", "gpu-box-1", "h200", "999999"],
        [REVISION[:12], "gpu-box-1", "h200", "1a2b3c"],
    ]
    assert lines[-1] == "2 runs: 2 accepted"
    code, out, _ = listing(monkeypatch, capsys, tmp_path, "--all", "--json")
    doc = json.loads(out)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text(encoding="utf-8")))
    assert doc["revision"] is None
    assert [r["revision"] for r in doc["runs"]] == [OTHER, REVISION]
    code, _, err = listing(monkeypatch, capsys, tmp_path, "--all", "--revision", REVISION)
    assert code == int(ExitCode.CONFIG)
    assert err.strip() == "cuda-gate: error: --all lists every revision; leave out --revision"


@pytest.mark.unit
def test_an_empty_listing_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = listing(monkeypatch, capsys, tmp_path, "--revision", REVISION)
    assert code == 0
    assert out.splitlines() == [f"acme/kernels @ {REVISION[:12]} in {tmp_path / 'store'}", "0 runs"]


@pytest.mark.unit
@pytest.mark.usefixtures("four_runs")
def test_get_takes_the_short_id_the_table_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    def get(*args: str) -> tuple[int, str, str]:
        return run_cli(
            monkeypatch, capsys, "evidence", "get", "--repository", "acme/kernels",
            "--store", str(tmp_path / "store"), "--revision", REVISION, *args,
        )  # fmt: skip

    code, out, _ = get("--runner", "gpu-box-1", "--run", "1a2b3c")
    assert code == 0, out
    assert out.startswith("fetched 7 files of run 20261129T180000Z-1a2b3c (gpu-box-1)")
    assert (tmp_path / "evidence-gpu-box-1-20261129T180000Z-1a2b3c" / "result.json").is_file()
    code, out, _ = get("--runner", "gpu-box-1", "--run", "gh-77-1", "--dest", "b")
    assert code == 0
    assert "run gh-77-1 (gpu-box-1)" in out
    # Another runner's short id names none of this runner's runs.
    code, _, err = get("--runner", "gpu-box-1", "--run", "4d5e6f")
    assert code == int(ExitCode.EVIDENCE_CHANGED)
    assert "gpu-box-1/4d5e6f: no index" in err


@pytest.mark.unit
def test_a_short_id_two_runs_share_is_shown_in_full_and_refused_by_get(
    tmp_path: Path,
    settings: StoreSettings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store_run(tmp_path, settings, "20261129T180000Z-1a2b3c")
    store_run(tmp_path, settings, "20261129T190000Z-1a2b3c", after=HOUR)
    store_run(tmp_path, settings, "20261129T183000Z-777777", after=HOUR / 2)
    code, out, _ = listing(monkeypatch, capsys, tmp_path, "--revision", REVISION)
    assert [cells(line)[-1] for line in out.splitlines()[2:-1]] == [
        "20261129T190000Z-1a2b3c",
        "777777",
        "20261129T180000Z-1a2b3c",
    ]
    code, _, err = run_cli(
        monkeypatch, capsys, "evidence", "get", "--repository", "acme/kernels",
        "--store", str(tmp_path / "store"), "--revision", REVISION,
        "--runner", "gpu-box-1", "--run", "1a2b3c", "--dest", str(tmp_path / "d"),
    )  # fmt: skip
    assert code == int(ExitCode.CONFIG)
    assert err.strip() == (
        "cuda-gate: error: --run 1a2b3c: the short id of 2 runs of gpu-box-1 "
        "(20261129T180000Z-1a2b3c, 20261129T190000Z-1a2b3c); give the full id"
    )
    assert not (tmp_path / "d").exists()


@pytest.mark.unit
def test_short_ids_and_start_times_come_only_from_the_gates_own_id_form() -> None:
    assert short_run_id("20261129T180000Z-1a2b3c") == "1a2b3c"
    assert started_from_id("20261129T180000Z-1a2b3c") == "2026-11-29T18:00:00Z"
    for other in ("gh-123-2", "nightly-1a2b3c", "20261129T180000Z-XYZ", "20261129T180000Z-1a"):
        assert short_run_id(other) == other
        assert started_from_id(other) is None


@pytest.mark.unit
def test_times_are_shown_in_utc() -> None:
    assert human_time("2026-11-29T18:00:00Z") == "2026-11-29 18:00:00"
    assert human_time("2026-11-29T20:00:00+02:00") == "2026-11-29 18:00:00"
    assert human_time("yesterday") == "yesterday"


def real_run(repo: Path, store: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gate", "run", "--stop-after", "environment", "--store", str(store)],
        cwd=repo, capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip


@pytest.mark.integration
def test_real_runs_are_listed_and_fetched_by_their_short_id(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GITHUB_REPOSITORY": "acme/kernels", "RUNNER_NAME": "box"}
    env.pop("GITHUB_RUN_ID", None)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run([*git, *args], cwd=repo, check=True, env=env)
    store = tmp_path / "store"
    for _ in range(2):
        done = real_run(repo, store, env)
        assert done.returncode == int(ExitCode.NOT_ACCEPTED), done.stderr  # --stop-after
    listed = subprocess.run(
        [sys.executable, "-m", "gate", "evidence", "list", "--store", str(store), "--json"],
        cwd=repo, capture_output=True, text=True, timeout=120, check=True, env=env,
    )  # fmt: skip
    doc = json.loads(listed.stdout)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text(encoding="utf-8")))
    runs = doc["runs"]
    assert [r["state"] for r in runs] == ["not accepted", "not accepted"]
    assert runs[0]["finished"] >= runs[1]["finished"]  # newest first
    table = subprocess.run(
        [sys.executable, "-m", "gate", "evidence", "list", "--store", str(store)],
        cwd=repo, capture_output=True, text=True, timeout=120, check=True, env=env,
    )  # fmt: skip
    rows = table.stdout.splitlines()
    assert [cells(row)[-1] for row in rows[2:-1]] == [r["short_id"] for r in runs]
    assert rows[-1] == "2 runs: 2 not accepted"
    fetched = subprocess.run(
        [sys.executable, "-m", "gate", "evidence", "get", "--store", str(store),
         "--runner", "box", "--run", runs[1]["short_id"], "--dest", str(tmp_path / "got")],
        cwd=repo, capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    assert f"of run {runs[1]['run_id']} (box)" in fetched.stdout
    assert (tmp_path / "got" / "result.json").is_file()
