"""A comparison with a baseline as people read it: the before / after / change table and
one line per loss, for `cuda-gate diff`, the run's console and its Markdown summary."""

from __future__ import annotations

from collections.abc import Sequence

from gate.render.text import count, table
from gate.rules.baseline import Diff, Level, Row

HEADERS = ("artifact", "quantity", "before", "after", "change")


def changed_rows(diff: Diff) -> tuple[Row, ...]:
    """The rows whose value changed (an unchanged row says nothing a reader needs)."""
    return tuple(r for r in diff.rows if r.change != "-")


def _cells(rows: Sequence[Row]) -> list[tuple[str, str, str, str, str]]:
    return [(r.artifact, r.quantity, r.before, r.after, r.change) for r in rows]


def losses(diff: Diff) -> list[str]:
    """``FAIL libk.so: sm_121 dropped`` per loss, failing ones first."""
    ranked = [*diff.failed, *diff.warned]
    return [f"{c.level.value.upper()} {c.artifact}: {c.what}" for c in ranked]


def headline(diff: Diff, against: str) -> str:
    """``2 regressions against BASE (1 warning)`` or ``no regression against BASE``."""
    failed, warned = len(diff.failed), len(diff.warned)
    head = count(failed, "regression") if failed else "no regression"
    tail = f" ({count(warned, 'warning')})" if warned else ""
    return f"{head} against {against}{tail}"


def closing(diff: Diff, against: str) -> str:
    """The headline, then what was only reported, on one line so each change is counted
    once: ``1 regression against v1; 2 more changes reported, not judged``."""
    said = headline(diff, against)
    reported = sum(c.level is Level.INFO for c in diff.changes)
    if not reported:
        return said
    noun = "more change" if diff.failed or diff.warned else "change"
    return f"{said}; {count(reported, noun)} reported, not judged"


def console(diff: Diff, against: str, *, total: int) -> str:
    """The changed rows as a table, the losses, and the closing line."""
    rows = changed_rows(diff)
    parts = []
    if rows:
        parts.append(table(HEADERS, _cells(rows), total=total))
    else:
        compared = count(len(diff.rows), "compared quantity", "compared quantities")
        parts.append(f"nothing changed in {compared}")
    parts += losses(diff)
    parts.append(closing(diff, against))
    return "\n".join(parts)


def markdown(diff: Diff, against: str) -> list[str]:
    """The summary's section: the changed rows as a Markdown table, then the losses."""
    rows = changed_rows(diff)
    lines = [f"Compared with {_md(against)}: {_md(headline(diff, against))}.", ""]
    if rows:
        lines += ["| " + " | ".join(HEADERS) + " |", "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(_md(c) for c in cells) + " |" for cells in _cells(rows)]
    else:
        lines.append("Nothing changed in the compared quantities.")
    lost = losses(diff)
    if lost:
        lines += [""] + [f"- {_md(line)}" for line in lost]
    return lines


def _md(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
