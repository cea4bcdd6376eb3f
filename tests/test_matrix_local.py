"""``cuda-gate matrix`` on a local folder store: the ways signed evidence can be wrong."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gate.attest.signing import load_public_key
from gate.errors import SignatureError
from gate.github.matrix import ACCEPTED_STATEMENT, ClassResult, Status, evaluate
from gate.store import LocalStore, StoreSettings, local_settings
from tests.matrix_helpers import (
    OLD_REVISION,
    REPOSITORY,
    REVISION,
    keys,
    publish_run,
    run_matrix,
)

pytestmark = pytest.mark.unit


@pytest.fixture
def settings(tmp_path: Path) -> StoreSettings:
    return local_settings(tmp_path / "store", tmp_path / "spool")


def _one(settings: StoreSettings, pub: Path, tmp_path: Path) -> ClassResult:
    """The matrix's result for the one required class, dgx-spark."""
    assert settings.local_dir is not None
    store = LocalStore(settings.local_dir)
    report = evaluate(
        store, REPOSITORY, REVISION, ["dgx-spark"], key=load_public_key(pub), workdir=tmp_path
    )
    [result] = report.results
    assert not report.passed
    return result


def test_a_good_run_passes(settings: StoreSettings, tmp_path: Path) -> None:
    pair, pub = keys(tmp_path)
    publish_run(tmp_path, settings, "dgx-spark", pair=pair)
    assert settings.local_dir is not None
    report = evaluate(
        LocalStore(settings.local_dir),
        REPOSITORY,
        REVISION,
        ["dgx-spark"],
        key=load_public_key(pub),
        workdir=tmp_path / "work",
    )
    assert report.passed
    assert report.statement == ACCEPTED_STATEMENT
    [result] = report.results
    assert result.keyid == pair.keyid
    assert [(x.entry_point, x.path, x.passed) for x in result.executions] == [
        ("check", "native", True),
        ("check", "jit", True),
    ]


def test_signed_by_another_key_is_tampered(settings: StoreSettings, tmp_path: Path) -> None:
    other, _ = keys(tmp_path / "other")
    _, pub = keys(tmp_path)
    publish_run(tmp_path, settings, "dgx-spark", pair=other)
    result = _one(settings, pub, tmp_path / "work")
    assert result.status is Status.TAMPERED
    assert "signature" in result.detail


def test_file_and_index_changed_together_is_caught_by_the_signature(
    settings: StoreSettings, tmp_path: Path
) -> None:
    pair, pub = keys(tmp_path)
    run = publish_run(tmp_path, settings, "dgx-spark", pair=pair)
    assert settings.local_dir is not None
    stored = settings.local_dir / run.meta.run_key()
    forged = b"value = 42 (forged)\n"
    (stored / "native.log").chmod(0o644)
    (stored / "native.log").write_bytes(forged)
    index_path = stored / "index.json"
    index = json.loads(index_path.read_text(encoding="utf-8"))
    for entry in index["files"]:
        if entry["path"] == "native.log":
            entry.update(sha256=hashlib.sha256(forged).hexdigest(), size=len(forged))
    index_path.chmod(0o644)
    index_path.write_text(json.dumps(index), encoding="utf-8")
    result = _one(settings, pub, tmp_path / "work")
    assert result.status is Status.TAMPERED
    assert "native.log" in result.detail


def test_evidence_of_another_revision_copied_here_is_stale(
    settings: StoreSettings, tmp_path: Path
) -> None:
    pair, pub = keys(tmp_path)
    publish_run(tmp_path, settings, "dgx-spark", pair=pair, recorded_revision=OLD_REVISION)
    result = _one(settings, pub, tmp_path / "work")
    assert result.status is Status.STALE
    assert f"recorded for {OLD_REVISION[:12]}" in result.detail


def test_a_dirty_tree_is_stale(settings: StoreSettings, tmp_path: Path) -> None:
    pair, pub = keys(tmp_path)
    publish_run(tmp_path, settings, "dgx-spark", pair=pair, dirty=True)
    result = _one(settings, pub, tmp_path / "work")
    assert result.status is Status.STALE
    assert "uncommitted" in result.detail


def test_unsigned_evidence_is_not_enough(settings: StoreSettings, tmp_path: Path) -> None:
    _, pub = keys(tmp_path)
    publish_run(tmp_path, settings, "dgx-spark", pair=None)
    assert _one(settings, pub, tmp_path / "work").status is Status.UNSIGNED


def test_an_incomplete_upload_is_missing_and_says_so(
    settings: StoreSettings, tmp_path: Path
) -> None:
    pair, pub = keys(tmp_path)
    run = publish_run(tmp_path, settings, "dgx-spark", pair=pair)
    assert settings.local_dir is not None
    index = settings.local_dir / run.meta.run_key() / "index.json"
    index.chmod(0o644)
    index.unlink()
    result = _one(settings, pub, tmp_path / "work")
    assert result.status is Status.MISSING
    assert "incomplete uploads from runner dgx-spark-01 (1)" in result.detail


def test_cli_takes_required_classes_from_the_runner_classes_file(
    settings: StoreSettings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pair, pub = keys(tmp_path)
    publish_run(tmp_path, settings, "dgx-spark", pair=pair)
    classes = tmp_path / "runner-classes.json"
    classes.write_text(
        json.dumps(
            {
                "version": 1,
                "classes": [
                    {"name": "dgx-spark", "labels": ["dgx-spark"]},
                    {"name": "h200", "labels": ["h200"], "required": False},
                ],
            }
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("GITHUB_REPOSITORY", REPOSITORY)
    monkeypatch.setenv("CUDA_GATE_PUBLIC_KEY_FILE", str(pub))
    argv = ["--revision", REVISION, "--runner-classes", str(classes)]
    assert run_matrix([*argv, "--store", str(settings.local_dir)]) == 0
    assert ACCEPTED_STATEMENT in capsys.readouterr().out


def test_cli_refuses_a_bad_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pub"
    bad.write_text("not a key\n", encoding="utf-8")
    argv = ["--revision", REVISION, "--require", "x", "--key", str(bad), "--store", str(tmp_path)]
    with pytest.raises(SignatureError, match=r"bad\.pub"):
        run_matrix([*argv, "--repository", REPOSITORY])
