"""The newest run is the one that finished last, never the one whose id sorts last as text."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gate.store import LocalStore, StoreSettings, latest_run, list_runs, local_settings, publish
from tests.store_helpers import REVISION, make_evidence, meta

pytestmark = pytest.mark.unit


@pytest.fixture
def settings(tmp_path: Path) -> StoreSettings:
    return local_settings(tmp_path / "store", tmp_path / "spool")


def test_run_123_10_is_newer_than_123_9(tmp_path: Path, settings: StoreSettings) -> None:
    # GitHub run 123, attempts 9 and 10: as text "123-10" sorts before "123-9".
    for attempt, hour in ((9, 18), (10, 19)):
        run_id = f"gh-123-{attempt}"
        finished = datetime(2026, 11, 29, hour, 0, tzinfo=UTC)
        evidence = make_evidence(tmp_path / run_id, run_id=run_id, finished=finished)
        publish(evidence, meta(run_id=run_id), settings)
    runs = list_runs(LocalStore(tmp_path / "store"), "acme/kernels", REVISION)
    assert [r.run_id for r in runs] == ["gh-123-9", "gh-123-10"]
    assert latest_run(runs, "gpu-box-1").run_id == "gh-123-10"


def test_the_finish_time_decides_over_the_id(tmp_path: Path, settings: StoreSettings) -> None:
    # A re-run given an id that sorts first still wins when it finished last.
    for run_id, hour in (("zzz-first", 18), ("aaa-second", 19)):
        finished = datetime(2026, 11, 29, hour, 0, tzinfo=UTC)
        evidence = make_evidence(tmp_path / run_id, run_id=run_id, finished=finished)
        publish(evidence, meta(run_id=run_id), settings)
    runs = list_runs(LocalStore(tmp_path / "store"), "acme/kernels", REVISION)
    assert latest_run(runs, "gpu-box-1").run_id == "aaa-second"
