"""`cuda-gate verify`: each numbered step, its exit status, and what it could not check."""

from __future__ import annotations

import base64
import json
import os
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gate import cli
from gate.attest.manifest import ENVELOPE_FILE, MANIFEST_FILE, write_manifest
from gate.attest.signing import (
    KeyPair,
    generate_key_pair,
    load_public_key,
    parse_envelope,
    signer_from_pem,
)
from gate.attest.verify import (
    Freshness,
    MachineFacts,
    Outcome,
    StepResult,
    Verification,
    verify,
)
from gate.config.options import PUBLIC_KEY_FILE_ENV
from gate.errors import (
    ArtifactChangedError,
    BadInputError,
    EvidenceChangedError,
    ExitCode,
    GateError,
    NoDeviceError,
    SignatureError,
    StaleEnvironmentError,
    StaleEvidenceError,
)
from gate.guard.redact import Redactor
from tests.manifest_evidence import Evidence, make_evidence, matching_machine

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def pair() -> KeyPair:
    return generate_key_pair()


@pytest.fixture
def signed(tmp_path: Path, pair: KeyPair) -> tuple[Evidence, Path, Path]:
    """A signed evidence folder, its envelope, and the public key file."""
    ev = make_evidence(tmp_path, environ={})
    write_manifest(ev.folder, signer_from_pem(pair.private_pem, "test"), redactor=Redactor())
    pub = tmp_path / "cuda-gate.pub"
    pub.write_bytes(pair.public_pem)
    return ev, ev.folder / ENVELOPE_FILE, pub


def _verify(envelope: Path, pub: Path, **kwargs: object) -> Verification:
    kwargs.setdefault("machine", matching_machine())
    return verify(envelope, load_public_key(pub), **kwargs)  # type: ignore[arg-type]


def _payload(envelope: Path) -> bytes:
    return parse_envelope(envelope.read_bytes(), str(envelope)).payload


def _step(result: Verification, number: int) -> StepResult:
    return result.steps[number - 1]


RECORDED = "a" * 40  # the revision manifest_evidence records
FINISHED = datetime(2026, 11, 29, 18, 1, tzinfo=UTC)  # and its finish time


def test_everything_matches(signed: tuple[Evidence, Path, Path]) -> None:
    _, envelope, pub = signed
    seen: list[StepResult] = []
    wanted = Freshness(revision=RECORDED, max_age=timedelta(hours=1), not_before=FINISHED)
    result = _verify(
        envelope, pub, emit=seen.append, freshness=wanted, now=FINISHED + timedelta(minutes=30)
    )
    assert result.ok
    assert result.first_error() is None
    assert result.not_checked == ()
    assert [s.number for s in seen] == [1, 2, 3, 4, 5, 6]
    assert [s.outcome for s in seen] == [Outcome.PASSED] * 6
    assert seen[1].detail == "2 of 2 match (check, helper)"
    assert seen[0].line().startswith("  1. signature: ok - signed by key ")
    assert seen[5].detail == f"recorded for {RECORDED}, finished 2026-11-29T18:01:00Z"
    assert result.keyid == load_public_key(pub).keyid


def test_freshness_is_stated_and_not_checked_unless_asked(
    signed: tuple[Evidence, Path, Path],
) -> None:
    _, envelope, pub = signed
    result = _verify(envelope, pub)
    assert result.ok
    assert result.not_checked == ("freshness",)
    assert _step(result, 6).line() == (
        f"  6. freshness: not checked - recorded for {RECORDED}, finished 2026-11-29T18:01:00Z; "
        "the signature does not prove the run is recent or of the revision you expect "
        "(pass --revision, --max-age or --not-before)"
    )


