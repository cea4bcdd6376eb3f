"""`cuda-gate evidence prune`: trial runs go, the newest and the accepted stay."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gate.errors import ExitCode
from gate.store import local_settings, publish
from tests.records import WHEN
from tests.store_helpers import make_evidence, meta, run_cli

pytestmark = pytest.mark.unit


def _store_runs(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    settings = local_settings(store, tmp_path / "spool")
    # gpu-box-1: runs 0..5, oldest first; 1 and 4 accepted. gpu-box-2: one failed run.
    for n in range(6):
        run_id = f"20261129T18000{n}Z-{n:06x}"
        folder = make_evidence(
            tmp_path / f"ev{n}", run_id=run_id, accepted=n in (1, 4),
            finished=WHEN + timedelta(minutes=n),
        )  # fmt: skip
        publish(folder, meta(run_id), settings)
    other = make_evidence(tmp_path / "other", runner="gpu-box-2", accepted=False)
    publish(other, meta(runner="gpu-box-2"), settings)
    return store


def _left(store: Path) -> set[str]:
    return {p.parent.name for p in store.rglob("index.json")}


def test_prune_keeps_the_newest_per_runner_and_every_accepted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store_runs(tmp_path)
    monkeypatch.setattr("gate.cli.COMMANDS", ("evidence",))
    args = ("evidence", "prune", "--store", str(store), "--repository", "acme/kernels")
    code, out, _ = run_cli(monkeypatch, capsys, *args, "--keep", "2", "--dry-run")
    assert code == 0
    assert out.splitlines()[0] == (
        f"acme/kernels in {store}: would remove 3 runs, kept 4 runs "
        "(newest 2 per runner, and every accepted run)"
    )
    assert len(_left(store)) == 7  # a dry run removes nothing
    code, out, _ = run_cli(monkeypatch, capsys, *args, "--keep", "2")
    assert code == 0
    # Newest two of gpu-box-1 (5, 4), the accepted 1, and gpu-box-2's only run stay.
    assert _left(store) == {
        "20261129T180005Z-000005", "20261129T180004Z-000004", "20261129T180001Z-000001",
        "20261129T180000Z-1a2b3c",
    }  # fmt: skip
    removed = [line.split()[2] for line in out.splitlines()[1:]]
    assert sorted(removed) == ["20261129T180000Z-000000", "20261129T180002Z-000002",
                               "20261129T180003Z-000003"]  # fmt: skip
    code, _, _ = run_cli(monkeypatch, capsys, *args, "--keep", "1", "--accepted")
    assert code == 0
    assert _left(store) == {"20261129T180005Z-000005", "20261129T180000Z-1a2b3c"}


def test_prune_refuses_an_s3_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("gate.cli.COMMANDS", ("evidence",))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    code, _, err = run_cli(
        monkeypatch, capsys, "evidence", "prune", "--store", "s3://bucket/p",
        "--repository", "acme/kernels",
    )  # fmt: skip
    assert code == int(ExitCode.CONFIG)
    assert "prune works on a local store; an S3 store is write-once" in err
