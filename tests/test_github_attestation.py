"""`cuda-gate github attestation`: signed statements in, actions/attest's inputs out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.attest.manifest import ENVELOPE_FILE, write_manifest
from gate.attest.signing import generate_key_pair, load_public_key, signer_from_pem
from gate.cli import main
from gate.errors import BadInputError, GateError, SignatureError
from gate.evidence import TEST_RESULT_ENVELOPE
from gate.github.attestation import write_attest_inputs
from gate.redact import Redactor
from tests.manifest_evidence import make_evidence, sha256

pytestmark = pytest.mark.unit

REVISION = "a" * 40


def _signed(tmp_path: Path, *, accepted: bool = True) -> tuple[Path, Path]:
    """A signed evidence folder and the public key file that checks it."""
    ev = make_evidence(tmp_path, accepted=accepted)
    pair = generate_key_pair()
    write_manifest(ev.folder, signer_from_pem(pair.private_pem, "k"), redactor=Redactor())
    pub = tmp_path / "cuda-gate.pub"
    pub.write_bytes(pair.public_pem)
    return ev.folder, pub


def test_writes_checksums_and_both_predicates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, pub = _signed(tmp_path)
    out = tmp_path / "attest"
    monkeypatch.setenv("GITHUB_SHA", REVISION)
    argv = ["github", "attestation", "--evidence", str(folder), "--key", str(pub)]
    assert main([*argv, "--out", str(out)]) == 0
    assert "subjects (check, helper)" in capsys.readouterr().out
    # sha256sum's format: the artifacts in front of us check against it.
    lines = (out / "subjects.sha256").read_text(encoding="utf-8").splitlines()
    artifacts = tmp_path / "artifacts"
    assert lines == [f"{sha256(artifacts / n)}  {n}" for n in ("check", "helper")]
    gate_predicate = json.loads((out / "gate-run.predicate.json").read_text(encoding="utf-8"))
    assert gate_predicate["verdict"]["accepted"] is True
    test_result = json.loads((out / "test-result.predicate.json").read_text(encoding="utf-8"))
    assert test_result["result"] == "PASSED"


def test_refuses_another_key_another_revision_and_a_rejected_run(tmp_path: Path) -> None:
    folder, _ = _signed(tmp_path / "ok")
    other = signer_from_pem(generate_key_pair().private_pem, "other").public_key()
    with pytest.raises(SignatureError, match="no signature in the envelope verifies"):
        write_attest_inputs(folder, other, tmp_path / "o1")
    key = load_public_key(tmp_path / "ok" / "cuda-gate.pub")
    with pytest.raises(BadInputError, match=r"gated revision a{40}, not b{40}"):
        write_attest_inputs(folder, key, tmp_path / "o2", revision="b" * 40)
    rejected, pub = _signed(tmp_path / "no", accepted=False)
    with pytest.raises(GateError, match="not accepted"):
        write_attest_inputs(rejected, load_public_key(pub), tmp_path / "o3")
    assert not (tmp_path / "o3").exists()


def test_refuses_an_envelope_whose_statement_type_is_swapped(tmp_path: Path) -> None:
    folder, pub = _signed(tmp_path)
    # A signed test-result envelope in the manifest's place is not a gate-run Statement.
    (folder / ENVELOPE_FILE).write_bytes((folder / TEST_RESULT_ENVELOPE).read_bytes())
    with pytest.raises(BadInputError, match="not an in-toto Statement v1 of type"):
        write_attest_inputs(folder, load_public_key(pub), tmp_path / "o")
