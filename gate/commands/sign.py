"""`cuda-gate sign [EVIDENCE_DIR]`: sign a run's statements apart from the run.

The run itself then needs no key: in CI the job that builds and runs the project's
code gets no signing key and no store credentials, and a later job that runs no
project code signs (and stores) the evidence it hands on.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import ExitCode
from gate.evidence import DEFAULT_DIR

if TYPE_CHECKING:
    from gate.attest.signing import Signer
    from gate.config.options import Resolved


def register(subparsers: Any) -> None:  # noqa: ANN401 - argparse's private subparsers type
    """Add the `sign` subcommand."""
    parser = subparsers.add_parser(
        "sign",
        help="sign an evidence folder's manifest and test result (apart from the run)",
        description="Check that the evidence folder is exactly what the run left (no file "
        "added, removed or linked; every file with the digest manifest.json records; "
        "manifest.json and test-result.json equal to what result.json gives), then write "
        "manifest.dsse.json and test-result.dsse.json with the signing key; with --upload, "
        "store the folder too. Exit 13: the evidence changed since the run (nothing is "
        "signed); 11: an artifact changed since it was inspected; 5: another run holds the "
        "folder; 6: no evidence folder; 7: no key.",
    )
    parser.add_argument(
        "evidence_dir",
        nargs="?",
        type=Path,
        default=Path(DEFAULT_DIR),
        help=f"the evidence folder (default: {DEFAULT_DIR})",
    )
    parser.add_argument(
        "--signing-key",
        type=Path,
        default=None,
        metavar="PATH",
        help="Ed25519 private key (default: CUDA_GATE_SIGNING_KEY_FILE, then the PEM in "
        "CUDA_GATE_SIGNING_KEY)",
    )
    parser.add_argument(
        "--upload", action="store_true", help="then store the folder, as `cuda-gate upload` does"
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="with --upload: s3://bucket/prefix, file:///path or a folder (default: "
        "CUDA_GATE_STORE or the config file)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Sign the folder's statements, then store it when asked."""
    import os

    from gate.attest.unchanged import check_folder_is_gate, sign_unchanged
    from gate.config.options import SIGNING_KEY, resolve
    from gate.errors import ConfigError
    from gate.evidence import MARKER
    from gate.fsutil import Lock
    from gate.store import load_settings, publish, run_meta_from_evidence

    # No configuration here (as always): --signing-key, else the variables.
    signer = load_signer(resolve(SIGNING_KEY, args, os.environ))
    if signer is None:
        raise ConfigError(
            "no signing key configured",
            hint="--signing-key PATH, CUDA_GATE_SIGNING_KEY_FILE or CUDA_GATE_SIGNING_KEY",
        )
    settings = load_settings(url=args.store) if args.upload else None
    folder: Path = args.evidence_dir
    check_folder_is_gate(folder)
    # The lock first: a folder a run still holds is in use (5), not yet evidence to judge.
    lock = Lock.acquire(folder / MARKER, f"{folder} (evidence folder)", create=False)
    try:
        written = sign_unchanged(folder, signer)
        print(f"signed with key {written.keyid}: {written.envelope_path}", flush=True)
        if written.test_result_envelope is not None:
            print(f"signed with key {written.keyid}: {written.test_result_envelope}", flush=True)
        if settings is not None:
            published = publish(folder, run_meta_from_evidence(folder), settings)
            print(f"stored {published.location}")
    finally:
        lock.release()
    return int(ExitCode.OK)


def load_signer(key: Resolved[Path | str | None]) -> Signer | None:
    """The signer the resolved signing key names: a key file, or the PEM a variable held."""
    from gate.attest.signing import load_signer_from_env_or_file
    from gate.config.options import KEY_PEM_ENV

    if isinstance(key.value, str):
        return load_signer_from_env_or_file(None, {KEY_PEM_ENV: key.value})
    return load_signer_from_env_or_file(key.value, {})
