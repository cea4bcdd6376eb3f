"""Human-readable results: the console table and the Markdown summary.

The same rows feed both, so the terminal and the GitHub step summary never disagree.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gate.stages.checks import Check, Verdict


def _status(check: Check) -> str:
    if check.skipped:
        return "SKIP"
    return "PASS" if check.passed else "FAIL"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, max_width: int = 90) -> str:
    """A plain-text table with aligned columns; long cells are cut with an ellipsis."""
    cells = [[_cut(str(c), max_width) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), line]
    out += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(out)


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def console(checks: Sequence[Check], verdict: Verdict, diagnoses: Sequence[str]) -> str:
    """The console report: one row per check, then diagnoses and the verdict."""
    rows = [(_status(c), c.classname.removeprefix("gate."), c.name, c.message) for c in checks]
    parts = [table(("result", "stage", "check", "detail"), rows)]
    if diagnoses:
        parts.append("\nDiagnosis:")
        parts += [f"  - {d}" for d in diagnoses]
    parts.append(f"\nVerdict: {verdict.statement}")
    return "\n".join(parts)


def markdown(
    checks: Sequence[Check],
    verdict: Verdict,
    diagnoses: Sequence[str],
    facts: Sequence[tuple[str, str]],
) -> str:
    """The Markdown summary: facts, a check table, diagnoses, and the verdict."""
    icon = "✅" if verdict.accepted else "❌"
    lines = [f"## cuda-gate: {icon} {_md(verdict.statement)}", ""]
    if facts:
        lines += ["| fact | value |", "|---|---|"]
        lines += [f"| {_md(k)} | {_md(v)} |" for k, v in facts]
        lines.append("")
    lines += ["| result | stage | check | detail |", "|---|---|---|---|"]
    lines += [
        f"| {_status(c)} | {_md(c.classname.removeprefix('gate.'))} | {_md(c.name)} | "
        f"{_md(c.message)} |"
        for c in checks
    ]
    if diagnoses:
        lines += ["", "### Diagnosis", ""] + [f"- {_md(d)}" for d in diagnoses]
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
