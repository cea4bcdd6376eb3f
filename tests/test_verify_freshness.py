"""Step 6 of verify: what the signed record says about its revision and time, checked on request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from gate.attest.freshness import Freshness, parse_duration, parse_time, problems, recorded
from gate.attest.predicate import GatePredicate, SignedMachine, SignedVerdict
from gate.errors import ConfigError

pytestmark = pytest.mark.unit

REV = "c" * 40
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _predicate(
    revision: str | None = REV,
    *,
    dirty: bool = False,
    finished: str | None = "2026-12-01T10:00:00Z",
) -> GatePredicate:
    return GatePredicate(
        version=2,
        tool_version="0.1.0",
        run_id="run-1",
        runner=None,
        runner_class=None,
        finished=finished,
        revision=revision,
        dirty=dirty,
        repository=None,
        machine=SignedMachine(None, None, None, None, None, None),
        artifacts=(),
        executions=(),
        checks=(),
        verdict=SignedVerdict(True, "accepted", ()),
        evidence=(),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90m", timedelta(minutes=90)),
        ("36h", timedelta(hours=36)),
        ("7d", timedelta(days=7)),
        ("1d12h", timedelta(hours=36)),
        ("2W", timedelta(weeks=2)),
        ("45s", timedelta(seconds=45)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "7", "7 days", "d7", "1.5h", "-1h", "1h-"])
def test_what_is_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="is not a duration"):
        parse_duration(text)


def test_times_are_aware_and_utc_when_no_zone_is_given() -> None:
    assert parse_time("2026-11-29") == datetime(2026, 11, 29, tzinfo=UTC)
    assert parse_time("2026-11-29T18:00:00Z") == datetime(2026, 11, 29, 18, tzinfo=UTC)
    east = parse_time("2026-11-29T20:00:00+02:00")
    assert east == datetime(2026, 11, 29, 18, tzinfo=UTC)
    assert east.tzinfo == timezone(timedelta(hours=2))
    with pytest.raises(ConfigError, match="is not an ISO 8601 time"):
        parse_time("29/11/2026")


def test_what_was_recorded_is_stated() -> None:
    assert recorded(_predicate()) == f"recorded for {REV}, finished 2026-12-01T10:00:00Z"
    assert recorded(_predicate(None, dirty=True, finished=None)) == (
        "recorded for no revision (uncommitted changes), finished an unrecorded time"
    )


def test_a_matching_record_has_no_problems() -> None:
    wanted = Freshness(
        revision=REV, not_before=NOW - timedelta(hours=3), max_age=timedelta(hours=2)
    )
    assert wanted.requested
    assert problems(_predicate(), wanted, NOW) == []
    assert not Freshness().requested


def test_a_dirty_tree_or_no_revision_is_not_the_revision_asked_for() -> None:
    wanted = Freshness(revision=REV)
    assert problems(_predicate(dirty=True), wanted, NOW) == [
        f"built from {REV} with uncommitted changes, not {REV} itself"
    ]
    assert problems(_predicate(None), wanted, NOW) == [
        "no source revision is recorded (the gate ran outside git)"
    ]


def test_time_checks_need_a_recorded_finish_time() -> None:
    for finished in (None, "not a time"):
        found = problems(_predicate(finished=finished), Freshness(max_age=timedelta(days=1)), NOW)
        assert found == ["no finish time is recorded"]


def test_every_problem_is_reported() -> None:
    wanted = Freshness(revision="d" * 40, not_before=NOW, max_age=timedelta(minutes=30))
    assert problems(_predicate(), wanted, NOW) == [
        f"recorded for revision {REV}, not {'d' * 40}",
        "finished 2026-12-01T10:00:00Z, before --not-before 2026-12-01T12:00:00Z",
        "finished 2026-12-01T10:00:00Z, 2h ago: older than --max-age 30m",
    ]
