"""``cuda-gate matrix``: pass a release only when every required runner class passed.

Reads every runner's evidence for one revision from the configured store,
verifies each signed manifest, prints a table (runner class x entry point x
path) and says, for each class, passed / failed / missing / stale / tampered /
unsigned. ``--notes FILE`` writes release-notes Markdown with the verdict
statement and the digest of each manifest. Exit 0 only when every required
class passed; 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import ConfigError, ExitCode

if TYPE_CHECKING:
    from gate.github.matrix import MatrixReport

DEFAULT_PUBLIC_KEY = "cuda-gate.pub"
DEFAULT_CLASSES = "ci/runner-classes.json"


def register(subparsers: Any) -> None:  # noqa: ANN401 - argparse's private subparsers type
    """Add ``matrix``."""
    parser = subparsers.add_parser(
        "matrix",
        help="check every required runner class's signed evidence for one revision",
        description="Pass only when every required runner class passed on this revision.",
    )
    parser.add_argument(
        "--revision", required=True, help="a commit id (full or short) or a ref git resolves here"
    )
    parser.add_argument(
        "--require",
        nargs="+",
        default=[],
        metavar="CLASS",
        help="runner classes that must pass (default: the required ones of --runner-classes)",
    )
    parser.add_argument(
        "--runner-classes",
        type=Path,
        default=Path(DEFAULT_CLASSES),
        help=f"where the required classes are listed (default: {DEFAULT_CLASSES})",
    )
    parser.add_argument("--repository", help="owner/name (default: $GITHUB_REPOSITORY, git)")
    parser.add_argument(
        "--key",
        type=Path,
        metavar="PUB",
        help="the Ed25519 public key (default: $CUDA_GATE_PUBLIC_KEY_FILE, "
        f"else ./{DEFAULT_PUBLIC_KEY})",
    )
    parser.add_argument("--store", help="store folder or s3://bucket/prefix (default: configured)")
    parser.add_argument("--notes", type=Path, metavar="FILE", help="write release notes here")
    parser.set_defaults(handler=_matrix)


def _matrix(args: argparse.Namespace) -> int:
    from gate.attest.signing import load_public_key
    from gate.config import options
    from gate.fsutil import write_atomic
    from gate.github.matrix import evaluate
    from gate.github.runners import load_runner_classes
    from gate.store import find_repository, load_settings, open_store
    from gate.system.git import resolve

    env = dict(os.environ)
    revision = resolve(args.revision, Path.cwd())
    required = list(args.require)
    if not required:
        required = [c.name for c in load_runner_classes(args.runner_classes) if c.required]
    if not required:
        raise ConfigError(f"{args.runner_classes}: no runner class is marked required")
    repository = args.repository or env.get("GITHUB_REPOSITORY") or find_repository(env, Path.cwd())
    key = load_public_key(options.resolve(options.PUBLIC_KEY, args, env).value)
    if args.store:
        env["CUDA_GATE_STORE"] = args.store
    store = open_store(load_settings(env=env))
    with tempfile.TemporaryDirectory(prefix="cuda-gate-matrix-") as work:
        report = evaluate(store, repository, revision, required, key=key, workdir=Path(work))
    print(render_table(report))
    if args.notes:
        write_atomic(args.notes, render_notes(report).encode("utf-8"))
        print(f"release notes: {args.notes}")
    return int(ExitCode.OK if report.passed else ExitCode.NOT_ACCEPTED)


def render_table(report: MatrixReport) -> str:
    """The console table: one row per class x entry point x path, then each class's detail."""
    rows = [("runner class", "required", "status", "entry point", "path", "result")]
    for r in report.results:
        req = "yes" if r.required else "no"
        if not r.executions:
            rows.append((r.runner_class, req, r.status.value, "-", "-", "-"))
        for x in r.executions:
            result = "passed" if x.passed else f"FAILED ({x.detail})"
            rows.append((r.runner_class, req, r.status.value, x.entry_point, x.path, result))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    for r in report.results:
        run = f" [{r.runner} / {r.run_id}]" if r.run_id else ""
        lines.append(f"{r.runner_class}: {r.status.value.upper()}{run}: {r.detail}")
    lines += ["", f"{report.repository} @ {report.revision}: {report.statement}"]
    return "\n".join(lines)


def render_notes(report: MatrixReport) -> str:
    """Release-notes Markdown: the verdict statement and each manifest's digest."""
    out = [
        f"## cuda-gate: {'accepted' if report.passed else 'NOT accepted'}",
        "",
        f"**{report.statement}**",
        "",
        f"Revision `{report.revision}` of `{report.repository}`.",
        "",
        (
            "| Runner class | Required | Status | Run | Signed manifest (DSSE) sha256 | "
            "Statement sha256 | Key |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for r in report.results:
        out.append(
            f"| {r.runner_class} | {'yes' if r.required else 'no'} | {r.status.value} | "
            f"{_code(r.run_id and f'{r.runner}/{r.run_id}')} | {_code(r.envelope_sha256)} | "
            f"{_code(r.statement_sha256)} | {_code(r.keyid)} |"
        )
    out += ["", "| Runner class | Entry point | Path | Result |", "|---|---|---|---|"]
    for r in report.results:
        for x in r.executions:
            out.append(
                f"| {r.runner_class} | `{x.entry_point}` | {x.path} | "
                f"{'passed' if x.passed else x.detail} |"
            )
    out += [""] + [f"- {r.runner_class}: {r.status.value}: {r.detail}" for r in report.results]
    return "\n".join(out) + "\n"


def _code(value: str | None) -> str:
    return f"`{value}`" if value else "-"
