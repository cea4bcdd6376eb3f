"""`cuda-gate upload [EVIDENCE_DIR] [--resume]`: store evidence, or finish spooled uploads."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import ExitCode
from gate.evidence import DEFAULT_DIR

if TYPE_CHECKING:
    from gate.store import ProgressCallback, PublishResult, StoreSettings


def register(subparsers: Any) -> None:  # noqa: ANN401 - argparse's private subparsers type
    """Add the `upload` subcommand."""
    parser = subparsers.add_parser(
        "upload",
        help="store an evidence folder (local folder or S3), or --resume spooled uploads",
        description="Check the folder is gate evidence (the gate's marker, a readable "
        "result.json, manifest.json matching every file, no symbolic links), copy it to the "
        "local spool, upload it under "
        "<owner>/<repo>/<revision>/<runner>/<run-id>/ with an index written last, and "
        "drop the spool once the store confirmed every file. With --resume, finish "
        "every upload an earlier outage left in the spool. Exit 20: the store was "
        "unreachable or refused (the run stays queued); exit 22: the store already holds "
        "different content under the run's id (the run is kept in the spool's "
        ".conflicts/ folder and listed by --resume, never retried).",
    )
    parser.add_argument(
        "evidence_dir",
        nargs="?",
        type=Path,
        help=f"the evidence folder (default: {DEFAULT_DIR}; not used with --resume)",
    )
    parser.add_argument("--resume", action="store_true", help="upload every run left in the spool")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="s3://bucket/prefix or a folder (default: CUDA_GATE_STORE or the config file)",
    )
    parser.add_argument("--repository", metavar="OWNER/REPO", help="override the repository")
    parser.add_argument("--revision", metavar="SHA", help="override the source revision")
    parser.add_argument("--runner", help="override the runner name")
    parser.add_argument("--runner-class", help="override the runner class")
    parser.add_argument("--run-id", help="override the run id")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Upload one evidence folder, or resume every spooled run."""
    from gate.evidence import MARKER
    from gate.fsutil import Lock
    from gate.store import load_settings, resume
    from gate.store.intake import open_evidence
    from gate.store.progress import StderrProgress

    settings = load_settings(url=args.store)
    progress = None if args.quiet else StderrProgress()
    if args.resume:
        if args.evidence_dir is not None:
            print("cuda-gate: --resume uploads the spool; EVIDENCE_DIR is ignored", file=sys.stderr)
        report = resume(settings, progress=progress)
        attempted = report.stored or report.conflicts or report.failures
        if not attempted:
            print(f"nothing to resume: no run is waiting in the spool {settings.spool_dir}")
        for result in report.stored:
            print(f"stored {result.location} ({_counts(result)})")
        if report.kept_aside:
            # Listed every time, so a run refused for a conflict is never forgotten.
            print(f"{len(report.kept_aside)} run(s) kept aside after a conflict (not retried):")
            for kept in report.kept_aside:
                print(f"  {kept.describe()}")
        error = report.error()
        if error is not None:
            raise error
        return int(ExitCode.OK)
    evidence_dir = args.evidence_dir or Path(DEFAULT_DIR)
    # Before anything is derived from it: only gate evidence is stored.
    open_evidence(evidence_dir)
    # Never while a run writes it (that run's own store stage holds this lock already).
    lock = Lock.acquire(evidence_dir / MARKER, f"{evidence_dir} (evidence folder)", create=False)
    try:
        return _upload(args, evidence_dir, settings, progress)
    finally:
        lock.release()


def _upload(
    args: argparse.Namespace,
    evidence_dir: Path,
    settings: StoreSettings,
    progress: ProgressCallback | None,
) -> int:
    from gate.store import publish, run_meta_from_evidence

    meta = run_meta_from_evidence(
        evidence_dir,
        overrides={
            "repository": args.repository,
            "revision": args.revision,
            "runner": args.runner,
            "runner_class": args.runner_class,
            "run_id": args.run_id,
        },
    )
    result = publish(evidence_dir, meta, settings, progress=progress)
    print(f"stored {result.location} ({_counts(result)})")
    return int(ExitCode.OK)


def _counts(result: PublishResult) -> str:
    stored, present = len(result.uploaded), len(result.already_present)
    return f"{stored} stored, {present} already present"
