"""``cuda-gate verify``: check a signed manifest against the artifacts and this machine.

Exit statuses: 0 verified; 10 bad signature; 11 an artifact changed; 12 the
environment is stale; 13 an evidence file changed or missing; 1 the recorded run
was not accepted; 14 the evidence is not of ``--revision`` or older than
``--max-age``/``--not-before``; 7 a bad option value. Each step is printed with
its result; steps that could not run say so.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gate.attest.freshness import Freshness

DEFAULT_ENVELOPE = "gate-evidence/manifest.dsse.json"
DEFAULT_PUBLIC_KEY = "cuda-gate.pub"


def register(subparsers: Any) -> None:  # noqa: ANN401 - argparse's private subparsers type
    """Add ``verify``."""
    parser = subparsers.add_parser(
        "verify",
        help="verify a signed manifest against the artifacts and this machine",
        description="1 signature, 2 artifact hashes, 3 evidence digests (every recorded file "
        "must be beside the envelope), 4 driver/toolkit/host/capability against this machine, "
        "5 the recorded verdict, 6 freshness: the recorded source revision and finish time, "
        "checked with --revision, --max-age or --not-before (a signature alone does not prove "
        "the run is recent: a replayed older envelope verifies while its artifacts are "
        "unchanged).",
    )
    parser.add_argument(
        "envelope",
        nargs="?",
        type=Path,
        default=Path(DEFAULT_ENVELOPE),
        help=f"the DSSE envelope (default: {DEFAULT_ENVELOPE})",
    )
    parser.add_argument(
        "--key",
        type=Path,
        metavar="PUB",
        help="the Ed25519 public key (default: $CUDA_GATE_PUBLIC_KEY_FILE, "
        f"else ./{DEFAULT_PUBLIC_KEY})",
    )
    parser.add_argument(
        "--artifacts",
        type=Path,
        metavar="DIR",
        help="where the artifacts are now (default: the paths recorded in the manifest)",
    )
    parser.add_argument(
        "--offline",
        "--no-environment",
        dest="environment",
        action="store_false",
        help="skip step 4 (comparing driver, toolkit, host and capability with this machine)",
    )
    parser.add_argument(
        "--envelope-only",
        action="store_true",
        help="check the envelope on its own, away from its evidence: skip step 3 (said so)",
    )
    parser.add_argument(
        "--revision",
        metavar="REV",
        help="require the run to be recorded for this commit (a full id, or a ref git "
        "resolves here), from a clean tree",
    )
    parser.add_argument(
        "--max-age",
        metavar="DURATION",
        help="require the run to have finished at most this long ago (90m, 36h, 7d, 1d12h)",
    )
    parser.add_argument(
        "--not-before",
        metavar="TIME",
        help="require the run to have finished at or after this ISO 8601 time "
        "(2026-11-29, 2026-11-29T18:00:00Z; UTC if no zone)",
    )
    parser.set_defaults(handler=_verify)


def _public_key_path(given: Path | None) -> Path:
    from gate.config.options import PUBLIC_KEY, PUBLIC_KEY_FILE_ENV, Layer, resolve
    from gate.errors import ConfigError

    key = resolve(PUBLIC_KEY, argparse.Namespace(key=given), os.environ)
    if key.layer is not Layer.DEFAULT or key.value.is_file():
        return key.value
    raise ConfigError(
        "no public key to verify with",
        hint=f"pass --key PUB, set {PUBLIC_KEY_FILE_ENV}, or put {DEFAULT_PUBLIC_KEY} here",
    )


def _freshness(args: argparse.Namespace) -> Freshness:
    """The freshness checks the options ask for, every value checked before anything runs."""
    from gate.attest.freshness import Freshness, parse_duration, parse_time
    from gate.system.git import resolve

    return Freshness(
        revision=None if args.revision is None else resolve(args.revision, Path.cwd()),
        not_before=None if args.not_before is None else parse_time(args.not_before),
        max_age=None if args.max_age is None else parse_duration(args.max_age),
    )


def _verify(args: argparse.Namespace) -> int:
    from gate.attest.signing import load_public_key
    from gate.attest.verify import StepResult, verify
    from gate.commands.stdout import Stdout
    from gate.errors import ConfigError

    if args.artifacts is not None and not args.artifacts.is_dir():
        raise ConfigError(f"{args.artifacts}: --artifacts is not a folder")
    freshness = _freshness(args)
    key = load_public_key(_public_key_path(args.key))
    out = Stdout()  # a closed pipe (| head) stops the lines, not the steps
    out.write(f"cuda-gate verify {args.envelope} (key {key.keyid})\n")

    def emit(step: StepResult) -> None:
        out.write(step.line() + "\n", flush=True)

    result = verify(
        args.envelope,
        key,
        artifacts_dir=args.artifacts,
        check_environment=args.environment,
        envelope_only=args.envelope_only,
        freshness=freshness,
        emit=emit,
    )
    error = result.first_error()
    if error is not None:
        raise error
    skipped = result.not_checked
    out.write("verified" + (f" (not checked: {', '.join(skipped)})" if skipped else "") + "\n")
    out.done()
    return 0
