"""``cuda-gate keygen``: write an Ed25519 key pair for signing manifests.

The private key goes to ``PREFIX.key`` (mode 0600; store it as the CI secret
``CUDA_GATE_SIGNING_KEY`` or point ``CUDA_GATE_SIGNING_KEY_FILE`` at it, never
commit it); the public key to ``PREFIX.pub``, which can be committed and passed
to ``cuda-gate verify --key``. The private key is never printed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

DEFAULT_PREFIX = "cuda-gate"


def register(subparsers: Any) -> None:  # noqa: ANN401 - argparse's private subparsers type
    """Add ``keygen``."""
    parser = subparsers.add_parser(
        "keygen",
        help="write an Ed25519 key pair for signing manifests",
        description="Write PREFIX.key (private, mode 0600) and PREFIX.pub (public).",
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_PREFIX,
        metavar="PREFIX",
        help=f"path prefix of the two files (default: {DEFAULT_PREFIX})",
    )
    parser.add_argument("--force", action="store_true", help="replace existing key files")
    parser.set_defaults(handler=_keygen)


def _keygen(args: argparse.Namespace) -> int:
    from gate.attest.signing import generate_key_pair
    from gate.config.options import KEY_FILE_ENV, KEY_PEM_ENV
    from gate.errors import ConfigError
    from gate.fsutil import write_atomic

    private, public = Path(f"{args.out}.key"), Path(f"{args.out}.pub")
    existing = [str(p) for p in (private, public) if p.exists()]
    if existing and not args.force:
        raise ConfigError(
            f"{existing[0]}: already exists; refusing to replace a key",
            hint="pass --force to replace it, or choose another --out",
        )
    pair = generate_key_pair()
    write_atomic(private, pair.private_pem, mode=0o600)
    write_atomic(public, pair.public_pem, mode=0o644)
    print(f"key id:      {pair.keyid}")
    print(f"private key: {private} (mode 0600; do not commit it)")
    print(f"public key:  {public} (commit it; verify with --key {public})")
    print(
        f"to sign in CI, store the contents of {private} as the secret {KEY_PEM_ENV}, "
        f"or set {KEY_FILE_ENV} to its path"
    )
    return 0
