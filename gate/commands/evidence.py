"""`cuda-gate evidence list|get|prune`: stored evidence read back, checked against run indexes."""

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
    listing.add_argument(
        "--all", action="store_true", help="every revision of the repository, not one"
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="one JSON document with the full ids (gate/schemas/evidence-list.schema.json)",
    )
    get.add_argument("--runner", required=True, help="the runner whose run to fetch")
    get.add_argument(
        "--run",
        metavar="ID",
        help="the run id, full or as `evidence list` shows it (default: the newest complete run)",
    )
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
    _register_baseline(actions)
    listing.set_defaults(handler=list_command)
    get.set_defaults(handler=get_command)
    prune.set_defaults(handler=prune_command)


def _register_baseline(actions: Any) -> None:  # noqa: ANN401 - argparse's private type
    baseline = actions.add_parser(
        "baseline",
        help="download the run a --baseline reference names (latest-accepted, a revision, a tag)",
        description="Download, and check against its index, the stored run that `cuda-gate "
        "run --baseline REF` would compare with: where the store's credentials are, so the "
        "job that runs project code gets a folder instead (exit 13 when none is stored).",
    )
    baseline.add_argument("reference", metavar="REF", help="latest-accepted, a revision, a tag")
    baseline.add_argument(
        "--runner-class",
        metavar="CLASS",
        help="whose runs (default: CUDA_GATE_RUNNER_CLASS)",
    )
    baseline.add_argument("--runner", metavar="NAME", help="one runner's runs instead")
    baseline.add_argument("--dest", type=Path, required=True, help="an absent or empty folder")
    baseline.add_argument("--store", metavar="URL", help="s3://bucket/prefix or a folder")
    baseline.add_argument(
        "--repository",
        metavar="OWNER/REPO",
        help="default: GITHUB_REPOSITORY or the git remote 'origin'",
    )
    baseline.set_defaults(handler=baseline_command)


def baseline_command(args: argparse.Namespace) -> int:
    """Download the stored run a baseline reference names into ``--dest``."""
    from gate.baseline.resolve import from_store
    from gate.commands.diff import which

    found = from_store(
        args.reference, which(args), args.dest, store_url=args.store, repository=args.repository
    )
    run = found.summary
    assert run is not None  # noqa: S101 - from_store always says which stored run
    print(
        f"fetched baseline {args.reference}: run {run.run_id} of {run.runner} at "
        f"{run.revision[:12]} ({run.state.value}) into {args.dest}"
    )
    return int(ExitCode.OK)


def _open(args: argparse.Namespace) -> tuple[EvidenceStore, str]:
    import os

    from gate.store import find_repository, load_settings, open_store

    repository = args.repository or find_repository(os.environ, Path.cwd())
    return open_store(load_settings(url=args.store)), repository


def list_command(args: argparse.Namespace) -> int:
    """Print the runs stored for the revision, newest first; exit 6 if an index is unreadable."""
    from gate.errors import BadInputError, ConfigError
    from gate.store.readback import list_repository_runs, list_runs
    from gate.system.git import resolve

    if args.all and args.revision != "HEAD":
        raise ConfigError("--all lists every revision; leave out --revision")
    store, repository = _open(args)
    revision = None if args.all else resolve(args.revision, Path.cwd())
    if revision is None:
        found = list_repository_runs(store, repository, keep_unreadable=True)
    else:
        found = list_runs(store, repository, revision, keep_unreadable=True)
    runs = tuple(sorted(found, key=lambda r: r.newest_first(), reverse=True))
    if args.json:
        _print_json(listing_document(repository, revision, store.describe(), runs))
    else:
        shown = "every revision" if revision is None else revision[:12]
        print(f"{repository} @ {shown} in {store.describe()}")
        if runs:
            print(format_table(runs))
        print(count_line(runs))
    unreadable = [r for r in runs if r.problem is not None]
    if unreadable:
        # The listing says why for each; the status tells a script that something is wrong.
        raise BadInputError(
            f"{len(unreadable)} of {len(runs)} runs have an unreadable index "
            f"(first: run {unreadable[0].run_id} of {unreadable[0].runner})"
        )
    return int(ExitCode.OK)


LIST_VERSION = 1


def listing_document(
    repository: str, revision: str | None, store: str, runs: tuple[RunSummary, ...]
) -> dict[str, Any]:
    """``evidence list --json``: gate/schemas/evidence-list.schema.json, version 1."""
    from gate import __version__

    return {
        "version": LIST_VERSION,
        "tool": {"name": "cuda-gate", "version": __version__},
        "repository": repository,
        "revision": revision,  # None: every revision (--all)
        "store": store,
        "runs": [run.listing_json() for run in runs],
    }


def _print_json(doc: dict[str, Any]) -> None:
    import json

    print(json.dumps(doc, indent=1, sort_keys=True))


def format_table(runs: tuple[RunSummary, ...]) -> str:
    """Runs as an aligned plain-text table, in the order given, with short ids; an
    unreadable run's reason follows the table, one line each."""
    from gate.store.records import short_run_id

    shorts = [short_run_id(r.run_id) for r in runs]
    rows = [("VERDICT", "FINISHED (UTC)", "REVISION", "RUNNER", "CLASS", "RUN")]
    for run, short in zip(runs, shorts, strict=True):
        index = run.index
        revision = run.revision[:12]
        if index is not None and index.meta.dirty:
            revision += "+dirty"  # built from a tree with uncommitted changes
        # A short id two listed runs share would name neither: those show in full.
        shown = short if shorts.count(short) == 1 else run.run_id
        rows.append(
            (
                run.state.value,
                "-" if index is None or index.finished is None else human_time(index.finished),
                revision,
                run.runner,
                "-" if index is None else index.meta.runner_class or "-",
                shown,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines += [f"{r.run_id} ({r.runner}): {r.problem}" for r in runs if r.problem is not None]
    return "\n".join(lines)


def count_line(runs: tuple[RunSummary, ...]) -> str:
    """``3 runs: 1 accepted, 2 incomplete`` (states in a fixed order, absent ones left out)."""
    from gate.render.text import count
    from gate.store.records import RunState

    states = [r.state for r in runs]
    parts = [f"{states.count(s)} {s.value}" for s in RunState if s in states]
    return count(len(runs), "run") + (f": {', '.join(parts)}" if parts else "")


def human_time(iso: str) -> str:
    """``2026-11-29 18:00:00`` for ``2026-11-29T18:00:00Z`` (UTC); an unparsable value as is."""
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def get_command(args: argparse.Namespace) -> int:
    """Download one run and check every file against its index."""
    from gate.store import fetch_run, latest_run, list_runs
    from gate.store.readback import resolve_run_id
    from gate.store.records import check_segment
    from gate.system.git import resolve

    # Names first: a --run of ../x must never reach a key or a path.
    runner = check_segment(args.runner, "--runner")
    given = None if args.run is None else check_segment(args.run, "--run")
    store, repository = _open(args)
    revision = resolve(args.revision, Path.cwd())
    if given is None:
        run_id = latest_run(list_runs(store, repository, revision), runner).run_id
    else:
        # A short id as `evidence list` shows it names the one run of the runner that has it.
        runs = list_runs(store, repository, revision, keep_unreadable=True)
        run_id = resolve_run_id(runs, runner, given)
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
