"""Signed evidence from several runner classes, published to a store, for the matrix tests."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from gate.attest.manifest import ENVELOPE_FILE, write_manifest
from gate.attest.signing import KeyPair, generate_key_pair, signer_from_pem
from gate.commands import matrix as command
from gate.guard.redact import Redactor
from gate.store import RunMeta, StoreSettings, publish
from tests.manifest_evidence import make_evidence

REPOSITORY = "acme/kernels"
REVISION = "c" * 40
OLD_REVISION = "d" * 40


@dataclass(frozen=True)
class Published:
    """One published run: where its evidence came from and its run key."""

    folder: Path
    meta: RunMeta

    @property
    def envelope(self) -> Path:
        """The signed manifest as published."""
        return self.folder / ENVELOPE_FILE


def keys(tmp_path: Path) -> tuple[KeyPair, Path]:
    """A fresh key pair and its public key written to a file."""
    pair = generate_key_pair()
    tmp_path.mkdir(parents=True, exist_ok=True)
    pub = tmp_path / "cuda-gate.pub"
    pub.write_bytes(pair.public_pem)
    return pair, pub


def publish_run(
    root: Path,
    settings: StoreSettings,
    runner_class: str,
    *,
    pair: KeyPair | None,
    revision: str = REVISION,
    recorded_revision: str | None = None,
    accepted: bool = True,
    dirty: bool = False,
    run_id: str = "20261129T180000Z-000001",
) -> Published:
    """Make one class's evidence, sign it (unless ``pair`` is None) and publish it."""
    evidence = make_evidence(root / f"{runner_class}-{run_id}-{revision[:4]}", accepted=accepted)
    folder = evidence.folder
    result_path = folder / "result.json"
    result = json.loads(result_path.read_text(encoding="utf-8"))
    runner = f"{runner_class}-01"
    result["run"].update(runner=runner, runner_class=runner_class, run_id=run_id)
    result["source"].update(revision=recorded_revision or revision, dirty=dirty)
    result_path.write_text(json.dumps(result, indent=2), encoding="utf-8")
    signer = signer_from_pem(pair.private_pem, "test key") if pair else None
    write_manifest(folder, signer, redactor=Redactor())
    meta = RunMeta(
        owner="acme",
        repo="kernels",
        revision=revision,
        runner=runner,
        run_id=run_id,
        runner_class=runner_class,
        dirty=dirty,
    )
    publish(folder, meta, settings)
    return Published(folder, meta)


def run_matrix(argv: list[str]) -> int:
    """``cuda-gate matrix`` in-process, with only its own command registered."""
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["matrix", *argv])
    return int(args.handler(args))
