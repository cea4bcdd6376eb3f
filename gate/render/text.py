"""Human-readable results: the console table and the Markdown summary of a run record.

The same rows feed both, so the terminal and the GitHub step summary never disagree.
The console table fits the terminal (``COLUMNS`` when set, else 100 columns when output
goes to a log) by wrapping long cells onto continuation lines between words; nothing is
cut, not even a word longer than its column. On a terminal the result column is coloured
(never with ``NO_COLOR``, never in files).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from gate.reader.listing import Kind
from gate.record import LoadedLibrary, RunRecord
from gate.rules.targets import Capability
from gate.rules.verdict import Check, StageStatus, Verdict

LOG_WIDTH = 100
_MIN_DETAIL = 20


def count(n: int, one: str, many: str | None = None) -> str:
    """``1 kernel``, ``3 kernels``: the count with its noun in the right number."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def width(environ: Mapping[str, str] | None = None) -> int:
    """``COLUMNS`` when set (a log's reader may be wide), else the terminal's width when
    stdout is one, else LOG_WIDTH; never below 60."""
    env = os.environ if environ is None else environ
    columns = env.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return max(60, min(int(columns), 1000))
    if sys.stdout.isatty():
        return max(60, shutil.get_terminal_size((LOG_WIDTH, 24)).columns)
    return LOG_WIDTH


# ANSI colours of the result column, on a terminal only and never with NO_COLOR set
# (https://no-color.org); files and logs stay plain.
_COLOURS = {"PASS": "32", "FAIL": "31;1", "WARN": "33", "SKIP": "2"}
_RESULT = re.compile(r"^(PASS|FAIL|WARN|SKIP)\b", re.MULTILINE)


def colour(
    text: str, *, stream: TextIO | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """``text`` with its result words coloured when ``stream`` (stdout) is a terminal."""
    env = os.environ if environ is None else environ
    out = sys.stdout if stream is None else stream
    if "NO_COLOR" in env or env.get("TERM") == "dumb" or not out.isatty():
        return text
    return _RESULT.sub(lambda m: f"\033[{_COLOURS[m.group(1)]}m{m.group(1)}\033[0m", text)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, total: int = LOG_WIDTH) -> str:
    """A plain-text table whose last column wraps so every line fits in ``total`` columns.

    Earlier columns keep their natural width up to a third of the line each (wrapped
    beyond that); the last column gets the rest, at least ``_MIN_DETAIL`` characters.
    """
    cells = [[" ".join(str(c).split()) for c in row] for row in rows]
    count_ = len(headers)
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    cap = max(8, total // 3)
    widths[:-1] = [min(w, cap) for w in widths[:-1]]
    gaps = 2 * (count_ - 1)
    # A narrow terminal: take from the widest earlier column until the last one fits.
    while total - sum(widths[:-1]) - gaps < _MIN_DETAIL and max(widths[:-1]) > 8:
        widest = widths.index(max(widths[:-1]))
        widths[widest] -= 1
    widths[-1] = max(_MIN_DETAIL, total - sum(widths[:-1]) - gaps)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for row in cells:
        wrapped = [
            # A word longer than its column overflows it rather than being cut mid-token.
            textwrap.wrap(c, w, break_on_hyphens=False, break_long_words=False) or [""]
            for c, w in zip(row, widths, strict=True)
        ]
        for i in range(max(len(lines) for lines in wrapped)):
            parts = [
                (lines[i] if i < len(lines) else "").ljust(w)
                for lines, w in zip(wrapped, widths, strict=True)
            ]
            out.append("  ".join(parts).rstrip())
    return "\n".join(out)


def _rows(checks: Sequence[Check]) -> list[tuple[str, str, str, str]]:
    return [(c.status, c.classname.removeprefix("gate."), c.name, c.message) for c in checks]


def console(record: RunRecord, *, total: int | None = None) -> str:
    """The console report: one row per check, then what the run learned, then the verdict."""
    verdict = record.verdict
    parts = [
        table(("result", "stage", "check", "detail"), _rows(record.checks), total=total or width())
    ]
    for title, lines in _sections(record):
        parts.append(f"\n{title}:")
        parts += [
            textwrap.fill(
                line,
                (total or width()),
                initial_indent="  - ",
                subsequent_indent="    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            for line in lines
        ]
    parts.append(f"\nVerdict: {verdict.statement}")
    return "\n".join(parts)


def _sections(record: RunRecord) -> list[tuple[str, Sequence[str]]]:
    found: list[tuple[str, Sequence[str]]] = []
    # A failed stage's detail is the verdict's headline: not repeated here.
    stages = [
        f"{s.name}: {s.status.value}"
        + (f" ({s.detail})" if s.detail and s.status is StageStatus.SKIPPED else "")
        for s in record.stages
    ]
    if any(s.status is not StageStatus.RAN for s in record.stages):
        found.append(("Stages", stages))
    if record.loaded_libraries:
        found.append(
            (
                "Loaded libraries with device code",
                [
                    f"{Path(lib.path).name}: {lib.route or 'not judged'}"
                    + (" (project)" if lib.declared or lib.strict else "")
                    + ("" if lib.runs is not False else " - NOTHING RUNS HERE")
                    + _no_jit(lib, record.device.capability)
                    for lib in record.loaded_libraries
                ],
            )
        )
    if record.paths_proved:
        found.append(("Paths proved", record.paths_proved))
    if record.diagnoses:
        found.append(("Diagnosis", record.diagnoses))
    if record.notes:
        found.append(("Not done", record.notes))
    return found


def _no_jit(library: LoadedLibrary, cap: Capability | None) -> str:
    """A note for a library that runs natively but has no PTX for forced JIT on ``cap``."""
    if cap is None or library.runs is False:
        return ""
    if any(e.target.ptx_jits_for(cap) for e in library.listing.of_kind(Kind.PTX)):
        return ""
    return f"; no PTX for {cap}: forced JIT cannot run its kernels"


def markdown(record: RunRecord, facts: Sequence[tuple[str, str]]) -> str:
    """The Markdown summary: verdict, facts, a check table, what the run learned, reasons."""
    verdict: Verdict = record.verdict
    icon = "✅" if verdict.accepted else "❌"
    lines = [f"## cuda-gate: {icon} {_md(verdict.statement)}", ""]
    if facts:
        lines += ["| fact | value |", "|---|---|"]
        lines += [f"| {_md(k)} | {_md(v)} |" for k, v in facts]
        lines.append("")
    lines += ["| result | stage | check | detail |", "|---|---|---|---|"]
    lines += [f"| {' | '.join(_md(c) for c in row)} |" for row in _rows(record.checks)]
    for title, items in _sections(record):
        lines += ["", f"### {title}", ""] + [f"- {_md(i)}" for i in items]
    if not verdict.accepted and len(verdict.reasons) > 1:
        lines += ["", "### Reasons", ""] + [f"- {_md(r)}" for r in verdict.reasons]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def append_step_summary(text: str) -> Path | None:
    """Append to $GITHUB_STEP_SUMMARY when GitHub Actions set it; the path written, or None."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        return None
    return path