@pytest.mark.parametrize(
    ("wanted", "now", "problem"),
    [
        (Freshness(revision="b" * 40), FINISHED, f"recorded for revision {RECORDED}, not bbbb"),
        (
            Freshness(max_age=timedelta(hours=1)),
            FINISHED + timedelta(days=2, hours=3),
            "finished 2026-11-29T18:01:00Z, 2d3h ago: older than --max-age 1h",
        ),
        (
            Freshness(not_before=FINISHED + timedelta(seconds=1)),
            FINISHED,
            "finished 2026-11-29T18:01:00Z, before --not-before 2026-11-29T18:01:01Z",
        ),
    ],
)
def test_a_replayed_older_envelope_fails_the_freshness_asked_for(
    signed: tuple[Evidence, Path, Path], wanted: Freshness, now: datetime, problem: str
) -> None:
    _, envelope, pub = signed
    result = _verify(envelope, pub, freshness=wanted, now=now)
    error = result.first_error()
    assert isinstance(error, StaleEvidenceError)
    assert int(error.exit_code) == 14
    assert error.one_line().startswith(f"6. freshness: {problem}")
    # Everything else still verifies: freshness is the only thing wrong with a replay.
    assert [s.outcome for s in result.steps[:5]] == [Outcome.PASSED] * 5


def test_a_relinked_artifact_with_the_same_name_is_changed(
    signed: tuple[Evidence, Path, Path],
) -> None:
    ev, envelope, pub = signed
    shutil.copyfile("/bin/false", ev.artifact("check"))  # same name, other bytes
    result = _verify(envelope, pub)
    step = _step(result, 2)
    assert step.outcome is Outcome.FAILED
    error = result.first_error()
    assert isinstance(error, ArtifactChangedError)
    assert int(error.exit_code) == 11
    assert error.one_line().startswith(f"2. artifacts: {ev.artifact('check')}: sha256 ")
    # The other steps still ran and were reported.
    assert [s.outcome for s in result.steps[2:5]] == [Outcome.PASSED] * 3


def test_one_changed_byte_in_an_artifact_is_changed(signed: tuple[Evidence, Path, Path]) -> None:
    ev, envelope, pub = signed
    data = bytearray(ev.artifact("helper").read_bytes())
    data[len(data) // 2] ^= 0x01
    ev.artifact("helper").write_bytes(bytes(data))
    assert isinstance(_verify(envelope, pub).first_error(), ArtifactChangedError)


def test_artifacts_dir_is_used_instead_of_the_recorded_paths(
    signed: tuple[Evidence, Path, Path], tmp_path: Path
) -> None:
    ev, envelope, pub = signed
    moved = tmp_path / "release"
    shutil.copytree(ev.artifacts, moved)
    shutil.rmtree(ev.artifacts)
    missing = _verify(envelope, pub)
    assert isinstance(missing.first_error(), ArtifactChangedError)
    assert "check: not found" in _step(missing, 2).detail
    assert _verify(envelope, pub, artifacts_dir=moved).ok
    shutil.copyfile("/bin/true", moved / "helper")
    relinked = _verify(envelope, pub, artifacts_dir=moved)
    assert str(moved / "helper") in _step(relinked, 2).detail
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "not found in" in _step(_verify(envelope, pub, artifacts_dir=empty), 2).detail


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        (replace(matching_machine(), driver_version="575.57.08"), "driver is 575.57.08 here"),
        (replace(matching_machine(), driver_cuda_version="12.9"), "driver CUDA version is 12.9"),
        (replace(matching_machine(), toolkit_version="12.8"), "toolkit is 12.8 here"),
        (replace(matching_machine(), toolkit_release="V13.0.99"), "toolkit release is V13.0.99"),
        (replace(matching_machine(), capability="12.1"), "compute capability is 12.1 here"),
        (replace(matching_machine(), host_arch="aarch64"), "host arch is aarch64 here"),
    ],
)
def test_another_driver_toolkit_or_machine_is_stale(
    signed: tuple[Evidence, Path, Path], facts: MachineFacts, reason: str
) -> None:
    _, envelope, pub = signed
    result = _verify(envelope, pub, machine=facts)
    error = result.first_error()
    assert isinstance(error, StaleEnvironmentError)
    assert int(error.exit_code) == 12
    assert reason in error.one_line()
    assert error.one_line().startswith("4. environment: ")


