"""`cuda-gate sign` signs exactly what the run left, or nothing (issue 37, items 1 and 2).

Every change between the run and `sign` is exit 13 with one line naming the file, nothing
signed and the folder as it was: an edited test result, run record or manifest, a file
added (hidden or not), removed or replaced by a link, an envelope already there that this
key did not write. A folder a run still holds is exit 5, before anything is judged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gate import cli
from gate.attest.manifest import write_manifest
from gate.attest.signing import generate_key_pair, sign_envelope, signer_from_pem
from gate.errors import ExitCode
from gate.evidence import (
    ENVELOPE_FILE,
    MANIFEST_FILE,
    MARKER,
    TEST_RESULT_ENVELOPE,
    TEST_RESULT_FILE,
    mark,
)
from gate.fsutil import Lock
from gate.guard.redact import Redactor
from gate.record import RESULT_FILE
from tests.store_helpers import make_evidence

pytestmark = pytest.mark.unit

KEY = generate_key_pair()
OTHER = generate_key_pair()


def _sign(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], folder: Path
) -> tuple[int, str, str]:
    monkeypatch.setattr(cli, "COMMANDS", ("sign",))
    monkeypatch.setenv("CUDA_GATE_SIGNING_KEY", KEY.private_pem.decode())
    capsys.readouterr()
    code = cli.main(["sign", str(folder)])
    out, err = capsys.readouterr()
    return code, out, err


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry of the folder: a file's bytes, a link's target, a FIFO's kind."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[name] = f"link -> {path.readlink()}"
        elif path.is_fifo():
            found[name] = "fifo"
        elif path.is_file():
            found[name] = path.read_bytes()
    return found


def _edit_json(path: Path, change: Callable[[dict[str, object]], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _predicate(data: dict[str, object]) -> dict[str, object]:
    predicate = data["predicate"]
    assert isinstance(predicate, dict)
    return predicate


def _passed(data: dict[str, object]) -> None:
    predicate = _predicate(data)
    assert predicate["result"] == "FAILED"
    predicate["result"] = "PASSED"


def _failed_tests_dropped(data: dict[str, object]) -> None:
    predicate = _predicate(data)
    failed = predicate["failedTests"]
    assert isinstance(failed, list)
    assert failed
    passed = predicate["passedTests"]
    assert isinstance(passed, list)
    passed.extend(failed)
    failed.clear()


def _verdict_accepted(data: dict[str, object]) -> None:
    verdict = data["verdict"]
    assert isinstance(verdict, dict)
    verdict["accepted"] = True


def _manifest_accepted(data: dict[str, object]) -> None:
    verdict = _predicate(data)["verdict"]
    assert isinstance(verdict, dict)
    verdict["accepted"] = True


def _url_of_another_run(data: dict[str, object]) -> None:
    _predicate(data)["url"] = "https://github.com/acme/kernels/actions/runs/999"


def _runner_kind(data: dict[str, object]) -> None:
    configuration = _predicate(data)["configuration"]
    assert isinstance(configuration, list)
    configuration[0]["annotations"]["runnerEnvironment"] = "github-hosted"


def _link_in_place(folder: Path, name: str) -> None:
    path = folder / name
    copy = folder.parent / f"copy-of-{path.name}"
    copy.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(copy)


def _write(path: Path) -> None:
    path.write_text("added after the run\n", encoding="utf-8")


def _forged_envelope(folder: Path) -> None:
    payload = (folder / MANIFEST_FILE).read_bytes()
    forged = sign_envelope(payload, signer_from_pem(OTHER.private_pem, "other"))
    (folder / ENVELOPE_FILE).write_text(forged.dumps(), encoding="utf-8")


def _forged_test_envelope(folder: Path) -> None:
    # Over an edited statement: the envelope says PASSED where test-result.json says FAILED.
    statement = json.loads((folder / TEST_RESULT_FILE).read_text(encoding="utf-8"))
    _passed(statement)
    payload = (json.dumps(statement, indent=2) + "\n").encode("utf-8")
    forged = sign_envelope(payload, signer_from_pem(KEY.private_pem, "ours"))
    (folder / TEST_RESULT_ENVELOPE).write_text(forged.dumps(), encoding="utf-8")


# name -> (change to a not-accepted run's folder, the file the error line must name)
CHANGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "test result edited FAILED to PASSED": (
        lambda f: _edit_json(f / TEST_RESULT_FILE, _passed),
        f"{TEST_RESULT_FILE}: predicate.result is not what {RESULT_FILE} records",
    ),
    "failed tests moved to passed": (
        lambda f: _edit_json(f / TEST_RESULT_FILE, _failed_tests_dropped),
        f"{TEST_RESULT_FILE}: predicate.",
    ),
    "test result deleted": (
        lambda f: (f / TEST_RESULT_FILE).unlink(),
        f"{TEST_RESULT_FILE}: missing",
    ),
    "a hidden file added": (
        lambda f: _write(f / ".extra"),
        ".extra: a hidden file the run did not write",
    ),
    "a file added": (
        lambda f: _write(f / "notes.txt"),
        "notes.txt: a file the run did not write",
    ),
    "an evidence file removed": (
        lambda f: (f / "driver.txt").unlink(),
        f"driver.txt: recorded in {MANIFEST_FILE} but missing",
    ),
    "the run record's verdict edited": (
        lambda f: _edit_json(f / RESULT_FILE, _verdict_accepted),
        f"{RESULT_FILE}: changed since {MANIFEST_FILE} was written",
    ),
    "the manifest's verdict edited": (
        lambda f: _edit_json(f / MANIFEST_FILE, _manifest_accepted),
        f"{MANIFEST_FILE}: predicate.verdict.accepted is not what {RESULT_FILE} records",
    ),
    "the manifest removed": (
        lambda f: (f / MANIFEST_FILE).unlink(),
        f"{MANIFEST_FILE}: missing",
    ),
    "the marker removed": (
        lambda f: (f / MARKER).unlink(),
        f"{MARKER}: the gate's marker is missing",
    ),
    "an evidence file replaced by a link": (
        lambda f: _link_in_place(f, "driver.txt"),
        "driver.txt: a symbolic link",
    ),
    "the test result replaced by a link": (
        lambda f: _link_in_place(f, TEST_RESULT_FILE),
        f"{TEST_RESULT_FILE}: a symbolic link",
    ),
    "a FIFO added": (
        lambda f: os.mkfifo(f / "logs" / "pipe"),
        "pipe: not a regular file",
    ),
    "an envelope another key wrote": (
        _forged_envelope,
        f"{ENVELOPE_FILE}: an envelope this key did not write",
    ),
    "a test-result envelope another key wrote": (
        _forged_test_envelope,
        f"{TEST_RESULT_ENVELOPE}: an envelope this key did not write",
    ),
    "a run URL of another run": (
        lambda f: _edit_json(f / TEST_RESULT_FILE, _url_of_another_run),
        f"{TEST_RESULT_FILE}: predicate.url",
    ),
    "a runner kind outside Actions": (
        lambda f: _edit_json(f / TEST_RESULT_FILE, _runner_kind),
        f"{TEST_RESULT_FILE}: runnerEnvironment 'github-hosted' is not a runner's",
    ),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_every_change_since_the_run_is_refused_and_nothing_signed(
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    folder = make_evidence(tmp_path / "ev", accepted=False)
    change, named = CHANGES[name]
    change(folder)
    before = _snapshot(folder)
    code, out, err = _sign(monkeypatch, capsys, folder)
    assert code == int(ExitCode.EVIDENCE_CHANGED), err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"cuda-gate: error: {folder}"), lines[0]
    assert named in lines[0], lines[0]
    assert "refusing to sign" in lines[0]
    assert _snapshot(folder) == before  # nothing signed, nothing removed


def test_an_unchanged_folder_is_signed_and_signing_again_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = make_evidence(tmp_path / "ev", accepted=False)
    code, out, err = _sign(monkeypatch, capsys, folder)
    assert code == 0, err
    assert f"signed with key {KEY.keyid}: {folder / TEST_RESULT_ENVELOPE}" in out
    signed = _snapshot(folder)
    envelope = json.loads(signed[TEST_RESULT_ENVELOPE])
    assert envelope["signatures"][0]["keyid"] == KEY.keyid
    code, _, err = _sign(monkeypatch, capsys, folder)
    assert code == 0, err
    assert _snapshot(folder) == signed


def test_a_run_in_github_actions_signs_with_its_url_and_runner_kind(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = make_evidence(tmp_path / "ev", run_id="gh-4242-2")
    actions = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "acme/kernels",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "2",
        "RUNNER_ENVIRONMENT": "self-hosted",
    }
    config = tmp_path / "cuda-gate.toml"
    config.write_text("[build]\n")
    write_manifest(folder, None, redactor=Redactor(), environ=actions, config_file=config)
    statement = json.loads((folder / TEST_RESULT_FILE).read_text())
    assert statement["predicate"]["url"].endswith("/actions/runs/4242/attempts/2")
    assert len(statement["predicate"]["configuration"]) == 3
    code, _, err = _sign(monkeypatch, capsys, folder)
    assert code == 0, err
    assert (folder / TEST_RESULT_ENVELOPE).is_file()


def test_the_url_of_an_actions_run_elsewhere_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A run outside Actions, whose test result was given the URL of some passing run.
    folder = make_evidence(tmp_path / "ev")
    _edit_json(folder / TEST_RESULT_FILE, _url_of_another_run)
    code, _, err = _sign(monkeypatch, capsys, folder)
    assert code == int(ExitCode.EVIDENCE_CHANGED)
    assert "is not the run 20261129T180000Z-1a2b3c" in err


def test_a_folder_a_run_holds_is_in_use_not_unreadable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # As a run leaves it mid-way: the marker (locked), no run record yet.
    folder = tmp_path / "ev"
    folder.mkdir()
    mark(folder)
    lock = Lock.acquire(folder / MARKER, "a run", create=False)
    try:
        code, _, err = _sign(monkeypatch, capsys, folder)
    finally:
        lock.release()
    assert code == int(ExitCode.EVIDENCE), err
    assert "in use by another cuda-gate run (pid " in err
    assert sorted(p.name for p in folder.iterdir()) == [MARKER]


@pytest.mark.parametrize("kind", ["missing", "empty", "not the gate's"])
def test_no_evidence_folder_is_bad_input(
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ev"
    if kind != "missing":
        folder.mkdir()
    if kind == "not the gate's":
        (folder / "notes.txt").write_text("mine")
    code, _, err = _sign(monkeypatch, capsys, folder)
    assert code == int(ExitCode.BAD_INPUT), err
    assert err.strip().startswith(f"cuda-gate: error: {folder}: ")
