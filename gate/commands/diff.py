"""`cuda-gate diff OLD NEW`: what a run lost against a baseline run, artifact by artifact."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import ExitCode

if TYPE_CHECKING:
    from gate.baseline.comparison import Baseline
    from gate.baseline.resolve import Found, Which

DIFF_VERSION = 2  # 2: a change names its kernel by symbol; one change per kernel lost


def register(subparsers: Any) -> None:  # noqa: ANN401 - argparse's private subparsers type
    """Add the `diff` subcommand."""
    parser = subparsers.add_parser(
        "diff",
        help="compare two runs: targets, kernels, PTX ISA, Tile IR, bytes, routes; exit 1 on loss",
        description="Compare the device code of two gate runs, artifact by artifact (matched "
        "by name): SASS and PTX targets, Tile IR entries, kernels per target, PTX ISA and Tile "
        "IR bytecode versions, bytes of device code, the route per device. A dropped "
        "artifact, target, Tile IR entry or kernel, a device that lost its native route, or "
        "a PTX ISA or Tile IR version that needs a newer driver fails (exit 1) unless the "
        "configuration's [baseline] makes it warn; additions and size changes are reported. "
        "OLD and NEW are evidence folders or stored runs: latest-accepted (of the runner "
        "class), a revision, a tag.",
    )
    parser.add_argument("old", metavar="OLD", help="the baseline: a folder or a stored run")
    parser.add_argument("new", metavar="NEW", help="the run to judge: a folder or a stored run")
    parser.add_argument("--store", metavar="URL", help="s3://bucket/prefix or a folder")
    parser.add_argument(
        "--repository",
        metavar="OWNER/REPO",
        help="default: GITHUB_REPOSITORY or the git remote 'origin'",
    )
    parser.add_argument(
        "--runner-class",
        metavar="CLASS",
        help="whose stored runs a stored reference names (default: CUDA_GATE_RUNNER_CLASS)",
    )
    parser.add_argument("--runner", metavar="NAME", help="one runner's stored runs instead")
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="PATH",
        help="the configuration whose [baseline] says which losses only warn (default: "
        "cuda-gate.toml, else [tool.cuda-gate] in pyproject.toml)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON document (gate/schemas/diff.schema.json)",
    )
    parser.set_defaults(handler=handle)


def which(args: argparse.Namespace) -> Which:
    """The runner class (or runner) whose stored runs a reference names."""
    import os

    from gate.baseline.resolve import Which
    from gate.config.options import RUNNER_CLASS, resolve

    return Which(resolve(RUNNER_CLASS, args, os.environ).value, args.runner)


def handle(args: argparse.Namespace) -> int:
    """Resolve both runs, compare them, print the table (or JSON); exit 1 on a loss."""
    import tempfile

    from gate import config
    from gate.baseline.resolve import compare_records

    project = config.load(Path.cwd(), args.config)
    with tempfile.TemporaryDirectory(prefix="cuda-gate-diff-") as work:
        old = _found(args, args.old, Path(work) / "old", project)
        new = _found(args, args.new, Path(work) / "new", project)
    compared = compare_records(old, new.record, project.baseline)
    if args.json:
        import json

        print(json.dumps(document(compared, new), indent=1, sort_keys=True))
    else:
        from gate.render import diff
        from gate.render.text import width

        print(diff.console(compared.diff, compared.describe(), total=width()))
    return int(ExitCode.NOT_ACCEPTED if compared.diff.failed else ExitCode.OK)


def _found(args: argparse.Namespace, reference: str, dest: Path, project: Any) -> Found:  # noqa: ANN401
    from gate.baseline.resolve import from_folder, from_store, looks_like_folder

    if looks_like_folder(reference):
        return from_folder(Path(reference), reference)
    return from_store(
        reference,
        which(args),
        dest,
        store_url=args.store,
        repository=args.repository,
        config=project,
    )


def document(compared: Baseline, new: Found) -> dict[str, Any]:
    """``diff --json``: gate/schemas/diff.schema.json, version 2."""
    from gate import __version__
    from gate.baseline.comparison import diff_json

    record, summary = new.record, new.summary
    body = compared.to_json()
    return {
        "version": DIFF_VERSION,
        "tool": {"name": "cuda-gate", "version": __version__},
        "baseline": {k: body[k] for k in _RUN_KEYS},
        "run": {
            "reference": new.reference,
            "location": new.location,
            "result_sha256": new.digest,
            "revision": summary.revision if summary else record.source.revision,
            "runner": summary.runner if summary else record.run.runner,
            "run_id": summary.run_id if summary else record.run.run_id,
        },
        **diff_json(compared.diff),
    }


_RUN_KEYS = ("reference", "location", "result_sha256", "revision", "runner", "run_id")
