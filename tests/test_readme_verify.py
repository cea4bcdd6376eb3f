"""The securesystemslib snippet of docs/attestations.md, run as written against our envelopes."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from securesystemslib.exceptions import VerificationError

from gate.attest.signing import generate_key_pair, sign_envelope, signer_from_pem

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parent.parent / "docs" / "attestations.md"
PAYLOAD = b'{"_type": "https://in-toto.io/Statement/v1", "subject": []}\n'


def _snippet() -> str:
    """The one python block of the README that uses securesystemslib."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [code] = [b for b in blocks if "securesystemslib.dsse" in b]
    return str(code)


def _run_snippet(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    exec(compile(_snippet(), str(README), "exec"), {})  # noqa: S102 - our own README


def _layout(folder: Path) -> None:
    """cuda-gate.pub and gate-evidence/manifest.dsse.json as keygen and the gate write them."""
    pair = generate_key_pair()
    (folder / "cuda-gate.pub").write_bytes(pair.public_pem)
    (folder / "gate-evidence").mkdir()
    signer = signer_from_pem(pair.private_pem, "test key")
    envelope = sign_envelope(PAYLOAD, signer).dumps()
    (folder / "gate-evidence" / "manifest.dsse.json").write_text(envelope, encoding="utf-8")


def test_the_readme_snippet_verifies_our_envelope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _layout(tmp_path)
    _run_snippet(tmp_path, monkeypatch)


def test_the_readme_snippet_rejects_a_changed_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _layout(tmp_path)
    path = tmp_path / "gate-evidence" / "manifest.dsse.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["payload"] = base64.b64encode(PAYLOAD.replace(b"[]", b"[1]")).decode()
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(VerificationError):
        _run_snippet(tmp_path, monkeypatch)


def test_the_readme_snippet_rejects_another_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _layout(tmp_path)
    (tmp_path / "cuda-gate.pub").write_bytes(generate_key_pair().public_pem)
    with pytest.raises(VerificationError):
        _run_snippet(tmp_path, monkeypatch)
