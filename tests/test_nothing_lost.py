"""Nothing lost, nothing leaked: the evidence folder, secrets, processes, option values.

Each test here is a defect a probe of the gate found (issue "Nothing lost, nothing
leaked, no input that hangs or crashes it"), turned into the behaviour users rely on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gate import cli, proc
from gate.attest.signing import generate_key_pair
from gate.config import EntryPoint
from gate.errors import EvidenceError, ExitCode, ToolError
from gate.evidence import EvidenceDir, is_marked
from gate.rules.causes import ExecPath
from gate.stages.runs import run_entry_point

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-0123456789abcdef",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE0123456789",
    "GITHUB_TOKEN": "ghp_exampletoken0123456789abcdef",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-request-token-0123456789",
}


@pytest.mark.unit
def test_a_folder_that_merely_holds_a_result_json_is_never_deleted(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep\n", encoding="utf-8")
    (folder / "result.json").write_text("{}\n", encoding="utf-8")
    with pytest.raises(EvidenceError, match="is not a cuda-gate evidence folder; refusing"):
        EvidenceDir.create(folder)
    assert (folder / "notes.txt").read_text(encoding="utf-8") == "keep\n"
    # A folder the gate marked is its own: a rerun replaces it.
    ours = EvidenceDir.create(tmp_path / "ev")
    ours.write_text("old.txt", "old\n")
    assert is_marked(ours.root)
    ours.release()
    EvidenceDir.create(ours.root)
    assert not (ours.root / "old.txt").exists()


@pytest.mark.unit
@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon"])
def test_a_bad_timeout_is_refused_not_replaced(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["run", f"--timeout={value}"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--timeout" in err
    assert "Traceback" not in err


def script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.mark.integration
def test_a_timeout_says_so_and_kills_the_whole_group(tmp_path: Path) -> None:
    slow = script(tmp_path, "slow.sh", "echo started\nsleep 30 &\nsleep 30\n")
    began = time.monotonic()
    result = proc.run([str(slow)], timeout=1)
    assert time.monotonic() - began < 10
    assert result.timed_out
    assert "started" in result.stdout  # what it printed before it was killed is kept
    assert result.describe_failure("build step 'x'", 1) == (
        "build step 'x' did not finish within 1 s; its processes were killed"
    )


@pytest.mark.integration
def test_a_detached_child_neither_stalls_the_gate_nor_outlives_it(tmp_path: Path) -> None:
    marker = tmp_path / "still-running"
    # The short sleep lets the background job detach (setsid) before the script exits.
    body = f"echo building\nsetsid sh -c 'sleep 40; touch {marker}' &\nsleep 0.5\necho done\n"
    began = time.monotonic()
    result = proc.run([str(script(tmp_path, "detach.sh", body))], timeout=60)
    assert time.monotonic() - began < 10
    assert result.ok
    assert result.stdout.splitlines() == ["building", "done"]
    assert len(result.strays) == 1
    assert "sleep 40" in result.strays[0]
    pid = int(result.strays[0].split()[0])
    assert not Path(f"/proc/{pid}").exists()


@pytest.mark.integration
def test_children_of_every_thread_are_found_both_ways() -> None:
    # The per-thread children files and the scan of every process's parent agree,
    # for a child of this thread and one started by another thread.
    started: list[subprocess.Popen[bytes]] = [subprocess.Popen(["sleep", "30"])]
    other = threading.Thread(target=lambda: started.append(subprocess.Popen(["sleep", "30"])))
    other.start()
    other.join()
    try:
        pids = {child.pid for child in started}
        assert pids <= proc._orphans()
        assert proc._orphans() == proc._orphans_by_stat()
    finally:
        for child in started:
            child.kill()
            child.wait()


@pytest.mark.integration
def test_an_orphan_of_a_running_command_is_never_taken_for_another_commands_stray(
    tmp_path: Path,
) -> None:
    # A project's command leaves a helper behind while it still runs; a command of the
    # gate's that ends meanwhile (the SASS dump runs beside the entry points) must not
    # claim and kill it. The helper's session is the running command's.
    marker = tmp_path / "helper-survived"
    # ( ... & ): the subshell exits at once, so the helper is an orphan, adopted by us.
    body = f"sleep 0.5\n( (sleep 1.5; touch {marker}) & )\nsleep 2.5\n"
    project = script(tmp_path, "project.sh", body)
    results: dict[str, proc.Result] = {}
    first = threading.Thread(target=lambda: results.update(a=proc.run([str(project)], timeout=60)))
    first.start()
    time.sleep(0.3)
    results["b"] = proc.run(["sleep", "1"], timeout=60)  # ends while the project runs
    first.join()
    assert results["b"].strays == ()
    assert marker.exists()  # the helper lived to finish its work


@pytest.mark.integration
def test_an_interrupt_stops_the_commands_other_threads_wait_on() -> None:
    # Commands run in sessions of their own: Ctrl-C reaches the gate only. Without
    # killing them, the gate would wait for a thread's command to run to its timeout.
    results: dict[str, proc.Result] = {}
    worker = threading.Thread(target=lambda: results.update(r=proc.run(["sleep", "30"])))
    began = time.monotonic()

    def interrupted_meanwhile() -> None:
        worker.start()
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(20)  # the interrupt comes first

    with cli.interrupts_kill_commands(), pytest.raises(KeyboardInterrupt):
        interrupted_meanwhile()
    worker.join(timeout=20)
    assert not worker.is_alive()
    assert time.monotonic() - began < 10
    assert results["r"].returncode != 0


@pytest.mark.integration
def test_a_missing_working_folder_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"working folder .*/nowhere does not exist"):
        proc.run(["true"], cwd=tmp_path / "nowhere")


@pytest.mark.integration
def test_output_past_the_limit_keeps_head_and_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proc, "OUTPUT_LIMIT", 1000)
    body = "echo FIRST\nyes filler | head -n 10000\necho LAST\n"
    result = proc.run([str(script(tmp_path, "chatty.sh", body))])
    assert result.stdout.startswith("FIRST")
    assert result.stdout.rstrip().endswith("LAST")
    assert "bytes of output cut here" in result.stdout
    assert len(result.stdout) < 2000
    assert result.cut


@pytest.mark.integration
def test_cuobjdump_output_is_read_whole_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # -symbols on libtorch_cuda.so prints 74 MB: cut to proc's head and tail, 627 of its
    # 2,789 cubins went missing from the cross-check. cuobjdump's output is read whole ...
    from gate.tools import cuobjdump

    monkeypatch.setattr(proc, "OUTPUT_LIMIT", 1000)
    body = "echo 'Fatbin elf code:'\nyes 'FUNC GLOBAL DEFAULT ENTRY k' | head -n 1000\necho END\n"
    tool = script(tmp_path, "cuobjdump", body)
    artifact = tmp_path / "lib.so"
    artifact.write_bytes(b"x")
    whole = cuobjdump.run_tool(str(tool), ["-symbols"], artifact)
    assert not whole.cut
    assert whole.stdout.count("ENTRY k") == 1000
    assert whole.stdout.rstrip().endswith("END")
    # ... up to its own limit, past which the cross-check refuses rather than compares.
    monkeypatch.setattr(cuobjdump, "OUTPUT_LIMIT", 1000)
    with pytest.raises(ToolError, match="its output cannot be used whole"):
        cuobjdump.run_tool(str(tool), ["-symbols"], artifact)


@pytest.mark.integration
def test_children_never_see_the_gates_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "signing.pem"
    key.write_bytes(generate_key_pair().private_pem)
    monkeypatch.setenv("CUDA_GATE_SIGNING_KEY_FILE", str(key))
    monkeypatch.setenv("CUDA_GATE_SIGNING_KEY", key.read_text(encoding="utf-8"))
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MY_OWN_SETTING", "kept")
    dump = script(tmp_path, "env.sh", "env\necho PASS\n")
    for path in ExecPath:
        done = run_entry_point(EntryPoint("dump", (str(dump),)), path)
        seen = done.result.stdout
        assert "MY_OWN_SETTING=kept" in seen
        for name in [*SECRETS, "CUDA_GATE_SIGNING_KEY", "CUDA_GATE_SIGNING_KEY_FILE"]:
            assert f"{name}=" not in seen, name


@pytest.mark.integration
def test_a_build_that_prints_secrets_leaves_none_in_the_evidence_or_the_store(
    tmp_path: Path,
) -> None:
    """The key file's content is redacted even though it never was an environment value."""
    key = tmp_path / "signing.pem"
    pem = generate_key_pair().private_pem.decode()
    key.write_text(pem, encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / "cuda-gate.toml").write_text(
        f'smoke = true\n[[build]]\ncommand = ["sh", "-c", "env; cat {key}; echo done"]\n',
        encoding="utf-8",
    )
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "cuda-gate.toml"], ["commit", "-q", "-m", "one"]):
        subprocess.run([*git, *args], cwd=project, check=True, capture_output=True)
    env = {**os.environ, **SECRETS, "CUDA_GATE_SIGNING_KEY_FILE": str(key)}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    store = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--evidence", "ev",
         "--store", str(store), "--build-dir", str(tmp_path / "build")],
        cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode in (int(ExitCode.NO_DEVICE), 0), done.stderr
    log = (project / "ev" / "build-build-1.log").read_text(encoding="utf-8")
    assert "done" in log
    assert "[redacted]" in log  # the key file's lines, printed by cat
    secrets = [*SECRETS.values(), *(line for line in pem.splitlines() if len(line) > 16)]
    everything = [p for p in (project / "ev").rglob("*") if p.is_file()]
    everything += [p for p in store.rglob("*") if p.is_file()]
    assert any(p.name == "index.json" for p in everything)  # the run reached the store
    for path in everything:
        data = path.read_bytes()
        for secret in secrets:
            assert secret.encode() not in data, f"{path} holds a secret"
        for name in SECRETS:
            assert f"{name}=".encode() not in data, f"{path} names ${name}"
