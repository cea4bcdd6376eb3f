"""Nothing mixes, nothing is left out: one run per evidence folder, every signed file stored,
signing apart from the run, store URLs that never silently become folders, and signals
that stop a run's processes and record it as interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from gate.attest.manifest import write_manifest
from gate.attest.signing import generate_key_pair, signer_from_pem
from gate.config import Config
from gate.errors import ConfigError, EvidenceChangedError, EvidenceError, ExitCode
from gate.evidence import (
    ENVELOPE_FILE,
    MARKER,
    TEST_RESULT_ENVELOPE,
    TEST_RESULT_FILE,
    EvidenceDir,
    evidence_files,
    walk,
)
from gate.guard.redact import Redactor
from gate.store.settings import load_settings
from tests.s3server import WeedServer
from tests.store_helpers import REVISION, make_evidence, run_cli

KEY = generate_key_pair()


def _files(root: Path) -> dict[str, bytes]:
    return {name: (root / name).read_bytes() for name in walk(root)}


# ---------------------------------------------------------------- every signed file stored


def _signed_evidence(folder: Path) -> Path:
    make_evidence(folder)
    write_manifest(folder, signer_from_pem(KEY.private_pem, "test"), redactor=Redactor())
    assert {ENVELOPE_FILE, TEST_RESULT_FILE, TEST_RESULT_ENVELOPE} <= set(walk(folder))
    return folder


def _round_trip(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, url: str
) -> None:
    evidence = _signed_evidence(tmp_path / "ev")
    code, _, err = run_cli(monkeypatch, capsys, "upload", str(evidence), "--store", url, "--quiet")
    assert code == 0, err
    dest = tmp_path / "back"
    code, out, err = run_cli(
        monkeypatch, capsys, "evidence", "get", "--store", url, "--revision", REVISION,
        "--repository", "acme/kernels", "--runner", "gpu-box-1", "--dest", str(dest),
    )  # fmt: skip
    assert code == 0, err
    assert f"fetched {len(walk(evidence))} files" in out
    back = _files(dest)
    assert "files" in json.loads(back.pop("index.json"))  # the store's own index
    assert back == _files(evidence)  # every file of the folder, byte for byte


@pytest.mark.unit
def test_upload_then_get_gives_back_every_file_local_store(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    _round_trip(monkeypatch, capsys, tmp_path, f"file://{tmp_path / 'store'}")


@pytest.mark.integration
def test_upload_then_get_gives_back_every_file_s3_store(
    server: WeedServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_GATE_SPOOL_DIR", str(tmp_path / "spool"))
    bucket = f"gate-{uuid.uuid4().hex[:12]}"
    server.client().create_bucket(Bucket=bucket)
    _round_trip(monkeypatch, capsys, tmp_path, f"s3://{bucket}/gate")


@pytest.mark.unit
def test_a_test_result_envelope_over_other_bytes_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    evidence = _signed_evidence(tmp_path / "ev")
    (evidence / TEST_RESULT_FILE).write_text("{}\n", encoding="utf-8")
    code, _, err = run_cli(
        monkeypatch, capsys, "upload", str(evidence), "--store", str(tmp_path / "s"), "--quiet"
    )
    assert code == int(ExitCode.EVIDENCE_CHANGED)
    assert err.strip() == (
        f"cuda-gate: error: {evidence / TEST_RESULT_ENVELOPE}: its signed payload is not "
        f"{TEST_RESULT_FILE} (one of them changed after signing)"
    )


# ---------------------------------------------------------------- store URLs


def _settings(url: object) -> str:
    # As the TOML reader gives it: any value, even one of the wrong type.
    config = Config(project_dir=Path("/nonexistent"), store=(("url", url),))  # type: ignore[arg-type]
    return load_settings(env={}, config=config).describe()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("s3://bucket/prefix", "s3://bucket/prefix"),
        ("S3://bucket/prefix", "s3://bucket/prefix"),  # a scheme is case-insensitive
        ("file:///srv/evidence", "/srv/evidence"),
        ("file://localhost/srv/evidence", "/srv/evidence"),
        ("/srv/evidence", "/srv/evidence"),
        ("relative/folder", "relative/folder"),
    ],
)
def test_store_urls_that_name_a_store(url: str, shown: str) -> None:
    assert _settings(url) == shown


@pytest.mark.unit
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://s3.example.com/bucket", "unknown store scheme 'https' in 'https://s3.exa"),
        ("gs://bucket", "unknown store scheme 'gs' in 'gs://bucket'"),
        ("ftp://host/x", "unknown store scheme 'ftp'"),
        ("file://otherhost/x", "a file:// URL names a folder on this machine"),
        (123, "123 is not a store URL"),
        (["s3://b"], "['s3://b'] is not a store URL"),
    ],
)
def test_store_urls_that_are_configuration_errors(url: object, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _settings(url)
    assert raised.value.exit_code == ExitCode.CONFIG
    line = raised.value.one_line()
    assert line.startswith("defaults [store]: key 'url': ")  # where the value came from
    assert message in line


@pytest.mark.unit
def test_a_bad_store_option_is_blamed_on_the_option_and_cut_short() -> None:
    config = Config(project_dir=Path("/nonexistent"))
    env = {"CUDA_GATE_STORE": "s3://from-the-environment"}
    long = "gs://" + "x" * 100_000
    with pytest.raises(ConfigError) as raised:
        load_settings(env=env, url=long, config=config)
    line = raised.value.one_line()
    assert line.startswith("--store: unknown store scheme 'gs'")
    assert "CUDA_GATE_STORE" not in line
    assert len(line) < 300


# ---------------------------------------------------------------- one run per folder


@pytest.mark.unit
def test_no_upload_or_sign_while_a_run_holds_the_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    evidence = _signed_evidence(tmp_path / "ev")
    from gate.fsutil import Lock

    lock = Lock.acquire(evidence / MARKER, "a run", create=False)
    try:
        code, _, err = run_cli(
            monkeypatch, capsys, "upload", str(evidence), "--store", str(tmp_path / "s")
        )
        assert code == int(ExitCode.EVIDENCE)
        assert f"{evidence} (evidence folder): in use by another cuda-gate run (pid " in err
        monkeypatch.setattr("gate.cli.COMMANDS", ("sign",))
        monkeypatch.setenv("CUDA_GATE_SIGNING_KEY", KEY.private_pem.decode())
        from gate import cli

        assert cli.main(["sign", str(evidence)]) == int(ExitCode.EVIDENCE)
    finally:
        lock.release()
    assert not (tmp_path / "s").exists()


@pytest.mark.unit
def test_a_second_holder_of_an_evidence_folder_is_refused_with_the_holder(
    tmp_path: Path,
) -> None:
    first = EvidenceDir.create(tmp_path / "ev")
    first.write_text("a.txt", "run A\n")
    with pytest.raises(EvidenceError) as raised:
        EvidenceDir.create(tmp_path / "ev")
    line = raised.value.one_line()
    assert line.startswith(f"{tmp_path / 'ev'} (evidence folder): in use by another cuda-gate ")
    assert f"(pid {os.getpid()}: " in line
    assert line.endswith("(wait for it with --wait, or choose another folder)")
    # Nothing of run A's was touched by the refused run.
    assert (tmp_path / "ev" / "a.txt").read_text(encoding="utf-8") == "run A\n"
    first.release()
    second = EvidenceDir.create(tmp_path / "ev")
    assert walk(second.root) == (MARKER,)
    second.release()


def _gate(
    cwd: Path, *args: str, env: dict[str, str] | None = None, **popen: object
) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--stop-after", "build"]
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [*argv, "--no-store", *args],
        cwd=cwd,
        env=env or dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def _project(tmp_path: Path, command: str, *, git: bool = False) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "cuda-gate.toml").write_text(
        f'smoke = true\n[[build]]\nname = "slow"\ncommand = ["sh", "-c", "{command}"]\n',
        encoding="utf-8",
    )
    if git:
        run = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
        for args in (["init", "-q"], ["add", "cuda-gate.toml"], ["commit", "-q", "-m", "one"]):
            subprocess.run([*run, *args], cwd=project, check=True, capture_output=True)
        subprocess.run(
            ["git", "remote", "add", "origin", "https://github.com/acme/kernels.git"],
            cwd=project,
            check=True,
        )
        (project / ".gitignore").write_text("*\n", encoding="utf-8")
    return project


def _wait_for(path: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.integration
def test_two_runs_into_one_folder_never_mix(tmp_path: Path) -> None:
    started = tmp_path / "started"
    project = _project(tmp_path, f"echo run-A-build; touch {started}; sleep 8")
    ev, build = str(tmp_path / "ev"), str(tmp_path / "build")
    first = _gate(project, "--evidence", ev, "--build-dir", build)
    _wait_for(started)
    # A second run into the same folder refuses at once, naming run A.
    refused = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store",
         "--evidence", ev, "--build-dir", str(tmp_path / "other-build")],
        cwd=project, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert refused.returncode == int(ExitCode.EVIDENCE), refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith(f"cuda-gate: error: {ev} (evidence folder): in use by another ")
    assert f"pid {first.pid}: " in last
    # Another evidence folder, but the same build folder: refused too.
    refused = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store",
         "--evidence", str(tmp_path / "ev2"), "--build-dir", build],
        cwd=project, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert refused.returncode == int(ExitCode.EVIDENCE), refused.stderr
    assert f"{Path(build).resolve()} (build folder): in use by another" in refused.stderr
    # With --wait, a second run waits for the first and then replaces its evidence whole.
    waiting = _gate(project, "--evidence", ev, "--build-dir", build, "--wait")
    out_a, err_a = first.communicate(timeout=300)
    out_b, err_b = waiting.communicate(timeout=300)
    assert first.returncode == int(ExitCode.NOT_ACCEPTED), err_a  # --stop-after build
    assert waiting.returncode == int(ExitCode.NOT_ACCEPTED), err_b
    assert f"waiting for pid {first.pid}: " in err_b
    # The folder holds run B's files only, and its manifest describes exactly them.
    assert f"Evidence: {ev}/" in out_b
    statement = json.loads((tmp_path / "ev" / "manifest.json").read_text(encoding="utf-8"))
    recorded = {e["name"] for e in statement["predicate"]["evidence"]}
    assert recorded == set(evidence_files(tmp_path / "ev"))
    assert f"Evidence: {ev}/" in out_a  # run A finished whole before B replaced it


# ---------------------------------------------------------------- signing apart


@pytest.mark.integration
def test_sign_apart_from_the_run_then_verify_and_store(tmp_path: Path) -> None:
    project = _project(tmp_path, "echo built", git=True)
    ev = tmp_path / "ev"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_GATE_SIGNING")}
    done = _gate(project, "--evidence", str(ev), "--build-dir", str(tmp_path / "b"), env=env)
    out, err = done.communicate(timeout=300)
    assert "manifest not signed: no signing key configured" in out, err
    assert not (ev / ENVELOPE_FILE).exists()
    key = tmp_path / "k.key"
    key.write_bytes(KEY.private_pem)
    (tmp_path / "k.pub").write_bytes(KEY.public_pem)

    def cuda_gate(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gate", *args],
            cwd=project, env={**env, **extra}, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip

    # Without a key: one line, exit 7, nothing written.
    unsigned = cuda_gate("sign", str(ev))
    assert unsigned.returncode == int(ExitCode.CONFIG)
    assert unsigned.stderr.strip().startswith("cuda-gate: error: no signing key configured")
    # A changed evidence file: refused, nothing signed.
    log = ev / "build-slow.log"
    original = log.read_bytes()
    log.write_bytes(original + b"appended after the run\n")
    changed = cuda_gate("sign", str(ev), "--signing-key", str(key))
    assert changed.returncode == int(EvidenceChangedError.exit_code), changed.stderr
    assert changed.stderr.strip() == (
        f"cuda-gate: error: {log}: changed since manifest.json was written; refusing to sign "
        "(run the gate again to write fresh evidence)"
    )
    assert not (ev / ENVELOPE_FILE).exists()
    log.write_bytes(original)
    # Signed apart, with the key in the environment, and stored.
    store = tmp_path / "store"
    signed = cuda_gate(
        "sign", str(ev), "--upload", "--store", str(store),
        CUDA_GATE_SIGNING_KEY=KEY.private_pem.decode(), CUDA_GATE_SPOOL_DIR=str(tmp_path / "sp"),
    )  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    assert f"signed with key {KEY.keyid}: {ev / ENVELOPE_FILE}" in signed.stdout
    assert "stored " in signed.stdout
    stored = {p.name for p in store.rglob("*") if p.is_file()}
    assert {ENVELOPE_FILE, TEST_RESULT_FILE, TEST_RESULT_ENVELOPE} <= stored
    # The envelope verifies like one the run signed itself (steps 1 and 3).
    verified = cuda_gate("verify", str(ev / ENVELOPE_FILE), "--key", str(tmp_path / "k.pub"),
                         "--offline")  # fmt: skip
    assert f"1. signature: ok - signed by key {KEY.keyid}" in verified.stdout, verified.stderr
    assert "3. evidence: ok - " in verified.stdout


# ---------------------------------------------------------------- signals


def _processes_with(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(int(entry.name))
    return found


@pytest.mark.integration
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_the_build_kills_its_processes_and_is_recorded(
    tmp_path: Path, signum: signal.Signals
) -> None:
    started = tmp_path / "started"
    tag = f"{300 + uuid.uuid4().int % 1000}.{os.getpid()}"  # a sleep no one else runs
    project = _project(tmp_path, f"setsid sleep {tag} & sleep {tag} & touch {started}; wait")
    ev = tmp_path / "ev"
    run = _gate(project, "--evidence", str(ev), "--build-dir", str(tmp_path / "b"))
    _wait_for(started)
    deadline = time.monotonic() + 30
    while len(_processes_with(f"sleep {tag} ")) < 2:  # the setsid one may start after `touch`
        assert time.monotonic() < deadline
        time.sleep(0.05)
    run.send_signal(signum)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 128 + signum, err
    assert err.strip().splitlines()[-1] == f"cuda-gate: interrupted by {signum.name}"
    assert _processes_with(f"sleep {tag} ") == []  # the group, and what escaped it
    record = json.loads((ev / "result.json").read_text(encoding="utf-8"))
    build = next(s for s in record["stages"] if s["name"] == "build")
    assert build["status"] == "failed"
    assert build["detail"] == f"interrupted by {signum.name}"
    skipped = [(s["name"], s["detail"]) for s in record["stages"] if s["status"] == "skipped"]
    assert skipped == [("inspect", "the build stage failed"), ("execute", "the build stage failed")]
    assert f"evidence not stored: interrupted by {signum.name})" in out
    assert (ev / "manifest.json").is_file()


# ---------------------------------------------------------------- internal errors


@pytest.mark.integration
def test_an_internal_error_keeps_its_traceback_in_the_evidence(tmp_path: Path) -> None:
    sitecustomize = tmp_path / "site" / "sitecustomize.py"
    sitecustomize.parent.mkdir()
    sitecustomize.write_text(
        "import gate.stages.environment as e\n"
        "def broken(*a, **k):\n"
        "    raise RuntimeError('a bug planted by the test')\n"
        "e.run = broken\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(sitecustomize.parent)}
    ev = tmp_path / "ev"
    for debug in ((), ("--debug",)):
        run = _gate(tmp_path, "--evidence", str(ev), *debug, env=env)
        _, err = run.communicate(timeout=120)
        trace = (ev / "internal-error.txt").read_text(encoding="utf-8")
        assert "RuntimeError: a bug planted by the test" in trace
        assert "Traceback (most recent call last)" in trace
        assert (f"environment stopped: internal error: RuntimeError: a bug planted by the "
                f"test; traceback in {ev / 'internal-error.txt'}") in err  # fmt: skip
        assert ("Traceback (most recent call last)" in err) == bool(debug)
        statement = json.loads((ev / "manifest.json").read_text(encoding="utf-8"))
        assert "internal-error.txt" in {e["name"] for e in statement["predicate"]["evidence"]}
