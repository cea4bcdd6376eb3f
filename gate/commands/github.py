"""``cuda-gate github``: put the gate's results where people look in GitHub Actions.

* ``status``: a commit status per runner class, linking to the evidence;
* ``annotate``: ``::error`` annotations for the failed checks, the most important first,
  at most ``--max`` (GitHub shows 10 errors per step), then a ``::notice`` of how many
  more there were and where they are;
* ``summary``: append an evidence folder's summary.md to the step summary;
* ``runner-matrix``: the gate job's matrix from the one runner-classes file;
* ``attestation``: check a run's signed statements and write what ``actions/attest``
  needs to publish them as GitHub artifact attestations.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from gate.errors import BadInputError, ConfigError, EvidenceError
from gate.evidence import DEFAULT_DIR

DEFAULT_CLASSES = "ci/runner-classes.json"
MAX_ANNOTATIONS = 10  # GitHub shows at most 10 error (and 10 warning) annotations per step


def register(subparsers: Any) -> None:  # noqa: ANN401 - argparse's private subparsers type
    """Add ``github`` and its subcommands."""
    parser = subparsers.add_parser(
        "github", help="report results to GitHub: commit status, annotations, matrix"
    )
    sub = parser.add_subparsers(dest="github_command", required=True, metavar="ACTION")

    status = sub.add_parser("status", help="post a commit status for one runner class")
    status.add_argument("--evidence", type=Path, default=Path(DEFAULT_DIR))
    status.add_argument("--context", required=True, help='e.g. "cuda-gate/dgx-spark"')
    status.add_argument("--target-url", help="link to the evidence (default: this workflow run)")
    status.add_argument("--repository", help="owner/name (default: $GITHUB_REPOSITORY)")
    status.add_argument(
        "--revision", help="commit SHA (default: the run record's, then $GITHUB_SHA)"
    )
    status.set_defaults(handler=_status)

    annotate = sub.add_parser("annotate", help="print ::error annotations for failed checks")
    annotate.add_argument("--evidence", type=Path, default=Path(DEFAULT_DIR))
    annotate.add_argument("--title", default="cuda-gate", help="prefix of each annotation title")
    annotate.add_argument(
        "--max",
        type=_positive,
        default=MAX_ANNOTATIONS,
        metavar="N",
        help=f"most ::error lines to write (default: {MAX_ANNOTATIONS}, what GitHub shows)",
    )
    annotate.set_defaults(handler=_annotate)

    summary = sub.add_parser("summary", help="append summary.md to $GITHUB_STEP_SUMMARY")
    summary.add_argument("--evidence", type=Path, default=Path(DEFAULT_DIR))
    summary.add_argument("--heading", help="a Markdown heading to put above it")
    summary.set_defaults(handler=_summary)

    matrix = sub.add_parser("runner-matrix", help="emit the gate job's matrix as step outputs")
    matrix.add_argument("--file", type=Path, default=Path(DEFAULT_CLASSES))
    matrix.add_argument("--only", default="", help="comma- or space-separated class names")
    matrix.add_argument("--required-only", action="store_true", help="only release classes")
    matrix.set_defaults(handler=_runner_matrix)

    attest = sub.add_parser(
        "attestation",
        help="verify a run's signed statements; write the inputs of actions/attest",
    )
    attest.add_argument("--evidence", type=Path, default=Path(DEFAULT_DIR))
    attest.add_argument(
        "--key",
        type=Path,
        metavar="PUB",
        help="the Ed25519 public key (default: $CUDA_GATE_PUBLIC_KEY_FILE, else ./cuda-gate.pub)",
    )
    attest.add_argument(
        "--revision", help="the commit the run must have gated (default: $GITHUB_SHA)"
    )
    attest.add_argument(
        "--published",
        type=Path,
        metavar="SHA256SUMS",
        help="the files the release publishes (sha256sum's format, beside them): each must "
        "be a gated subject with the same digest, and only they are attested",
    )
    attest.add_argument("--out", type=Path, required=True, help="folder for the written files")
    attest.set_defaults(handler=_attestation)


def _status(args: argparse.Namespace) -> int:
    from gate.github.client import CommitStatus, GitHubClient, State
    from gate.record import load
    from gate.system import ci
    from gate.system.git import check_revision

    env = os.environ
    repository = args.repository or env.get("GITHUB_REPOSITORY")
    if not repository:
        raise ConfigError("no repository: pass --repository or set GITHUB_REPOSITORY")
    try:
        record = load(args.evidence)
    except BadInputError as e:
        status = CommitStatus(State.ERROR, args.context, f"no usable evidence: {e.message}")
        revision = args.revision or env.get("GITHUB_SHA")
    else:
        verdict = record.verdict
        state = State.SUCCESS if verdict.accepted else State.FAILURE
        status = CommitStatus(state, args.context, verdict.statement)
        revision = args.revision or record.source.revision or env.get("GITHUB_SHA")
    if not revision:
        raise ConfigError("no revision: pass --revision or set GITHUB_SHA")
    target_url = args.target_url or ci.run_url(env)
    status = CommitStatus(status.state, status.context, status.description, target_url)
    client = GitHubClient.from_env(env)
    client.create_status(repository, check_revision(revision), status)
    print(f"{args.context}: {status.state.value} on {revision[:12]} ({status.description})")
    return 0


def _annotate(args: argparse.Namespace) -> int:
    from gate.github.client import workflow_command
    from gate.record import load
    from gate.render.junit import JUNIT_FILE, read_failures
    from gate.rules.causes import rank

    errors: list[str] = []
    try:
        record = load(args.evidence)
    except BadInputError as e:
        errors.append(workflow_command("error", e.message, title=f"{args.title}: no run record"))
        junit = args.evidence / JUNIT_FILE
        failed = read_failures(junit) if junit.is_file() else ()
    else:
        failed = record.failed_checks
        if not record.verdict.accepted:
            errors.append(
                workflow_command("error", record.verdict.statement, title=f"{args.title}: verdict")
            )
    # The verdict's ranking (gate.rules.verdict.decide): what explains most comes first,
    # so the annotations GitHub shows are the ones worth reading.
    for check in sorted(failed, key=lambda c: rank(c.cause)):
        title = f"{args.title}: {check.classname}.{check.name}".replace(": .", ": ")
        errors.append(workflow_command("error", check.message or "failed", title=title))
    lines = errors[: args.max]
    if len(errors) > args.max:
        more = len(errors) - args.max
        where = f"the job summary and {args.evidence / JUNIT_FILE}"
        lines.append(
            workflow_command(
                "notice",
                f"{more} more error(s) than the {args.max} annotated: see {where}",
                title=f"{args.title}: {more} more",
            )
        )
    if lines:
        print("\n".join(lines))
    return 0


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _summary(args: argparse.Namespace) -> int:
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    source = args.evidence / "summary.md"
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = f"No summary: `{source}` was not written (see the job log).\n"
    except OSError as e:
        raise BadInputError(f"{source}: cannot read: {e.strerror}") from e
    if args.heading:
        text = f"## {args.heading}\n\n{text}"
    if not target:
        sys.stdout.write(text)
        return 0
    try:
        with Path(target).open("a", encoding="utf-8") as out:
            out.write(text if text.endswith("\n") else text + "\n")
    except OSError as e:
        raise EvidenceError(f"{target}: cannot append the step summary: {e.strerror}") from e
    return 0


def _runner_matrix(args: argparse.Namespace) -> int:
    from gate.github.runners import github_matrix, load_runner_classes, select

    only = args.only.replace(",", " ").split()
    chosen = select(load_runner_classes(args.file), only, required_only=args.required_only)
    lines = [
        f"matrix={json.dumps(github_matrix(chosen), separators=(',', ':'))}",
        f"classes={' '.join(c.name for c in chosen)}",
    ]
    output = os.environ.get("GITHUB_OUTPUT")
    if not output:
        print("\n".join(lines))
        return 0
    try:
        with Path(output).open("a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
    except OSError as e:
        raise EvidenceError(f"{output}: cannot write step outputs: {e.strerror}") from e
    print("\n".join(lines))
    return 0


def _attestation(args: argparse.Namespace) -> int:
    from gate.attest.signing import load_public_key
    from gate.config.options import PUBLIC_KEY, resolve
    from gate.github.attestation import write_attest_inputs
    from gate.scan import checksums
    from gate.system.git import check_revision

    key = load_public_key(resolve(PUBLIC_KEY, args, os.environ).value)
    revision = args.revision or os.environ.get("GITHUB_SHA")
    written = write_attest_inputs(
        args.evidence,
        key,
        args.out,
        revision=check_revision(revision) if revision else None,
        published=checksums.read(args.published) if args.published else None,
    )
    print(f"subjects ({', '.join(written.names)}): {written.subjects}")
    print(f"gate-run predicate: {written.gate_predicate}")
    print(f"test-result predicate: {written.test_result_predicate}")
    return 0