def test_capabilities_compare_as_values(signed: tuple[Evidence, Path, Path]) -> None:
    _, envelope, pub = signed
    assert _verify(envelope, pub, machine=replace(matching_machine(), capability="90")).ok


def test_unknown_facts_are_reported_not_checked(signed: tuple[Evidence, Path, Path]) -> None:
    _, envelope, pub = signed
    facts = replace(matching_machine(), toolkit_version=None, toolkit_release=None)
    result = _verify(envelope, pub, machine=facts)
    assert result.ok
    assert "not checked: toolkit (unknown here), toolkit release (unknown here)" in (
        _step(result, 4).detail
    )


def test_no_device_and_offline_say_what_was_not_checked(
    signed: tuple[Evidence, Path, Path],
) -> None:
    _, envelope, pub = signed

    def no_gpu() -> MachineFacts:
        raise NoDeviceError("nvidia-smi not found on PATH")

    result = _verify(envelope, pub, machine=no_gpu)
    assert result.ok
    assert result.not_checked == ("environment", "freshness")
    assert _step(result, 4).line() == (
        "  4. environment: not checked - no CUDA device: nvidia-smi not found on PATH"
    )
    offline = _verify(envelope, pub, check_environment=False, machine=no_gpu)
    assert _step(offline, 4).detail == "skipped (--offline)"


def test_changed_missing_and_extra_evidence(signed: tuple[Evidence, Path, Path]) -> None:
    ev, envelope, pub = signed
    (ev.folder / "uploaded.json").write_text("{}\n")
    result = _verify(envelope, pub)
    assert result.ok
    assert _step(result, 3).detail.endswith("not covered by the manifest: uploaded.json")
    with (ev.folder / "native.log").open("a") as log:
        log.write("one more line\n")
    (ev.folder / "logs" / "build-smoke.log").unlink()
    changed = _verify(envelope, pub)
    error = changed.first_error()
    assert isinstance(error, EvidenceChangedError)
    assert int(error.exit_code) == 13
    assert "build-smoke.log: missing" in _step(changed, 3).detail
    assert "native.log: changed" in _step(changed, 3).detail
    assert "(and 1 more)" in error.one_line()


def test_the_unsigned_statement_must_be_the_signed_payload(
    signed: tuple[Evidence, Path, Path],
) -> None:
    ev, envelope, pub = signed
    statement = json.loads((ev.folder / MANIFEST_FILE).read_text())
    statement["predicate"]["verdict"]["accepted"] = True
    (ev.folder / MANIFEST_FILE).write_text(json.dumps(statement))
    result = _verify(envelope, pub)
    assert isinstance(result.first_error(), EvidenceChangedError)
    assert "manifest.json: differs from the signed payload" in _step(result, 3).detail


def test_missing_evidence_is_a_failure_not_a_skip(signed: tuple[Evidence, Path, Path]) -> None:
    ev, envelope, pub = signed
    (ev.folder / "result.json").unlink()
    (ev.folder / "ptx.txt").write_text(".version 9.0\n.target sm_90\n// edited\n")
    result = _verify(envelope, pub)
    step = _step(result, 3)
    assert step.outcome is Outcome.FAILED
    assert f"{ev.folder / 'result.json'}: missing" in step.detail
    assert f"{ev.folder / 'ptx.txt'}: changed" in step.detail
    error = result.first_error()
    assert isinstance(error, EvidenceChangedError)
    assert int(error.exit_code) == 13
    # Every file gone but the envelope and the marker: still the evidence folder, still failing.
    for path in sorted(ev.folder.rglob("*"), reverse=True):
        if path.is_file() and path.name not in {ENVELOPE_FILE, ".cuda-gate"}:
            path.unlink()
    emptied = _step(_verify(envelope, pub), 3)
    assert emptied.outcome is Outcome.FAILED
    problems = emptied.detail.split("; ")
    assert len(problems) == len(json.loads(_payload(envelope))["predicate"]["evidence"])
    assert all(p.startswith(str(ev.folder)) and p.endswith(": missing") for p in problems)


