"""Upload stores only gate evidence: the marker, a run record, a manifest matching every file.

A folder of wheels, a folder changed since its manifest, or one holding a symbolic
link is refused with one line naming the file; nothing reaches the store or the spool.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from gate.attest.manifest import ENVELOPE_FILE, MANIFEST_FILE, write_manifest
from gate.attest.signing import generate_key_pair, signer_from_pem
from gate.errors import BadInputError, EvidenceChangedError, ExitCode, GateError
from gate.evidence import MARKER, TEST_RESULT_ENVELOPE, TEST_RESULT_FILE, mark
from gate.guard.redact import Redactor
from gate.store import LocalStore, StoreSettings, local_settings, pending, publish
from gate.store.intake import open_evidence
from gate.store.records import copy_with_digest
from tests.store_helpers import make_evidence, meta, reseal, run_cli

pytestmark = pytest.mark.unit


@pytest.fixture
def settings(tmp_path: Path) -> StoreSettings:
    return local_settings(tmp_path / "store", tmp_path / "spool")


def _refused(
    evidence: Path,
    settings: StoreSettings,
    error: type[GateError],
    message: str,
) -> GateError:
    """``publish`` refuses the folder with ``message``, storing and spooling nothing."""
    with pytest.raises(error) as info:
        publish(evidence, meta(), settings)
    assert message in info.value.one_line()
    assert "\n" not in info.value.one_line()
    assert not settings.spool_dir.exists() or list(settings.spool_dir.rglob("*")) == []
    assert list(LocalStore(settings.local_dir or Path()).list_keys("")) == []
    return info.value


def test_a_folder_of_wheels_is_not_a_run(
    tmp_path: Path,
    settings: StoreSettings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wheels = tmp_path / "dist"
    wheels.mkdir()
    for name in ("kernels-1.0-cp311-cp311-linux_x86_64.whl", "kernels-1.0.tar.gz"):
        (wheels / name).write_bytes(b"PK\x03\x04 not evidence")
    _refused(wheels, settings, BadInputError, f"{wheels}: not a cuda-gate evidence folder")
    # Through the CLI (the store is the default local one under the test's own HOME).
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(monkeypatch, capsys, "upload", str(wheels), "--quiet")
    assert (code, out) == (int(ExitCode.BAD_INPUT), "")
    expected = (
        f"cuda-gate: error: {wheels}: not a cuda-gate evidence folder (no {MARKER} marker from "
        "the gate) (upload the folder `cuda-gate run` wrote (--evidence, default gate-evidence))"
    )
    assert err.strip().splitlines() == [expected]
    assert list(Path(os.environ["XDG_DATA_HOME"]).rglob("*")) == []


def test_marked_but_without_a_run_record_or_manifest(
    tmp_path: Path, settings: StoreSettings
) -> None:
    folder = tmp_path / "ev"
    folder.mkdir()
    mark(folder)
    (folder / "driver.txt").write_text("580\n")
    _refused(folder, settings, BadInputError, f"{folder / 'result.json'}: no run record")
    (folder / "result.json").write_text('{"version": 2}')
    _refused(folder, settings, BadInputError, f"{folder / 'result.json'}")
    evidence = make_evidence(tmp_path / "ev2")
    (evidence / MANIFEST_FILE).unlink()
    _refused(evidence, settings, BadInputError, f"{evidence / MANIFEST_FILE}: no manifest")
    (evidence / MANIFEST_FILE).write_text('{"predicate": {"evidence": "all of it"}}')
    _refused(evidence, settings, BadInputError, f"{evidence / MANIFEST_FILE}: not a cuda-gate")
    (tmp_path / "empty").mkdir()
    _refused(tmp_path / "empty", settings, BadInputError, "not a cuda-gate evidence folder")
    _refused(tmp_path / "absent", settings, BadInputError, "evidence folder not found")


def test_a_file_changed_since_the_manifest_is_refused_by_name(
    tmp_path: Path, settings: StoreSettings
) -> None:
    evidence = make_evidence(tmp_path / "ev")
    (evidence / "logs" / "native.log").write_text("value=41\n")
    error = _refused(
        evidence,
        settings,
        EvidenceChangedError,
        f"{evidence / 'logs' / 'native.log'}: changed since manifest.json was written",
    )
    assert int(error.exit_code) == 13
    # No half-copied entry is left behind either.
    assert [p for p in tmp_path.rglob("*") if ".partial-" in p.name] == []


def test_a_missing_or_added_file_is_refused_by_name(
    tmp_path: Path, settings: StoreSettings
) -> None:
    evidence = make_evidence(tmp_path / "ev")
    (evidence / "sass.txt").unlink()
    _refused(
        evidence,
        settings,
        EvidenceChangedError,
        f"{evidence / 'sass.txt'}: recorded in manifest.json but missing",
    )
    evidence = make_evidence(tmp_path / "ev2")
    (evidence / "notes.txt").write_text("added after the run\n")
    (evidence / "logs" / "extra.log").write_text("x\n")
    _refused(
        evidence,
        settings,
        EvidenceChangedError,
        f"{evidence / 'logs' / 'extra.log'}: not recorded in manifest.json (written after it) "
        "(and 1 more)",
    )


@pytest.mark.parametrize("where", ["driver-link.txt", "logs/deep-link.txt", ".hidden-link"])
def test_a_symbolic_link_anywhere_is_refused_with_its_name(
    tmp_path: Path,
    settings: StoreSettings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    secret = tmp_path / "outside" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text("a private key outside the evidence folder\n")
    evidence = make_evidence(tmp_path / "ev")
    link = evidence / where
    link.symlink_to(secret)
    message = f"{link}: a symbolic link in the evidence folder"
    _refused(evidence, settings, BadInputError, message)
    code, _, err = run_cli(
        monkeypatch, capsys, "upload", str(evidence), "--store", str(settings.local_dir)
    )
    assert code == int(ExitCode.BAD_INPUT)
    assert len(err.strip().splitlines()) == 1
    assert message in err


def test_a_linked_folder_or_evidence_folder_is_refused_too(
    tmp_path: Path, settings: StoreSettings
) -> None:
    evidence = make_evidence(tmp_path / "ev")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("x")
    (evidence / "more").symlink_to(outside, target_is_directory=True)
    _refused(evidence, settings, BadInputError, f"{evidence / 'more'}: a symbolic link")
    (evidence / "more").unlink()
    alias = tmp_path / "alias"
    alias.symlink_to(evidence, target_is_directory=True)
    _refused(alias, settings, BadInputError, f"{alias}: the evidence folder is a symbolic link")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, settings: StoreSettings) -> None:
    evidence = make_evidence(tmp_path / "ev")
    os.mkfifo(evidence / "pipe")
    _refused(evidence, settings, BadInputError, f"{evidence / 'pipe'}: not a regular file")
    # Not even the marker is read through a FIFO or a link.
    marked = make_evidence(tmp_path / "ev2")
    (marked / MARKER).unlink()
    os.mkfifo(marked / MARKER)
    _refused(marked, settings, BadInputError, f"{marked / MARKER}: the marker is not a regular")
    (marked / MARKER).unlink()
    (marked / MARKER).symlink_to(tmp_path / "ev" / MARKER)
    _refused(marked, settings, BadInputError, f"{marked / MARKER}: the marker is not a regular")
    # A link swapped in after the folder was checked is refused when it is opened.
    target = tmp_path / "target"
    target.write_text("x")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(BadInputError, match="a symbolic link"):
        copy_with_digest(tmp_path / "link", tmp_path / "copy")
    with pytest.raises(BadInputError, match="not a regular file"):
        copy_with_digest(evidence / "pipe", tmp_path / "copy2")


def test_the_envelope_must_sign_the_manifest_beside_it(
    tmp_path: Path, settings: StoreSettings
) -> None:
    evidence = make_evidence(tmp_path / "ev")
    signer = signer_from_pem(generate_key_pair().private_pem, "test")
    write_manifest(evidence, signer, redactor=Redactor())
    kept = (evidence / ENVELOPE_FILE).read_bytes()
    (evidence / "driver.txt").write_text("another driver\n")
    reseal(evidence)  # a new unsigned manifest, the old envelope left beside it
    (evidence / ENVELOPE_FILE).write_bytes(kept)
    _refused(
        evidence,
        settings,
        EvidenceChangedError,
        f"{evidence / ENVELOPE_FILE}: its signed payload is not manifest.json",
    )


def test_gate_evidence_is_stored_with_its_marker_and_manifests(
    tmp_path: Path, settings: StoreSettings
) -> None:
    evidence = make_evidence(tmp_path / "ev")
    signer = signer_from_pem(generate_key_pair().private_pem, "test")
    write_manifest(evidence, signer, redactor=Redactor())
    # Hidden leftovers (an interrupted atomic write) are not evidence and are not stored.
    (evidence / ".driver.txt.tmp123").write_text("half")
    intake = open_evidence(evidence)
    assert intake.files == (
        MARKER,
        "driver.txt",
        "logs/native.log",
        ENVELOPE_FILE,
        MANIFEST_FILE,
        "result.json",
        "sass.txt",
        TEST_RESULT_ENVELOPE,
        TEST_RESULT_FILE,
    )
    result = publish(evidence, meta(), settings)
    assert set(result.uploaded) == {*intake.files, "index.json"}
    statement = json.loads((evidence / MANIFEST_FILE).read_text())
    recorded = {e["name"] for e in statement["predicate"]["evidence"]}
    assert recorded == {"driver.txt", "logs/native.log", "result.json", "sass.txt"}
    assert pending(settings.spool_dir) == ()


def test_resume_still_uploads_a_spooled_run(tmp_path: Path) -> None:
    from gate.store import resume

    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the store should be")
    evidence = make_evidence(tmp_path / "ev")
    with pytest.raises(GateError, match="kept in the spool"):
        publish(evidence, meta(), local_settings(blocker / "store", tmp_path / "spool"))
    # The original folder may be gone by then: the spool is what resume uploads.
    shutil.rmtree(evidence)
    report = resume(local_settings(tmp_path / "store", tmp_path / "spool"))
    assert [r.index.meta.run_id for r in report.stored] == [meta().run_id]
