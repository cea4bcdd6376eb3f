"""`cuda-gate evidence list|get`: read stored evidence back, checked against each run's index."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import ExitCode

if TYPE_CHECKING:
    from gate.store import EvidenceStore, RunSummary


def register(subparsers: Any) -> None:  # noqa: ANN401 - argparse's private subparsers type
    """Add the `evidence` subcommand with its `list` and `get` actions."""
    parser = subparsers.add_parser(
        "evidence",
        help="list or download the stored evidence of a revision",
        description="Read evidence back from the store configured for uploads.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the runs stored for a revision")
    get = actions.add_parser("get", help="download one run and check every file")
    for sub in (listing, get):
        sub.add_argument(
            "--revision",
            default="HEAD",
            metavar="REV",
            help="a commit id (full or short) or a ref git resolves here (default: HEAD)",
        )
        sub.add_argument(
            "--repository",
            metavar="OWNER/REPO",
            help="default: GITHUB_REPOSITORY or the git remote 'origin'",
        )
        sub.add_argument("--store", metavar="URL", help="s3://bucket/prefix or a folder")
    get.add_argument("--runner", required=True, help="the runner whose run to fetch")
    get.add_argument("--run", metavar="ID", help="the run id (default: the newest complete run)")
    get.add_argument(
        "--dest", type=Path, help="an absent or empty folder (default: evidence-<runner>-<run>)"
    )
    prune = actions.add_parser(
        "prune",
        help="remove old runs from a local store (accepted runs stay unless --accepted)",
        description="Per runner of the repository, keep the newest --keep runs of every "
        "revision together and remove the older ones, except accepted runs (unless "
        "--accepted) and runs whose index cannot be read. Local stores only.",
    )
    prune.add_argument(
        "--repository",
        metavar="OWNER/REPO",
        help="default: GITHUB_REPOSITORY or the git remote 'origin'",
    )
    prune.add_argument("--store", metavar="URL", help="a folder (a local store)")
    prune.add_argument(
        "--keep", type=int, default=10, metavar="N", help="runs kept per runner (default 10)"
    )
    prune.add_argument("--accepted", action="store_true", help="remove old accepted runs too")
    prune.add_argument(
        "--dry-run", action="store_true", help="say what would be removed; remove nothing"
    )
    listing.set_defaults(handler=list_command)
    get.set_defaults(handler=get_command)
    prune.set_defaults(handler=prune_command)


def _open(args: argparse.Namespace) -> tuple[EvidenceStore, str]:
    import os

    from gate.store import find_repository, load_settings, open_store

    repository = args.repository or find_repository(os.environ, Path.cwd())
    return open_store(load_settings(url=args.store)), repository


def list_command(args: argparse.Namespace) -> int:
    """Print a table of the runs stored for the revision; exit 6 if an index is unreadable."""
    from gate.errors import BadInputError
    from gate.git import resolve
    from gate.render.text import count
    from gate.store import list_runs

    store, repository = _open(args)
    revision = resolve(args.revision, Path.cwd())
    runs = list_runs(store, repository, revision, keep_unreadable=True)
    print(f"{repository} @ {revision} in {store.describe()}: {count(len(runs), 'run')}")
    if runs:
        print(format_table(runs))
    unreadable = [r for r in runs if r.problem is not None]
    if unreadable:
        # The table says why for each; the status tells a script that something is wrong.
        raise BadInputError(
            f"{len(unreadable)} of {len(runs)} runs have an unreadable index "
            f"(first: run {unreadable[0].run_id} of {unreadable[0].runner})"
        )
    return int(ExitCode.OK)


def format_table(runs: tuple[RunSummary, ...]) -> str:
    """Runs as an aligned plain-text table."""
    rows = [("RUN ID", "RUNNER", "CLASS", "VERDICT", "FILES", "STATE")]
    for run in runs:
        index = run.index
        if index is None:
            state = "incomplete" if run.problem is None else f"unreadable: {run.problem}"
            rows.append((run.run_id, run.runner, "-", "-", "-", state))
            continue
        verdict = (
            "-"
            if index.verdict is None
            else ("accepted" if index.verdict.accepted else "not accepted")
        )
        state = "complete (dirty tree)" if index.meta.dirty else "complete"
        rows.append(
            (
                run.run_id,
                run.runner,
                index.meta.runner_class or "-",
                verdict,
                str(len(index.files)),
                state,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def get_command(args: argparse.Namespace) -> int:
    """Download one run and check every file against its index."""
    from gate.git import resolve
    from gate.store import fetch_run, latest_run, list_runs
    from gate.store.records import check_segment

    # Names first: a --run of ../x must never reach a key or a path.
    runner = check_segment(args.runner, "--runner")
    given = None if args.run is None else check_segment(args.run, "--run")
    store, repository = _open(args)
    revision = resolve(args.revision, Path.cwd())
    run_id = given or latest_run(list_runs(store, repository, revision), runner).run_id
    dest = args.dest or Path(f"evidence-{runner}-{run_id}")
    index = fetch_run(store, repository, revision, runner=runner, run_id=run_id, dest=dest)
    verdict = "no verdict" if index.verdict is None else index.verdict.statement
    print(f"fetched {len(index.files)} files of run {run_id} ({runner}) into {dest}: {verdict}")
    return int(ExitCode.OK)


def prune_command(args: argparse.Namespace) -> int:
    """Remove old runs of the repository from a local store; print what went and what stays."""
    from gate.render.text import count
    from gate.store.prune import prune

    store, repository = _open(args)
    kept, removed = prune(
        store, repository, args.keep, accepted=args.accepted, apply=not args.dry_run
    )
    verb = "would remove" if args.dry_run else "removed"
    print(
        f"{repository} in {store.describe()}: {verb} {count(len(removed), 'run')}, "
        f"kept {count(len(kept), 'run')} (newest {args.keep} per runner"
        f"{', and every accepted run' if not args.accepted else ''})"
    )
    for run in removed:
        print(f"  {verb}  {run.runner}  {run.run_id}  {run.state}  @ {run.revision[:12]}")
    return int(ExitCode.OK)