def test_a_fifo_in_place_of_the_marker_or_a_file_does_not_block(
    signed: tuple[Evidence, Path, Path],
) -> None:
    ev, envelope, pub = signed
    (ev.folder / ".cuda-gate").unlink()
    os.mkfifo(ev.folder / ".cuda-gate")
    (ev.folder / "native.log").unlink()
    os.mkfifo(ev.folder / "native.log")
    step = _step(_verify(envelope, pub), 3)
    assert step.outcome is Outcome.FAILED
    assert step.detail == f"{ev.folder / 'native.log'}: not a regular file"


def test_an_envelope_on_its_own_fails_step_3_unless_asked_to_skip_it(
    signed: tuple[Evidence, Path, Path], tmp_path: Path
) -> None:
    ev, envelope, pub = signed
    recorded = len(json.loads((ev.folder / MANIFEST_FILE).read_text())["predicate"]["evidence"])
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    shutil.copy(envelope, alone)
    result = _verify(alone / ENVELOPE_FILE, pub)
    error = result.first_error()
    assert isinstance(error, EvidenceChangedError)
    assert error.one_line() == (
        f"3. evidence: no evidence next to the envelope in {alone} ({recorded} recorded files "
        "missing; to check the envelope alone, pass --envelope-only)"
    )
    skipped = _verify(alone / ENVELOPE_FILE, pub, envelope_only=True)
    assert skipped.ok
    assert skipped.not_checked == ("evidence", "freshness")
    assert _step(skipped, 3).line() == (
        "  3. evidence: not checked - skipped (--envelope-only): the evidence files were not "
        "compared"
    )


def test_a_rejected_run_does_not_verify(tmp_path: Path, pair: KeyPair) -> None:
    ev = make_evidence(tmp_path, accepted=False, environ={})
    write_manifest(ev.folder, signer_from_pem(pair.private_pem, "test"), redactor=Redactor())
    pub = tmp_path / "k.pub"
    pub.write_bytes(pair.public_pem)
    result = _verify(ev.folder / ENVELOPE_FILE, pub)
    error = result.first_error()
    assert type(error) is GateError
    assert error.exit_code == ExitCode.NOT_ACCEPTED
    assert _step(result, 5).line() == (
        "  5. verdict: FAILED - recorded verdict: "
        "not accepted: check [jit]: forced PTX JIT: exit status 1"
    )
    assert error.one_line().startswith("5. verdict: the run was not accepted (recorded verdict: ")


def test_every_byte_of_the_real_payload_and_signature_is_covered(
    signed: tuple[Evidence, Path, Path],
) -> None:
    _, envelope, pub = signed
    doc = json.loads(envelope.read_text())
    payload = base64.b64decode(doc["payload"])
    sig = base64.b64decode(doc["signatures"][0]["sig"])
    key = load_public_key(pub)

    def rejected(new_payload: bytes, new_sig: bytes) -> bool:
        changed = dict(doc, payload=base64.b64encode(new_payload).decode())
        changed["signatures"] = [
            {"keyid": doc["signatures"][0]["keyid"], "sig": base64.b64encode(new_sig).decode()}
        ]
        envelope.write_text(json.dumps(changed))
        try:
            verify(envelope, key, machine=matching_machine())
        except SignatureError:
            return True
        return False

    assert not rejected(payload, sig)
    # Every byte of the signature; a dense sample of the (few KB) payload, every
    # 7th byte plus the first and last 64, through the whole verify path.
    assert all(rejected(payload, _flip(sig, i)) for i in range(len(sig)))
    indices = sorted(
        {*range(0, len(payload), 7), *range(64), *range(len(payload) - 64, len(payload))}
    )
    assert all(rejected(_flip(payload, i), sig) for i in indices)


def _flip(data: bytes, index: int) -> bytes:
    changed = bytearray(data)
    changed[index] ^= 0x01
    return bytes(changed)


