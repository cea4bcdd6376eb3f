"""The standard in-toto test-result Statement the manifest step writes beside the manifest."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cryptography.hazmat.primitives import serialization
from google.protobuf import json_format
from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope as SslibEnvelope

# securesystemslib re-exports these without __all__; mypy's strict re-export check objects.
from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

from gate.attest.manifest import MANIFEST_FILE, evidence_digests, write_manifest
from gate.attest.signing import generate_key_pair, parse_envelope, signer_from_pem, verify_envelope
from gate.attest.testresult import PREDICATE_TYPE
from gate.errors import EvidenceError
from gate.evidence import TEST_RESULT_ENVELOPE, TEST_RESULT_FILE
from gate.guard.redact import Redactor
from tests.manifest_evidence import make_evidence, sha256

pytestmark = pytest.mark.unit

GITHUB = {
    "GITHUB_ACTIONS": "true",
    "RUNNER_ENVIRONMENT": "self-hosted",
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "acme/kernels",
    "GITHUB_RUN_ID": "77",
    "GITHUB_RUN_ATTEMPT": "2",
}


def _validated(data: bytes) -> dict[str, Any]:
    """Parse with the in-toto attestation bindings, strictly, and run their validation."""
    statement = json_format.Parse(data, statement_pb2.Statement())  # unknown fields raise
    Statement.copy_from_pb(statement).validate()
    doc: dict[str, Any] = json.loads(data)
    predicate = json_format.ParseDict(doc["predicate"], test_result_pb2.TestResult())
    assert predicate.result in ("PASSED", "WARNED", "FAILED")
    for descriptor in predicate.configuration:
        ResourceDescriptor.copy_from_pb(descriptor).validate()
        assert descriptor.digest["sha256"]
    # And our own layout of it, annotations included (gate/schemas/).
    schema = resources.files("gate").joinpath("schemas/test-result-predicate.schema.json")
    jsonschema.Draft202012Validator(json.loads(schema.read_text("utf-8"))).validate(
        doc["predicate"]
    )
    return doc


def _edit_result(folder: Path, edit: Any) -> None:
    path = folder / "result.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_a_passed_run_is_a_signed_valid_test_result(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    config = tmp_path / "cuda-gate.toml"
    config.write_text('[build]\ncommand = "make"\n', encoding="utf-8")
    pair = generate_key_pair()
    signer = signer_from_pem(pair.private_pem, "test key")
    result = write_manifest(
        ev.folder, signer, redactor=Redactor(), config_file=config, environ=GITHUB
    )
    assert result.test_result_path == ev.folder / TEST_RESULT_FILE
    assert result.test_result_envelope == ev.folder / TEST_RESULT_ENVELOPE
    data = (ev.folder / TEST_RESULT_FILE).read_bytes()
    doc = _validated(data)
    assert doc["predicateType"] == PREDICATE_TYPE
    manifest = json.loads((ev.folder / MANIFEST_FILE).read_bytes())
    assert doc["subject"] == manifest["subject"]
    predicate = doc["predicate"]
    assert predicate["result"] == "PASSED"
    assert predicate["passedTests"] == ["h200.gate.inspect::sass present"]
    assert (predicate["warnedTests"], predicate["failedTests"]) == ([], [])
    assert predicate["url"] == "https://github.com/acme/kernels/actions/runs/77/attempts/2"
    names = {c["name"]: c for c in predicate["configuration"]}
    assert names["result.json"]["digest"]["sha256"] == sha256(ev.folder / "result.json")
    run = names["result.json"]["annotations"]
    # Where the checks ran, said plainly: the Sigstore certificate names the signing job's
    # runner (GitHub-hosted), never this one.
    assert (run["runnerEnvironment"], run["runnerClass"], run["runner"]) == (
        "self-hosted",
        "h200",
        "h200-01",
    )
    assert run["schema"] == "https://cuda-gate.dev/schemas/test-result-predicate/v1"
    assert names["manifest.json"]["digest"]["sha256"] == sha256(ev.folder / MANIFEST_FILE)
    [config_entry] = [c for c in predicate["configuration"] if c["name"].endswith("cuda-gate.toml")]
    assert config_entry["digest"]["sha256"] == hashlib.sha256(config.read_bytes()).hexdigest()
    # The envelope holds exactly the file's bytes, and both verifiers accept it.
    envelope = parse_envelope((ev.folder / TEST_RESULT_ENVELOPE).read_bytes(), "envelope")
    assert envelope.payload == data
    verify_envelope(envelope, signer.public_key())
    theirs = SslibEnvelope.from_dict(json.loads((ev.folder / TEST_RESULT_ENVELOPE).read_bytes()))
    key = SSlibKey.from_crypto(serialization.load_pem_public_key(pair.public_pem))
    assert set(theirs.verify([key], 1)) == {signer.keyid}


def test_a_rejected_run_is_failed_with_its_failing_checks(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path, accepted=False)
    write_manifest(ev.folder, None, redactor=Redactor(), environ={})
    doc = _validated((ev.folder / TEST_RESULT_FILE).read_bytes())
    predicate = doc["predicate"]
    assert predicate["result"] == "FAILED"
    assert predicate["failedTests"] == ["h200.gate.execute.jit::check [jit]"]
    assert "url" not in predicate


def _with_check(folder: Path, state: str) -> None:
    check = {
        "name": "other [jit]",
        "classname": "gate.execute.jit",
        "state": state,
        "message": "it ran, or not",
        "duration": 0.0,
    }

    def edit(d: dict[str, Any]) -> None:
        d["checks"].append(check)
        if state == "not-run":  # the record's own verdict follows its checks
            d["verdict"] = {"accepted": False, "statement": "not accepted", "reasons": []}

    _edit_result(folder, edit)


def test_an_accepted_run_with_a_warned_check_is_warned(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    _with_check(ev.folder, "warned")
    write_manifest(ev.folder, None, redactor=Redactor(), environ={})
    predicate = _validated((ev.folder / TEST_RESULT_FILE).read_bytes())["predicate"]
    assert predicate["result"] == "WARNED"
    assert predicate["warnedTests"] == ["h200.gate.execute.jit::other [jit]"]
    assert predicate["passedTests"] == ["h200.gate.inspect::sass present"]
    assert predicate["failedTests"] == []


def test_a_check_that_did_not_run_is_failed_never_passed_or_warned(tmp_path: Path) -> None:
    # The spec's policy: "all tests for device A are in passedTests or warnedTests".
    # A run whose JIT path never ran must not meet it.
    ev = make_evidence(tmp_path)
    _with_check(ev.folder, "not-run")
    write_manifest(ev.folder, None, redactor=Redactor(), environ={})
    predicate = _validated((ev.folder / TEST_RESULT_FILE).read_bytes())["predicate"]
    assert predicate["result"] == "FAILED"
    assert predicate["failedTests"] == ["h200.gate.execute.jit::other [jit]"]
    assert "h200.gate.execute.jit::other [jit]" not in (
        predicate["passedTests"] + predicate["warnedTests"]
    )


def test_without_artifacts_the_source_commit_is_the_subject(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    _edit_result(ev.folder, lambda d: d.update(artifacts=[]))
    write_manifest(ev.folder, None, redactor=Redactor(), environ={})
    doc = _validated((ev.folder / TEST_RESULT_FILE).read_bytes())
    assert doc["subject"] == [{"name": "acme/kernels", "digest": {"gitCommit": "a" * 40}}]
    # Neither an artifact nor a revision: nothing to name, so no Statement (and no stale one).
    _edit_result(ev.folder, lambda d: d["source"].update(revision=None))
    signer = signer_from_pem(generate_key_pair().private_pem, "test key")
    result = write_manifest(ev.folder, signer, redactor=Redactor(), environ={})
    assert (result.test_result_path, result.test_result_envelope) == (None, None)
    assert result.signed
    assert not (ev.folder / TEST_RESULT_FILE).exists()
    assert not (ev.folder / TEST_RESULT_ENVELOPE).exists()


def test_unsigned_removes_a_stale_envelope_and_the_files_are_not_evidence(
    tmp_path: Path,
) -> None:
    ev = make_evidence(tmp_path)
    (ev.folder / TEST_RESULT_ENVELOPE).write_text('{"stale": true}\n')
    result = write_manifest(ev.folder, None, redactor=Redactor(), environ={})
    assert result.test_result_envelope is None
    assert not (ev.folder / TEST_RESULT_ENVELOPE).exists()
    assert (ev.folder / TEST_RESULT_FILE).is_file()
    names = {d.name for d in evidence_digests(ev.folder)}
    assert TEST_RESULT_FILE not in names
    assert "result.json" in names


def test_the_configuration_descriptors_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gate.attest.testresult import build_test_result
    from gate.record import load

    ev = make_evidence(tmp_path)
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "conf" / "cuda-gate.toml"
    config.parent.mkdir()
    config.write_text("smoke = true\n", encoding="utf-8")
    other = tmp_path / "gate.cfg"
    other.write_text("x\n", encoding="utf-8")
    manifest = ev.folder / MANIFEST_FILE
    manifest.write_text("{}\n", encoding="utf-8")
    record = load(ev.folder)
    subjects = [{"name": "check", "digest": {"sha256": "a" * 64}}]
    statement = build_test_result(
        record, subjects, ev.folder, manifest=manifest, config_file=config, environ={}
    )
    assert statement is not None
    assert statement["predicate"]["configuration"] == [
        {
            "name": "result.json",
            "digest": {"sha256": sha256(ev.folder / "result.json")},
            "mediaType": "application/json",
            "annotations": {
                "schema": "https://cuda-gate.dev/schemas/test-result-predicate/v1",
                "runnerEnvironment": "not-github-actions",  # environ={}: no workflow
                "runnerClass": "h200",
                "runner": "h200-01",
                "runId": "20261129T180000Z-1a2b3c",
                "cudaGateVersion": "0.1.0",
            },
        },
        {
            "name": "manifest.json",
            "digest": {"sha256": sha256(manifest)},
            "mediaType": "application/vnd.in-toto+json",
        },
        {
            "name": "conf/cuda-gate.toml",  # relative to the working folder when inside it
            "digest": {"sha256": sha256(config)},
            "mediaType": "application/toml",
        },
    ]
    plain = build_test_result(record, subjects, ev.folder, config_file=other, environ={})
    assert plain is not None
    assert plain["predicate"]["configuration"][-1]["mediaType"] == "text/plain"
    outside = Path("/") / "etc" / "hostname"
    if outside.is_file():
        far = build_test_result(record, subjects, ev.folder, config_file=outside, environ={})
        assert far is not None
        assert far["predicate"]["configuration"][-1]["name"] == "/etc/hostname"
    missing = tmp_path / "gone.toml"
    with pytest.raises(EvidenceError) as info:
        build_test_result(record, subjects, ev.folder, config_file=missing, environ={})
    assert info.value.one_line().startswith(
        f"{missing}: cannot read for the test-result attestation: "
    )


def test_a_run_stopped_before_any_check_said_why_still_lists_a_failure(tmp_path: Path) -> None:
    from gate.attest.testresult import build_test_result
    from gate.record import load

    ev = make_evidence(tmp_path)

    def no_checks(d: dict[str, Any]) -> None:
        d["checks"], d["executions"] = [], []
        d["verdict"] = {"accepted": False, "statement": "not accepted", "reasons": []}
        d["run"]["runner_class"] = None

    _edit_result(ev.folder, no_checks)
    record = load(ev.folder)
    statement = build_test_result(record, [], ev.folder, environ={})
    assert statement is not None
    predicate = statement["predicate"]
    assert (predicate["result"], predicate["failedTests"]) == ("FAILED", ["default.gate::verdict"])
    assert statement["subject"] == [{"name": "acme/kernels", "digest": {"gitCommit": "a" * 40}}]

    def on_a_runner_class(d: dict[str, Any]) -> None:
        d["run"]["runner_class"] = "gb10"

    _edit_result(ev.folder, on_a_runner_class)
    classed = build_test_result(load(ev.folder), [], ev.folder, environ={})
    assert classed is not None
    assert classed["predicate"]["failedTests"] == ["gb10.gate::verdict"]

    def anonymous(d: dict[str, Any]) -> None:
        d["source"]["repository"] = None

    _edit_result(ev.folder, anonymous)
    again = build_test_result(load(ev.folder), [], ev.folder, environ={})
    assert again is not None
    assert again["subject"] == [{"name": "source", "digest": {"gitCommit": "a" * 40}}]


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({"GITHUB_ACTIONS": "true", "RUNNER_ENVIRONMENT": "self-hosted"}, "self-hosted"),
        ({"GITHUB_ACTIONS": "true", "RUNNER_ENVIRONMENT": "github-hosted"}, "github-hosted"),
        # A runner that does not say (older GHES) is not taken for GitHub's.
        ({"GITHUB_ACTIONS": "true"}, "unknown"),
        ({"GITHUB_ACTIONS": "true", "RUNNER_ENVIRONMENT": "mine"}, "unknown"),
        ({"RUNNER_ENVIRONMENT": "github-hosted"}, "github-hosted"),
        ({}, "not-github-actions"),
    ],
)
def test_the_runner_environment_is_what_the_runner_says(
    tmp_path: Path, environ: dict[str, str], said: str
) -> None:
    ev = make_evidence(tmp_path)
    write_manifest(ev.folder, None, redactor=Redactor(), environ=environ)
    doc = _validated((ev.folder / TEST_RESULT_FILE).read_bytes())
    [run] = [c for c in doc["predicate"]["configuration"] if c["name"] == "result.json"]
    assert run["annotations"]["runnerEnvironment"] == said
