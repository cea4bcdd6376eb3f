"""``cuda-gate matrix`` against the real S3 test server (SeaweedFS on loopback).

Five runner classes leave evidence for one revision: one passed, one failed, one
missing, one stale (evidence for an older revision only), one tampered (a file
replaced in the bucket after upload). Each must be reported for what it is.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from gate.store import StoreSettings, load_settings
from gate.store.settings import STORE_VARIABLES
from tests.matrix_helpers import (
    OLD_REVISION,
    REPOSITORY,
    REVISION,
    Published,
    keys,
    publish_run,
    run_matrix,
)
from tests.s3server import WeedServer

pytestmark = [
    pytest.mark.integration,
]

CLASSES = ("dgx-spark", "h200", "gb200", "gh200", "b200")


@pytest.fixture
def bucket(server: WeedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> StoreSettings:
    """A fresh bucket on the module's server, configured through the environment."""
    for name in STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    name = f"gate-{uuid.uuid4().hex[:12]}"
    server.client().create_bucket(Bucket=name)
    monkeypatch.setenv("CUDA_GATE_STORE", f"s3://{name}/evidence")
    monkeypatch.setenv("CUDA_GATE_SPOOL_DIR", str(tmp_path / "spool"))
    return load_settings(project_dir=tmp_path)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_class_is_reported_for_what_it_is(
    server: WeedServer, bucket: StoreSettings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair, pub = keys(tmp_path)
    passed = publish_run(tmp_path, bucket, "dgx-spark", pair=pair)
    failed = publish_run(tmp_path, bucket, "h200", pair=pair, accepted=False)
    # gb200 left nothing; gh200 only evidence of an older revision.
    publish_run(tmp_path, bucket, "gh200", pair=pair, revision=OLD_REVISION)
    tampered = publish_run(tmp_path, bucket, "b200", pair=pair)
    _replace_in_bucket(server, bucket, tampered, "driver.txt", b"Driver Version: 999.99\n")
    notes = tmp_path / "notes.md"

    argv = ["--revision", REVISION, "--require", *CLASSES, "--repository", REPOSITORY]
    code = run_matrix([*argv, "--key", str(pub), "--notes", str(notes)])

    out = capsys.readouterr().out
    assert code == 1
    heads = tuple(f"{c}: " for c in CLASSES)
    lines = dict(line.split(": ", 1) for line in out.splitlines() if line.startswith(heads))
    assert lines["dgx-spark"].startswith("PASSED [dgx-spark-01 / 20261129T180000Z-000001]")
    assert lines["h200"].startswith("FAILED [h200-01 / ")
    assert "not accepted: check [jit]: forced PTX JIT: exit status 1" in lines["h200"]
    assert lines["gb200"] == "MISSING: no evidence stored for this revision"
    assert lines["gh200"].startswith("STALE")
    assert f"the newest is for revision {OLD_REVISION[:12]}" in lines["gh200"]
    assert lines["b200"].startswith("TAMPERED")
    assert "driver.txt" in lines["b200"]
    assert "does not match the index" in lines["b200"]
    # The table: runner class x entry point x path.
    assert any(
        row.split()[:6] == ["dgx-spark", "yes", "passed", "check", "native", "passed"]
        for row in out.splitlines()
    )
    assert any(
        row.split()[:5] == ["h200", "yes", "failed", "check", "jit"] for row in out.splitlines()
    )
    assert any(row.split()[:4] == ["gb200", "yes", "missing", "-"] for row in out.splitlines())
    assert (
        "Not accepted for release: h200 failed, gb200 missing, gh200 stale, b200 tampered." in out
    )

    text = notes.read_text(encoding="utf-8")
    assert "## cuda-gate: NOT accepted" in text
    assert (
        "**Not accepted for release: h200 failed, gb200 missing, gh200 stale, b200 tampered.**"
        in text
    )
    assert f"`{_sha256(passed.envelope)}`" in text
    assert f"`{_sha256(failed.envelope)}`" in text
    assert f"`{pair.keyid}`" in text


def test_passes_when_every_required_class_passed(
    bucket: StoreSettings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair, pub = keys(tmp_path)
    spark = publish_run(tmp_path, bucket, "dgx-spark", pair=pair)
    # An older run of the same class that failed does not count: the newest decides.
    publish_run(tmp_path, bucket, "h200", pair=pair, accepted=False, run_id="20261129T170000Z-0")
    h200 = publish_run(tmp_path, bucket, "h200", pair=pair, run_id="20261129T180000Z-1")
    # A class nobody requires may fail without blocking the release.
    publish_run(tmp_path, bucket, "gb200", pair=pair, accepted=False)
    notes = tmp_path / "notes.md"

    argv = ["--revision", REVISION, "--require", "dgx-spark", "h200", "--key", str(pub)]
    code = run_matrix([*argv, "--repository", REPOSITORY, "--notes", str(notes)])

    out = capsys.readouterr().out
    assert code == 0, out
    assert "gb200: FAILED" in out
    text = notes.read_text(encoding="utf-8")
    assert text.startswith("## cuda-gate: accepted\n")
    assert (
        "**Passed on every required runner class with the current driver, current artifacts, "
        "and tested entry points.**"
    ) in text
    for run in (spark, h200):
        assert f"`{_sha256(run.envelope)}`" in text
    assert "| h200 | yes | passed | `h200-01/20261129T180000Z-1` |" in text


def _replace_in_bucket(
    server: WeedServer, settings: StoreSettings, run: Published, name: str, data: bytes
) -> None:
    """Overwrite one stored evidence file behind the store's back."""
    key = f"{settings.prefix}/{run.meta.run_key()}/{name}"
    client = server.client()
    client.head_object(Bucket=settings.bucket, Key=key)
    client.put_object(Bucket=settings.bucket, Key=key, Body=data)
