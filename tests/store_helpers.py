"""Shared helpers for the evidence-store tests: a realistic evidence folder and the CLI."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest

from gate import cli
from gate.attest.manifest import write_manifest
from gate.evidence import mark
from gate.guard.redact import Redactor
from gate.record import RunInfo
from gate.store import RunMeta
from gate.system.git import SourceInfo
from tests.records import WHEN, verdict_record, write_record

SCHEMA = Path(__file__).parents[1] / "gate" / "schemas" / "evidence-index.schema.json"
STATEMENT = "Passed with the current driver, current artifacts, and tested entry points."
REVISION = "0123456789abcdef0123456789abcdef01234567"


def make_evidence(
    folder: Path,
    *,
    run_id: str = "20261129T180000Z-1a2b3c",
    runner: str = "gpu-box-1",
    accepted: bool = True,
    big: int = 0,
    finished: datetime = WHEN,
) -> Path:
    """An evidence folder like `cuda-gate run` leaves; ``big`` adds a file of that many bytes.

    Marked by the gate's marker and closed by an (unsigned) manifest.json, as a run does.
    """
    folder.mkdir(parents=True, exist_ok=True)
    mark(folder)
    (folder / "driver.txt").write_text("NVIDIA H200, 580.159.04\n")
    (folder / "sass.txt").write_text("Function : _Z11write_valuePi\n" * 50)
    (folder / "logs").mkdir(exist_ok=True)
    (folder / "logs" / "native.log").write_text("value=42\n")
    record = verdict_record(
        accepted,
        run=RunInfo(run_id, runner, "h200"),
        source=SourceInfo(REVISION, False, "acme/kernels"),
        finished=finished,
    )
    write_record(folder, record)
    if big:
        # Not all one byte value, so a part swapped or dropped would change the digest.
        block = bytes(range(256)) * 4096
        with (folder / "libkernels.so").open("wb") as f:
            written = 0
            while written < big:
                chunk = block[: big - written]
                f.write(chunk)
                written += len(chunk)
    return reseal(folder)


def reseal(folder: Path) -> Path:
    """Write the folder's manifest again, as a new gate run over changed evidence would."""
    write_manifest(folder, None, redactor=Redactor())
    return folder


def meta(run_id: str = "20261129T180000Z-1a2b3c", runner: str = "gpu-box-1") -> RunMeta:
    """The RunMeta matching :func:`make_evidence`."""
    return RunMeta(
        owner="acme",
        repo="kernels",
        revision=REVISION,
        runner=runner,
        run_id=run_id,
        runner_class="h200",
    )


def validate_index(data: bytes) -> dict[str, object]:
    """Parse an index and validate it against the checked-in schema."""
    doc = json.loads(data)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert isinstance(doc, dict)
    return doc


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    """Run `cuda-gate` in-process with only the store commands registered."""
    monkeypatch.setattr(cli, "COMMANDS", ("upload", "evidence"))
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