def test_a_wrong_key_or_a_foreign_payload_type(
    signed: tuple[Evidence, Path, Path], tmp_path: Path
) -> None:
    _, envelope, _ = signed
    other = tmp_path / "other.pub"
    other.write_bytes(generate_key_pair().public_pem)
    with pytest.raises(SignatureError, match="no signature in the envelope verifies with key"):
        _verify(envelope, other)
    doc = json.loads(envelope.read_text())
    doc["payloadType"] = "application/json"
    envelope.write_text(json.dumps(doc))
    with pytest.raises(SignatureError, match="payloadType is 'application/json'"):
        _verify(envelope, other)
    envelope.write_text("{not json")
    with pytest.raises(SignatureError, match=r"1\. signature: .*not JSON"):
        _verify(envelope, other)


def test_a_hostile_envelope_or_payload_is_one_line_not_a_recursion_error(
    signed: tuple[Evidence, Path, Path], pair: KeyPair
) -> None:
    from gate.attest.signing import sign_envelope

    _, envelope, pub = signed
    envelope.write_bytes(b'{"payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    with pytest.raises(SignatureError, match=r"1\. signature: .*JSON nested too deeply"):
        _verify(envelope, pub)
    # Signed by the key holder, yet nested to break a recursive reader: bad input.
    payload = b'{"_type": ' + b"[" * 900 + b"]" * 900 + b"}"
    envelope.write_text(sign_envelope(payload, signer_from_pem(pair.private_pem, "t")).dumps())
    with pytest.raises(BadInputError, match="the signed payload: JSON nested too deeply"):
        _verify(envelope, pub)


def test_a_signed_but_foreign_statement_is_bad_input(tmp_path: Path, pair: KeyPair) -> None:
    from gate.attest.signing import sign_envelope

    signer = signer_from_pem(pair.private_pem, "test")
    pub = tmp_path / "k.pub"
    pub.write_bytes(pair.public_pem)
    envelope = tmp_path / "e.json"
    for payload, message in [
        (b'{"_type": "https://in-toto.io/Statement/v0.1"}', "not an in-toto Statement v1"),
        (
            b'{"_type": "https://in-toto.io/Statement/v1", "predicateType": "x"}',
            "predicateType 'x'",
        ),
        (b"\xff", "not JSON"),
    ]:
        envelope.write_text(sign_envelope(payload, signer).dumps())
        with pytest.raises(BadInputError, match=message):
            _verify(envelope, pub)
    assert parse_envelope(envelope.read_bytes(), "e").payload == b"\xff"


def test_an_unsigned_run_is_named_as_such(tmp_path: Path, pair: KeyPair) -> None:
    ev = make_evidence(tmp_path, environ={})
    write_manifest(ev.folder, None, redactor=Redactor())
    pub = tmp_path / "k.pub"
    pub.write_bytes(pair.public_pem)
    with pytest.raises(
        EvidenceChangedError, match=r"the run wrote an unsigned manifest\.json only"
    ):
        _verify(ev.folder / ENVELOPE_FILE, pub)
    with pytest.raises(BadInputError, match="cannot read"):
        _verify(tmp_path / ENVELOPE_FILE, pub)


# The CLI, in-process: exit statuses and the printed steps.


def _cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(cli, "COMMANDS", ("keygen", "verify"))
    return cli.main(argv)


def test_cli_prints_numbered_steps(
    signed: tuple[Evidence, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, envelope, pub = signed
    assert _cli(["verify", str(envelope), "--key", str(pub), "--offline"], monkeypatch) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0].strip() for line in out[1:7]] == [
        "1. signature",
        "2. artifacts",
        "3. evidence",
        "4. environment",
        "5. verdict",
        "6. freshness",
    ]
    assert out[-1] == "verified (not checked: environment, freshness)"


@pytest.mark.parametrize(
    "case",
    [
        (["--revision", RECORDED, "--not-before", "2026-11-29T18:00:00Z"], 0, None),
        (["--max-age", "100000w"], 0, None),
        (["--revision", "b" * 40], 14, f"6. freshness: recorded for revision {RECORDED}, not "),
        (["--not-before", "2026-11-30"], 14, "before --not-before 2026-11-30T00:00:00Z"),
        (["--max-age", "soon"], 7, "--max-age 'soon' is not a duration"),
        (["--not-before", "yesterday"], 7, "--not-before 'yesterday' is not an ISO 8601 time"),
        (["--revision=-x"], 7, "revision '-x' is not a commit id or a ref"),
    ],
)
def test_cli_freshness_options(
    signed: tuple[Evidence, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: tuple[list[str], int, str | None],
) -> None:
    options, code, message = case
    _, envelope, pub = signed
    argv = ["verify", str(envelope), "--key", str(pub), "--offline", *options]
    assert _cli(argv, monkeypatch) == code
    captured = capsys.readouterr()
    if message is None:
        assert captured.out.splitlines()[-1] == "verified (not checked: environment)"
        assert captured.err == ""
    else:
        (line,) = captured.err.strip().splitlines()
        assert line.startswith("cuda-gate: error: ")
        assert message in line


def test_cli_missing_result_json_exits_13_and_envelope_only_says_what_it_skipped(
    signed: tuple[Evidence, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ev, envelope, pub = signed
    (ev.folder / "result.json").unlink()
    argv = ["verify", str(envelope), "--key", str(pub), "--offline"]
    assert _cli(argv, monkeypatch) == ExitCode.EVIDENCE_CHANGED
    out, err = capsys.readouterr()
    assert "  3. evidence: FAILED - " in out
    assert err.strip() == f"cuda-gate: error: 3. evidence: {ev.folder / 'result.json'}: missing"
    assert _cli([*argv, "--envelope-only"], monkeypatch) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  3. evidence: not checked - skipped (--envelope-only)" in lines[3]
    assert lines[-1] == "verified (not checked: evidence, environment, freshness)"


def test_cli_exit_statuses(
    signed: tuple[Evidence, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ev, envelope, pub = signed
    monkeypatch.setenv(PUBLIC_KEY_FILE_ENV, str(pub))  # the key comes from the environment
    shutil.copyfile("/bin/false", ev.artifact("check"))
    assert _cli(["verify", str(envelope), "--offline"], monkeypatch) == 11
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("cuda-gate: error: 2. artifacts: ")
    doc = json.loads(envelope.read_text())
    doc["signatures"][0]["sig"] = base64.b64encode(b"\0" * 64).decode()
    envelope.write_text(json.dumps(doc))
    capsys.readouterr()
    assert _cli(["verify", str(envelope), "--offline"], monkeypatch) == 10
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith(f"  1. signature: FAILED - {envelope}: no signature in the envelope")
    assert _cli(["verify", str(envelope.parent / "absent.json"), "--offline"], monkeypatch) == 6
    monkeypatch.delenv(PUBLIC_KEY_FILE_ENV)
    monkeypatch.chdir(envelope.parent)
    assert _cli(["verify", "--offline"], monkeypatch) == ExitCode.CONFIG
    assert "no public key to verify with" in capsys.readouterr().err


def test_keygen_then_verify_with_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(PUBLIC_KEY_FILE_ENV, raising=False)
    assert _cli(["keygen"], monkeypatch) == 0
    out = capsys.readouterr().out
    private = (tmp_path / "cuda-gate.key").read_bytes()
    assert (tmp_path / "cuda-gate.key").stat().st_mode & 0o777 == 0o600
    assert private.decode().splitlines()[1] not in out
    assert _cli(["keygen"], monkeypatch) == ExitCode.CONFIG
    assert (tmp_path / "cuda-gate.key").read_bytes() == private
    ev = make_evidence(tmp_path / "run", environ={})
    signer = signer_from_pem(private, "cuda-gate.key")
    write_manifest(ev.folder, signer, redactor=Redactor())
    shutil.copytree(ev.folder, tmp_path / "gate-evidence")
    assert _cli(["verify", "--offline"], monkeypatch) == 0
    assert _cli(["keygen", "--force"], monkeypatch) == 0
    assert (tmp_path / "cuda-gate.key").read_bytes() != private
    assert _cli(["verify", "--offline"], monkeypatch) == ExitCode.BAD_SIGNATURE
