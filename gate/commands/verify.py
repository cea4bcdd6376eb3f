"""``cuda-gate verify``: check a signed manifest against the artifacts and this machine.

Exit statuses: 0 verified; 10 bad signature; 11 an artifact changed; 12 the
environment is stale; 13 an evidence file changed; 1 the recorded run was not
accepted. Each step is printed with its result; steps that could not run say so.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

DEFAULT_ENVELOPE = "gate-evidence/manifest.dsse.json"
DEFAULT_PUBLIC_KEY = "cuda-gate.pub"


def register(subparsers: Any) -> None:  # noqa: ANN401 - argparse's private subparsers type
    """Add ``verify``."""
    parser = subparsers.add_parser(
        "verify",
        help="verify a signed manifest against the artifacts and this machine",
        description="1 signature, 2 artifact hashes, 3 evidence digests, 4 driver/toolkit/"
        "host/capability against this machine, 5 the recorded verdict.",
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
    parser.set_defaults(handler=_verify)


def _public_key_path(given: Path | None) -> Path:
    from gate.attest.signing import PUBLIC_KEY_FILE_ENV
    from gate.errors import ConfigError

    if given is not None:
        return given
    if os.environ.get(PUBLIC_KEY_FILE_ENV):
        return Path(os.environ[PUBLIC_KEY_FILE_ENV])
    if Path(DEFAULT_PUBLIC_KEY).is_file():
        return Path(DEFAULT_PUBLIC_KEY)
    raise ConfigError(
        "no public key to verify with",
        hint=f"pass --key PUB, set {PUBLIC_KEY_FILE_ENV}, or put {DEFAULT_PUBLIC_KEY} here",
    )


def _verify(args: argparse.Namespace) -> int:
    from gate.attest.signing import load_public_key
    from gate.attest.verify import StepResult, verify
    from gate.errors import ConfigError

    if args.artifacts is not None and not args.artifacts.is_dir():
        raise ConfigError(f"{args.artifacts}: --artifacts is not a folder")
    key = load_public_key(_public_key_path(args.key))
    print(f"cuda-gate verify {args.envelope} (key {key.keyid})")

    def emit(step: StepResult) -> None:
        print(step.line(), flush=True)

    result = verify(
        args.envelope,
        key,
        artifacts_dir=args.artifacts,
        check_environment=args.environment,
        emit=emit,
    )
    error = result.first_error()
    if error is not None:
        raise error
    skipped = result.not_checked
    print("verified" + (f" (not checked: {', '.join(skipped)})" if skipped else ""))
    return 0
