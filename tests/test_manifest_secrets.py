"""No secret-looking environment variable's value reaches the manifest or the evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.attest.manifest import write_manifest
from gate.attest.signing import generate_key_pair, load_signer_from_env_or_file
from gate.config.options import KEY_PEM_ENV
from gate.errors import EvidenceError
from gate.guard.redact import REDACTED, Redactor, is_secret_name
from tests.manifest_evidence import make_evidence

pytestmark = pytest.mark.unit

SECRET = "s3cr3t-value-123"


@pytest.mark.parametrize(
    "name",
    [
        "MY_API_TOKEN",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "GCP_CREDENTIALS",
        "CUDA_GATE_SIGNING_KEY",
        "aws_access_key_id",
        "SMTP_PASSWD",
    ],
)
def test_secret_looking_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "CUDA_VISIBLE_DEVICES", "RUNNER_NAME"])
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_secret_values_skip_short_values_and_ordinary_names() -> None:
    environ = {"MY_API_TOKEN": SECRET, "PATH": "/usr/bin:/bin", "USE_KEY": "1", "A_SECRET": "short"}
    assert Redactor.from_environment(environ).values == (SECRET,)


def test_redact_replaces_every_occurrence_and_each_line_of_a_pem() -> None:
    pem = generate_key_pair().private_pem.decode()
    environ = {"MY_API_TOKEN": SECRET, KEY_PEM_ENV: pem}
    text = f"token={SECRET} again {SECRET}\nkey:\n{pem}\nbody alone: {pem.splitlines()[1]}\n"
    redactor = Redactor.from_environment(environ)
    cleaned = redactor.text(text)
    assert SECRET not in cleaned
    assert pem.splitlines()[1] not in cleaned
    assert cleaned.count(REDACTED) >= 4
    assert redactor.text("nothing to hide") == "nothing to hide"


def test_redact_json_catches_values_json_would_escape() -> None:
    tricky = 'pa"ss\\word\nline-two-of-the-secret'
    redactor = Redactor.from_environment({"DB_PASSWORD": tricky})
    data = {"cmd": f"login {tricky}", "list": [tricky, 3, None], tricky: True}
    cleaned = json.dumps(redactor.json(data))
    assert 'pa\\"ss' not in cleaned
    assert "line-two-of-the-secret" not in cleaned
    assert redactor.leaked_names(cleaned.encode()) == ()


def test_planted_secret_reaches_neither_manifest_nor_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = generate_key_pair()
    monkeypatch.setenv("MY_API_TOKEN", SECRET)
    monkeypatch.setenv(KEY_PEM_ENV, pair.private_pem.decode())
    # The secret is on the build command line, as a careless -D flag would put it.
    ev = make_evidence(tmp_path, build_flags=f"-O2 -DAPI_TOKEN={SECRET}", environ=None)
    signer = load_signer_from_env_or_file(None)
    assert signer is not None
    write_manifest(ev.folder, signer)
    pem_lines = [line for line in pair.private_pem.decode().splitlines() if "PRIVATE" not in line]
    for path in ev.folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data, path
            assert not any(line.encode() in data for line in pem_lines), path
    statement = json.loads((ev.folder / "manifest.json").read_text())
    assert REDACTED in statement["predicate"]["environment"]["builds"][0]["command"]


def test_evidence_holding_a_secret_is_refused_without_repeating_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", SECRET)
    ev = make_evidence(tmp_path, build_flags=f"-DAPI_TOKEN={SECRET}", redacted=False)
    with pytest.raises(EvidenceError) as caught:
        write_manifest(ev.folder, None)
    line = caught.value.one_line()
    assert "$MY_API_TOKEN" in line
    assert SECRET not in line
    assert not (ev.folder / "manifest.json").exists()
