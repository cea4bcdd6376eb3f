"""The in-toto Statement built from a real evidence folder, and how it is written."""

from __future__ import annotations

import hashlib
import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.attest.manifest import (
    ENVELOPE_FILE,
    MANIFEST_FILE,
    NOT_SIGNED,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    build_statement,
    write_manifest,
)
from gate.attest.signing import generate_key_pair, parse_envelope, signer_from_pem, verify_envelope
from gate.errors import ArtifactChangedError, EvidenceError
from gate.guard.redact import Redactor
from gate.record import RESULT_VERSION
from tests.manifest_evidence import CAPABILITY, DRIVER_VERSION, KERNEL, make_evidence, sha256

pytestmark = pytest.mark.unit


def _schema() -> dict[str, Any]:
    text = resources.files("gate").joinpath("schemas/manifest-predicate.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def test_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(_schema())


def test_statement_names_every_artifact_and_holds_the_four_sets(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    statement = build_statement(ev.folder)
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicateType"] == PREDICATE_TYPE
    assert statement["subject"] == [
        {"name": "check", "digest": {"sha256": sha256(Path("/bin/true"))}},
        {"name": "helper", "digest": {"sha256": sha256(Path("/bin/false"))}},
    ]
    predicate = statement["predicate"]
    jsonschema.validate(predicate, _schema(), cls=jsonschema.Draft202012Validator)
    env = predicate["environment"]
    assert (env["host_arch"], env["driver"]["driver_version"]) == ("x86_64", DRIVER_VERSION)
    assert env["toolkit"]["release"] == "V13.0.88"
    assert env["builds"][0]["command"].startswith("nvcc -O2 -gencode arch=compute_90")
    assert "extra_key_from_a_newer_gate" not in env
    device_code = predicate["device_code"]
    assert device_code["device"]["capability"] == CAPABILITY
    kinds = {(e["kind"], e["target"]) for e in device_code["artifacts"][0]["listing"]["entries"]}
    assert kinds == {("SASS", "sm_90"), ("PTX", "sm_90")}
    assert device_code["artifacts"][0]["listing"]["entries"][1]["kernels"] == [KERNEL]
    paths = {(e["path"], e["returncode"], e["output_ok"]) for e in predicate["execution"]}
    assert paths == {("native", 0, True), ("jit", 0, True)}
    native = next(e for e in predicate["execution"] if e["path"] == "native")
    assert native["log_sha256"] == sha256(ev.folder / "native.log")
    provenance = predicate["provenance"]
    assert provenance["source"] == {
        "revision": "a" * 40,
        "dirty": False,
        "repository": "acme/kernels",
    }
    assert provenance["artifacts"][0]["dependencies"][0]["name"] == "libc.so.6"
    assert predicate["verdict"]["accepted"] is True


def test_every_evidence_file_is_digested_except_manifests_and_hidden(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    (ev.folder / MANIFEST_FILE).write_text("old\n")
    (ev.folder / ENVELOPE_FILE).write_text("old\n")
    (ev.folder / ".result.json.tmp123").write_text("half a file")
    evidence = build_statement(ev.folder)["predicate"]["evidence"]
    on_disk = sorted(
        p.relative_to(ev.folder).as_posix()
        for p in ev.folder.rglob("*")
        if p.is_file()
        and not p.name.startswith(".")
        and p.name not in {MANIFEST_FILE, ENVELOPE_FILE}
    )
    assert [e["name"] for e in evidence] == on_disk
    assert "logs/build-smoke.log" in on_disk
    for entry in evidence:
        data = (ev.folder / entry["name"]).read_bytes()
        assert entry == {
            "name": entry["name"],
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
        }


def test_signed_manifest_is_the_statement_in_an_envelope(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    signer = signer_from_pem(generate_key_pair().private_pem, "test key")
    result = write_manifest(ev.folder, signer, redactor=Redactor())
    assert result.signed
    assert result.keyid == signer.keyid
    assert result.subjects == ("check", "helper")
    assert result.message == f"manifest signed with key {signer.keyid}: {ev.folder / ENVELOPE_FILE}"
    statement_bytes = (ev.folder / MANIFEST_FILE).read_bytes()
    envelope = parse_envelope((ev.folder / ENVELOPE_FILE).read_bytes(), "envelope")
    assert envelope.payload == statement_bytes
    verify_envelope(envelope, signer.public_key())
    assert json.loads(statement_bytes) == build_statement(ev.folder)
    assert result.evidence_files == len(json.loads(statement_bytes)["predicate"]["evidence"])
    assert not [p for p in ev.folder.iterdir() if p.name.startswith(f".{MANIFEST_FILE}")]


def test_unsigned_manifest_says_so_and_removes_a_stale_envelope(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    (ev.folder / ENVELOPE_FILE).write_text('{"stale": true}\n')
    result = write_manifest(ev.folder, None, redactor=Redactor())
    assert not result.signed
    assert result.message == NOT_SIGNED == "manifest not signed: no signing key configured"
    assert (ev.folder / MANIFEST_FILE).is_file()
    assert not (ev.folder / ENVELOPE_FILE).exists()


def test_an_artifact_relinked_after_inspection_is_not_signed(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    shutil.copyfile("/bin/false", ev.artifact("check"))
    with pytest.raises(
        ArtifactChangedError, match=r"artifacts/check: changed since it was inspected"
    ):
        write_manifest(ev.folder, None, redactor=Redactor())
    assert not (ev.folder / MANIFEST_FILE).exists()


def test_artifacts_moved_away_keep_their_recorded_hashes(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    shutil.rmtree(ev.artifacts)
    subjects = build_statement(ev.folder)["subject"]
    assert subjects[0]["digest"]["sha256"] == sha256(Path("/bin/true"))


def _edit_result(folder: Path, edit: Any) -> None:
    path = folder / "result.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("verdict"), "'verdict' is missing or not an object"),
        (lambda d: d.update(artifacts={}), "'artifacts' is missing or not a list of objects"),
        (
            lambda d: d.update(version=RESULT_VERSION + 1),
            f"run record version {RESULT_VERSION + 1} is not one this cuda-gate reads",
        ),
        (lambda d: d["artifacts"][0].update(sha256="abc"), "artifacts/0/sha256"),
        (lambda d: d["executions"][0].update(path="sideways"), "execution path 'sideways'"),
        (lambda d: d["artifacts"][1].update(name="check"), "artifact names must be unique: check"),
        (lambda d: d["source"].update(dirty="maybe"), "'dirty' is not true, false or null"),
        (lambda d: d["executions"][0].update(passed=False), "says passed=False, its own fields"),
        (lambda d: d["verdict"].update(accepted=False), "disagrees with its own checks"),
    ],
)
def test_bad_run_records_name_the_file_and_the_problem(
    tmp_path: Path, edit: Any, message: str
) -> None:
    ev = make_evidence(tmp_path)
    if "sha256" in message:
        shutil.rmtree(ev.artifacts)  # otherwise the re-hash reports it first
    _edit_result(ev.folder, edit)
    with pytest.raises(EvidenceError) as caught:
        build_statement(ev.folder)
    line = caught.value.one_line()
    assert line.startswith(str(ev.folder / "result.json"))
    assert message in line


def test_missing_or_broken_run_record(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match=r"no run record \(did the gate run\?\)"):
        build_statement(tmp_path)
    (tmp_path / "result.json").write_text("{")
    with pytest.raises(EvidenceError, match=r"result\.json: not valid JSON"):
        build_statement(tmp_path)


def test_a_symbolic_link_in_the_evidence_is_refused(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    (ev.folder / "link.txt").symlink_to(ev.folder / "driver.txt")
    with pytest.raises(EvidenceError, match=r"link\.txt: a symbolic link in the evidence folder"):
        write_manifest(ev.folder, None, redactor=Redactor())


def test_an_unwritable_folder_is_one_line(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    (ev.folder / MANIFEST_FILE).mkdir()
    with pytest.raises(EvidenceError, match=r"manifest\.json: cannot write"):
        write_manifest(ev.folder, None, redactor=Redactor())
