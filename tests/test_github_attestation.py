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
from gate.guard.redact import Redactor
from gate.scan.checksums import read as read_sums
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


def _published(folder: Path, lines: list[str]) -> Path:
    """A release's SHA256SUMS beside the files it publishes."""
    sums = folder / "SHA256SUMS"
    sums.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return sums


def test_only_the_published_files_are_attested_with_the_gated_digests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, pub = _signed(tmp_path)
    artifacts = tmp_path / "artifacts"
    # The release publishes `check` only (the gated `helper` stays behind, like the smoke
    # program): one subject, the published file's digest, which is the gated one.
    sums = _published(artifacts, [f"{sha256(artifacts / 'check')}  check"])
    out = tmp_path / "attest"
    monkeypatch.setenv("GITHUB_SHA", REVISION)
    argv = ["github", "attestation", "--evidence", str(folder), "--key", str(pub)]
    assert main([*argv, "--published", str(sums), "--out", str(out)]) == 0
    assert "subjects (check)" in capsys.readouterr().out
    lines = (out / "subjects.sha256").read_text(encoding="utf-8").splitlines()
    assert lines == [f"{sha256(artifacts / 'check')}  check"]


def test_a_published_file_the_run_did_not_gate_is_refused(tmp_path: Path) -> None:
    folder, pub = _signed(tmp_path)
    key = load_public_key(pub)
    artifacts = tmp_path / "artifacts"
    # Other bytes under a gated name: the list matches them, the run gated something else.
    (tmp_path / "rebuilt").mkdir()
    (tmp_path / "rebuilt" / "check").write_bytes(b"rebuilt elsewhere\n")
    other = _published(tmp_path / "rebuilt", [f"{sha256(tmp_path / 'rebuilt' / 'check')}  check"])
    with pytest.raises(BadInputError, match=r"check is published with sha256 [0-9a-f]{64}, the"):
        write_attest_inputs(folder, key, tmp_path / "o1", published=read_sums(other))
    # A file the run never saw.
    (artifacts / "extra.so").write_bytes(b"\x7fELF")
    extra = _published(artifacts, [f"{sha256(artifacts / 'extra.so')}  extra.so"])
    with pytest.raises(BadInputError, match=r"extra\.so is published, but the run in .* did not"):
        write_attest_inputs(folder, key, tmp_path / "o2", published=read_sums(extra))
    # Bytes that are not the listed ones, before anything is compared.
    (artifacts / "check").write_bytes(b"changed after the list was written\n")
    stale = _published(artifacts, [f"{'0' * 64}  check"])
    with pytest.raises(BadInputError, match="these are not the bytes that were built"):
        write_attest_inputs(folder, key, tmp_path / "o3", published=read_sums(stale))
    assert not [p for p in tmp_path.glob("o*") if p.exists()]
