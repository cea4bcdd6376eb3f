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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from gate.reader.listing import Kind, LibraryRoutes
from gate.reader.stubs import Stub
from gate.record import LOADED_LIST, LoadedLibrary, RunRecord
from gate.render.nextsteps import count_line, device_lines, next_steps
from gate.render.wording import kernels_by, library_on, plural, reached
from gate.rules.targets import Capability
from gate.rules.verdict import Check, CheckState, Diagnosed, StageStatus, Verdict

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


def console(record: RunRecord, *, total: int | None = None, verbose: bool = False) -> str:
    """The console report, pytest-like: the failed and warned checks (every check with
    ``verbose``), what the run learned, what to do next, one count line, the verdict."""
    verdict = record.verdict
    wide = total or width()
    shown = record.checks if verbose else [c for c in record.checks if c.state in _TOLD]
    parts = (
        [table(("result", "stage", "check", "detail"), _rows(shown), total=wide)] if shown else []
    )
    sections = _sections(record, stages=verbose)
    steps = next_steps(record)
    if steps:
        sections.append(("What to do next", steps))
    for title, lines in sections:
        parts.append(f"\n{title}:" if parts else f"{title}:")
        parts += [
            textwrap.fill(
                line,
                wide,
                initial_indent="  - ",
                subsequent_indent="    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            for line in lines
        ]
    if parts:
        parts.append("")
    parts.append(count_line(record.checks))
    parts.append(f"Verdict: {verdict.statement}")
    return "\n".join(parts)


# The checks the default console shows: what needs a person's eyes.
_TOLD = (CheckState.FAILED, CheckState.WARNED)


def _sections(record: RunRecord, *, stages: bool = True) -> list[tuple[str, Sequence[str]]]:
    found: list[tuple[str, Sequence[str]]] = []
    # A failed stage's detail is the verdict's headline: not repeated here.
    said = [
        f"{s.name}: {s.status.value}"
        + (f" ({s.detail})" if s.detail and s.status is StageStatus.SKIPPED else "")
        for s in record.stages
    ]
    if stages and any(s.status is not StageStatus.RAN for s in record.stages):
        found.append(("Stages", said))
    if record.loaded_libraries:
        found.append(("Loaded libraries with device code", _loaded(record)))
    if record.paths_proved:
        found.append(("Paths proved", record.paths_proved))
    routes = device_lines(record)
    if routes:
        found.append(("Routes on the configured devices", routes))
    if record.diagnoses:
        found.append(("Diagnosis", [d.text for d in record.diagnoses]))
    if record.notes:
        found.append(("Not done", record.notes))
    return found


_GROUPS = 3  # routes of the libraries not named, counted each; the rest counted together
_NAMED = 3  # libraries outside the project that run here, named one a line; more are counted


def _loaded(record: RunRecord) -> list[str]:
    """The loaded libraries that matter for the verdict, each on a line: the project's, and
    any where nothing runs; the rest (torch: dozens) counted by route in one line. Every
    one is listed in loaded-libraries.txt, its device code in its loaded/ folder."""
    cap = record.device.capability
    named: list[str] = []
    rest: list[LoadedLibrary] = []
    for lib in record.loaded_libraries:
        own = lib.declared or lib.strict
        if own or lib.runs is False or cap is None:
            named.append(_one(lib, cap, own=own))
        else:
            rest.append(lib)
    if cap is not None and len(rest) > _NAMED:
        named.append(_the_rest(rest, cap, other=bool(named)))
    elif cap is not None:  # a few: each on its own line, as short as the count would be
        named += [_one(lib, cap, own=False) for lib in rest]
    return named


def _one(lib: LoadedLibrary, cap: Capability | None, *, own: bool) -> str:
    name = Path(lib.path).name + (" (project)" if own else "")
    if cap is None:
        return f"{name}: {lib.route or 'not judged'}"
    route = lib.listing.target_route(cap)
    has_ptx = lib.listing.ptx_route(cap) is not None
    how = library_on(route, cap, runs=lib.runs, has_ptx=has_ptx)
    if lib.runs is False:  # what it does carry explains why
        sass = " ".join(str(t) for t in lib.listing.targets(Kind.SASS)) or "none"
        ptx = " ".join(str(t) for t in lib.listing.targets(Kind.PTX)) or "none"
        how += f"; SASS {sass}; PTX {ptx}"
    return f"{name}: {how}"


def _the_rest(libs: Sequence[LoadedLibrary], cap: Capability, *, other: bool) -> str:
    """``37 other libraries run here: 35 from exact SASS (sm_90), 2 from compatible SASS
    (sm_86); none of them ships PTX for 9.0: ...``, naming the evidence file."""
    groups: dict[str, int] = {}
    for lib in libs:
        route = lib.listing.target_route(cap)
        said = reached(route.path, route.describe())
        groups[said] = groups.get(said, 0) + 1
    ranked = sorted(groups.items(), key=lambda g: -g[1])  # stable: first seen among equals
    parts = [f"{n:,} {said}" for said, n in ranked[:_GROUPS]]
    if len(ranked) > _GROUPS:
        parts.append(f"{sum(n for _, n in ranked[_GROUPS:]):,} by other routes")
    n = len(libs)
    head = f"{n:,} {'other ' if other else ''}{'library runs' if n == 1 else 'libraries run'}"
    return f"{head} here: {', '.join(parts)}{_without_ptx(libs, cap)} ({LOADED_LIST} lists each)"


def _without_ptx(libs: Sequence[LoadedLibrary], cap: Capability) -> str:
    """``; all 37 ship no PTX for 9.0 (libtorch_cuda.so, ... and 34 more): ...``, the
    largest named first (most bytes of device code); empty when every one has PTX."""
    bare = [lib for lib in libs if lib.listing.ptx_route(cap) is None]
    if not bare:
        return ""
    bare.sort(key=lambda lib: (-sum(e.size for e in lib.listing.entries), Path(lib.path).name))
    names = ", ".join(Path(lib.path).name for lib in bare[:_NAMED])
    if len(bare) > _NAMED:
        names += f" and {len(bare) - _NAMED:,} more"
    which = f"all {len(bare):,}" if len(bare) == len(libs) else f"{len(bare):,} of them"
    verb = "ships" if len(bare) == 1 else "ship"
    whose = "its" if len(bare) == 1 else "their"
    return f"; {which} {verb} no PTX for {cap} ({names}): forced JIT cannot run {whose} kernels"


def markdown(
    record: RunRecord,
    facts: Sequence[tuple[str, str]],
    extra: Sequence[tuple[str, Sequence[str]]] = (),
) -> str:
    """The Markdown summary: verdict, facts, a check table, ``extra`` sections (Markdown
    lines under a title: the baseline comparison), what the run learned, reasons."""
    verdict: Verdict = record.verdict
    icon = "✅" if verdict.accepted else "❌"
    lines = [f"## cuda-gate: {icon} {_md(verdict.statement)}", ""]
    if facts:
        lines += ["| fact | value |", "|---|---|"]
        lines += [f"| {_md(k)} | {_md(v)} |" for k, v in facts]
        lines.append("")
    lines += ["| result | stage | check | detail |", "|---|---|---|---|"]
    lines += [f"| {' | '.join(_md(c) for c in row)} |" for row in _rows(record.checks)]
    for title, body in extra:
        lines += ["", f"### {title}", "", *body]
    steps = next_steps(record)
    for title, items in [*_sections(record), *([("What to do next", steps)] if steps else [])]:
        lines += ["", f"### {title}", ""] + [f"- {_md(i)}" for i in items]
    if not verdict.accepted and len(verdict.reasons) > 1:
        lines += ["", "### Reasons", ""] + [f"- {_md(r)}" for r in verdict.reasons]
    sources = _sources(verdict, record.diagnoses)
    if sources:
        lines += ["", "### Where each clause comes from (result.json)", "", *sources]
    return "\n".join(lines) + "\n"


def _sources(verdict: Verdict, diagnoses: Sequence[Diagnosed]) -> list[str]:
    """Each clause of the headline and the diagnoses with its record's JSON pointer, in
    result.json (``- `/checks/4` headline: app [native]: ...``)."""
    said = [("headline", c) for c in verdict.clauses]
    said += [(f"diagnosis {i}", c) for i, d in enumerate(diagnoses, 1) for c in d.clauses]
    return [f"- `{c.source}` {where}: {_md(c.text)}" for where, c in said]


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


def routes_line(lib: LibraryRoutes) -> str:
    """One short line: counts per path (or the per-target route) and the best route."""
    if not lib.per_kernel:
        return f"{lib.capability}: {lib.best.describe()} (per target; no kernel names read)"
    if not lib.kernels:
        return f"{lib.capability}: no kernels"
    parts = ", ".join(kernels_by(path, n) for path, n in lib.counts)
    head = f"{lib.capability}: {plural(lib.kernels, 'kernel')}"
    return f"{head}: {parts}; best {lib.best.describe()}"


def stub_line(stub: Stub, demangle: Callable[[str], str]) -> str:
    """``guarded(float*): trap stub in sm_121 SASS, present but traps on 12.1``."""
    what = "trap stub" if stub.trap else "empty"
    where = " ".join(str(t) for t in stub.targets)
    caps = ", ".join(str(c) for c in stub.devices)
    if stub.trap:
        runs = f", present but traps on {caps}" if caps else ", run by no checked device"
    else:
        runs = f", present but does nothing on {caps}" if caps else ""
        if not stub.has_code:
            runs += " (empty on every target)"
    return f"{demangle(stub.kernel)}: {what} in {where} SASS{runs}"
