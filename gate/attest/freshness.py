"""What ``verify`` proves about freshness, and the checks that ask for more.

A valid signature proves who recorded the evidence and that nothing changed since;
it does not prove *when*, or *of what source*. An older envelope replayed next to
unchanged artifacts verifies. The signed predicate records the source revision
(and whether the work tree was dirty) and the run's finish time; step 6 states
them, and checks them only when asked:

* ``--revision REV``: the recorded revision must be REV (resolved by git) and the
  tree clean: a dirty build is not REV;
* ``--not-before TIME``: the run finished at or after TIME (ISO 8601; UTC if no zone);
* ``--max-age DURATION``: the run finished at most DURATION ago (``90m``, ``36h``,
  ``7d``, ``1d12h``; units s, m, h, d, w).

A failed check is a StaleEvidenceError (exit 14).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from gate.errors import ConfigError

if TYPE_CHECKING:  # the predicate module reads the run record; this one needs only the type
    from gate.attest.predicate import GatePredicate

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(?:\d{1,9}[smhdw])+")


@dataclass(frozen=True)
class Freshness:
    """What the caller requires of the recorded run; None for what is not required."""

    revision: str | None = None  # a full commit id
    not_before: datetime | None = None  # aware
    max_age: timedelta | None = None

    @property
    def requested(self) -> bool:
        """Whether any check was asked for."""
        return any(v is not None for v in (self.revision, self.not_before, self.max_age))


def parse_duration(text: str) -> timedelta:
    """``90m``, ``36h``, ``7d``, ``1d12h`` as a timedelta; ConfigError otherwise."""
    value = text.strip().lower()
    if not _DURATION.fullmatch(value):
        raise ConfigError(
            f"--max-age {text!r} is not a duration (a number and a unit, s m h d w: 36h, 7d, 1d12h)"
        )
    seconds = sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)([smhdw])", value))
    return timedelta(seconds=seconds)


def parse_time(text: str) -> datetime:
    """An ISO 8601 date or date and time, as an aware datetime (UTC when no zone is given)."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError as e:
        raise ConfigError(
            f"--not-before {text!r} is not an ISO 8601 time (2026-11-29 or 2026-11-29T18:00:00Z)"
        ) from e
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def recorded(predicate: GatePredicate) -> str:
    """What the signed predicate says about the run's source and time, in one phrase."""
    revision = predicate.revision or "no revision"
    dirty = " (uncommitted changes)" if predicate.dirty else ""
    finished = predicate.finished or "an unrecorded time"
    return f"recorded for {revision}{dirty}, finished {finished}"


def problems(predicate: GatePredicate, wanted: Freshness, now: datetime) -> list[str]:
    """Every way the recorded run falls short of ``wanted``; empty when it does not."""
    found: list[str] = []
    if wanted.revision is not None:
        revision = predicate.revision
        if revision is None:
            found.append("no source revision is recorded (the gate ran outside git)")
        elif revision != wanted.revision:
            found.append(f"recorded for revision {revision}, not {wanted.revision}")
        elif predicate.dirty:
            found.append(f"built from {revision} with uncommitted changes, not {revision} itself")
    if wanted.not_before is None and wanted.max_age is None:
        return found
    finished = _finished(predicate)
    if finished is None:
        found.append("no finish time is recorded")
        return found
    if wanted.not_before is not None and finished < wanted.not_before:
        found.append(f"finished {_iso(finished)}, before --not-before {_iso(wanted.not_before)}")
    if wanted.max_age is not None and now - finished > wanted.max_age:
        found.append(
            f"finished {_iso(finished)}, {_span(now - finished)} ago: older than --max-age "
            f"{_span(wanted.max_age)}"
        )
    return found


def _finished(predicate: GatePredicate) -> datetime | None:
    text = predicate.finished
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _span(delta: timedelta) -> str:
    """A duration as people write it: ``2d3h``, ``45m``, ``0s``."""
    seconds = int(delta.total_seconds())
    parts = []
    for unit in ("d", "h", "m", "s"):
        count, seconds = divmod(seconds, _UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
