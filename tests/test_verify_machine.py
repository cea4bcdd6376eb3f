"""Step 4 against a real process boundary: nvidia-smi and nvcc as real executable scripts.

The scripts print what the real tools print on an H200 machine, so the gathering
code (gate.environment's parsers, gate.proc) runs for real; only the values differ
between the tests.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gate import cli
from gate.attest.manifest import ENVELOPE_FILE, write_manifest
from gate.attest.signing import generate_key_pair, signer_from_pem
from gate.attest.verify import MachineFacts, gather_machine_facts
from gate.errors import ExitCode
from gate.guard.redact import Redactor
from tests.manifest_evidence import (
    CAPABILITY,
    DRIVER_CUDA,
    DRIVER_VERSION,
    TOOLKIT,
    TOOLKIT_RELEASE,
    make_evidence,
)

pytestmark = pytest.mark.integration

SMI = """#!/bin/sh
case "$*" in
  *compute_cap*) echo "{cap}" ;;
  *query-gpu*) echo "NVIDIA H200, {driver}" ;;
  *) echo "| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda}     |" ;;
esac
"""
NVCC = """#!/bin/sh
echo "nvcc: NVIDIA (R) Cuda compiler driver"
echo "Cuda compilation tools, release {version}, {release}"
"""


def _tool(folder: Path, name: str, text: str) -> None:
    path = folder / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _machine(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    driver: str = DRIVER_VERSION,
    cap: str = CAPABILITY,
    smi: bool = True,
) -> None:
    """Put fake nvidia-smi (unless ``smi`` is False) and nvcc alone on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    if smi:
        _tool(folder, "nvidia-smi", SMI.format(cap=cap, driver=driver, cuda=DRIVER_CUDA))
    _tool(folder, "nvcc", NVCC.format(version=TOOLKIT, release=TOOLKIT_RELEASE))
    monkeypatch.setenv("PATH", str(folder))
    for name in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)


def _signed(tmp_path: Path) -> tuple[Path, Path]:
    pair = generate_key_pair()
    ev = make_evidence(tmp_path / "run", environ={})
    write_manifest(ev.folder, signer_from_pem(pair.private_pem, "test"), redactor=Redactor())
    pub = tmp_path / "k.pub"
    pub.write_bytes(pair.public_pem)
    return ev.folder / ENVELOPE_FILE, pub


def test_gathers_the_facts_from_the_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(tmp_path, monkeypatch, cap="12.1")
    facts = gather_machine_facts()
    assert facts == MachineFacts(
        host_arch=facts.host_arch,
        driver_version=DRIVER_VERSION,
        driver_cuda_version=DRIVER_CUDA,
        toolkit_version=TOOLKIT,
        capability="12.1",
        toolkit_release=TOOLKIT_RELEASE,
    )


def test_same_machine_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope, pub = _signed(tmp_path)
    _machine(tmp_path, monkeypatch)
    monkeypatch.setattr(cli, "COMMANDS", ("verify",))
    assert cli.main(["verify", str(envelope), "--key", str(pub)]) == 0
    out = capsys.readouterr().out
    assert "4. environment: ok - host arch, driver, toolkit and capability match" in out


def test_a_driver_update_makes_the_evidence_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope, pub = _signed(tmp_path)
    _machine(tmp_path, monkeypatch, driver="590.10.01")
    monkeypatch.setattr(cli, "COMMANDS", ("verify",))
    assert cli.main(["verify", str(envelope), "--key", str(pub)]) == ExitCode.STALE_ENVIRONMENT
    err = capsys.readouterr().err
    assert "driver is 590.10.01 here, the manifest records 580.159.04" in err
    # --offline skips the comparison, and says so.
    assert cli.main(["verify", str(envelope), "--key", str(pub), "--offline"]) == 0
    assert "verified (not checked: environment, freshness)" in capsys.readouterr().out


def test_no_nvidia_smi_is_not_checked_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope, pub = _signed(tmp_path)
    _machine(tmp_path, monkeypatch, smi=False)
    monkeypatch.setattr(cli, "COMMANDS", ("verify",))
    assert cli.main(["verify", str(envelope), "--key", str(pub)]) == 0
    out = capsys.readouterr().out
    assert "4. environment: not checked - no CUDA device: nvidia-smi not found on PATH" in out
