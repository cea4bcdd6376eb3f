"""A gate killed with SIGKILL leaves nothing of its commands running (issue 37, item 6).

SIGKILL cannot be caught: the gate's watchdog (gate.guard.watchdog), a process of its own
session, ends the sessions of the commands still running when the gate is gone. Real
processes throughout: the gate as a real process with a build command that is a real
shell script leaving long sleeps behind, killed with SIGKILL (the gate alone, or its
whole process group, as a CI job's cancel does), and a real podman container (a tiny
busybox image in a store of the test's own; needs podman, runc and busybox-static, whose
absence fails under ``CI=true``). Whatever a test started is killed in a ``finally``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gate.guard import watchdog
from gate.guard.watchdog import _Command, _end
from tests.containers import BUSYBOX, missing, need, podman_runner, remove_runner

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def _tag() -> str:
    """A sleep duration no one else runs: the processes a test started are found by it."""
    return f"{3000 + uuid.uuid4().int % 1000}.{os.getpid()}"


def _processes_with(text: str) -> list[int]:
    """Live processes (no zombies) whose command line holds ``text``."""
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


def _wait(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@contextmanager
def _cleaned_up(tag: str) -> Iterator[None]:
    """Whatever runs with ``tag`` is killed when the test ends, passed or not."""
    try:
        yield
    finally:
        for pid in _processes_with(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue


def _environment() -> dict[str, str]:
    # The gate as this checkout has it (not an older installed copy).
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def _build_script(folder: Path, tag: str, started: Path) -> Path:
    """A build that leaves a sleep in its group, and one in a group of its own in its
    session (as ninja runs each compiler), then waits for them."""
    script = folder / "build.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"sleep {tag} &\n"
        f'{sys.executable} -c \'import os; os.setpgid(0, 0); os.execvp("sleep", '
        f'["sleep", "{tag}"])\' &\n'
        f"touch {started}\n"
        "wait\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("whom", ["the gate", "its process group"])
def test_a_gate_killed_with_sigkill_leaves_none_of_its_builds_processes(
    tmp_path: Path, whom: str
) -> None:
    tag = _tag()
    started = tmp_path / "started"
    project = tmp_path / "project"
    project.mkdir()
    script = _build_script(tmp_path, tag, started)
    (project / "cuda-gate.toml").write_text(
        f'smoke = true\n[[build]]\nname = "slow"\ncommand = ["{script}"]\n', encoding="utf-8"
    )
    argv = [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--stop-after", "build"]
    with _cleaned_up(tag):
        gate = subprocess.Popen(
            [*argv, "--no-store", "--evidence", str(tmp_path / "ev")],
            cwd=project,
            env=_environment(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group, as a CI runner starts a step
        )
        try:
            _wait(started.exists, 120, "the build never started")
            _wait(lambda: len(_processes_with(f"sleep {tag}")) == 2, 30, "no sleeps")
            if whom == "the gate":
                os.kill(gate.pid, signal.SIGKILL)
            else:
                os.killpg(gate.pid, signal.SIGKILL)
            _, err = gate.communicate(timeout=60)  # its stderr closes when the watchdog ends
        finally:
            gate.kill()
            gate.wait()
        assert gate.returncode == -signal.SIGKILL
        _wait(lambda: _processes_with(f"sleep {tag}") == [], 10, "the sleeps outlived the gate")
    # One line naming every command still running, in no set order: on a busy machine the
    # smoke program's nvcc may still be one of them, and said first.
    prefix = (
        f"cuda-gate: the gate (pid {gate.pid}) ended without stopping its commands; "
        "its watchdog ended "
    )
    said = [line for line in err.strip().splitlines() if line.startswith(prefix)]
    assert len(said) == 1, err
    assert re.search(rf"`{re.escape(str(script))}` \(\d+ processes killed\)", said[0]), err
    assert said[0].endswith(" processes killed)"), err


@pytest.mark.parametrize("ends", ["killed", "exits"])
def test_the_cleanup_of_a_command_runs_with_its_environment_only_if_the_gate_is_killed(
    tmp_path: Path, ends: str
) -> None:
    # gate.proc as the gate runs it, in a process of its own: a container's command gives
    # the watchdog its removal (here: a script that writes what it got, then a marker).
    tag = _tag()
    cleaned = tmp_path / "cleaned"
    code = (
        "import sys\n"
        "from gate import proc\n"
        "sys.stdout.write('running\\n'); sys.stdout.flush()\n"
        f"proc.run(['sleep', '{tag}'], timeout={0.5 if ends == 'exits' else 120},\n"
        "         base_env={'PATH': '/usr/bin:/bin', 'MARK': 'from-the-command'},\n"
        f"         on_abandon=['sh', '-c', 'echo \"$MARK\" > {cleaned}'])\n"
    )
    with _cleaned_up(tag):
        gate = subprocess.Popen(
            [sys.executable, "-c", code],
            env={**_environment(), "MARK": "from-the-gate"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert gate.stdout is not None
            assert gate.stdout.readline() == "running\n"
            _wait(lambda: len(_processes_with(f"sleep {tag}")) == 1, 30, "no sleep")
            if ends == "killed":
                gate.kill()
            _, err = gate.communicate(timeout=60)
        finally:
            gate.kill()
            gate.wait()
        _wait(lambda: _processes_with(f"sleep {tag}") == [], 10, "the sleep outlived the gate")
    if ends == "exits":  # the gate ended its command itself: nothing for the watchdog
        assert gate.returncode == 0, err
        assert not cleaned.exists()
        assert "watchdog" not in err
        return
    assert cleaned.read_text(encoding="utf-8") == "from-the-command\n"
    assert f"its watchdog ended `sleep {tag}` (1 process killed, after `sh -c " in err
    assert ": exit status 0)" in err


def test_a_session_whose_leader_is_another_process_now_is_left_alone(tmp_path: Path) -> None:
    # A recorded leader whose number now belongs to a process that started at another
    # time: the number was free, so the recorded session is empty; this one is not it.
    tag = _tag()
    with _cleaned_up(tag):
        other = subprocess.Popen(["sleep", tag], start_new_session=True)
        try:
            real = watchdog.start_time(other.pid)
            assert real is not None
            earlier = _Command(other.pid, str(int(real) - 1), "old", (), (), ())
            assert _end(earlier) is None
            assert other.poll() is None  # alive
            same = _Command(other.pid, real, f"sleep {tag}", (), (), ())
            assert _end(same) == f"`sleep {tag}` (1 process killed)"
            assert other.wait(timeout=10) == -signal.SIGKILL
        finally:
            other.kill()
            other.wait()


def test_a_container_running_when_the_gate_is_killed_is_removed_through_its_runtime(
    tmp_path: Path,
) -> None:
    # podman's monitor (conmon) is outside the client's session: killing `podman run`
    # alone would leave the container running. The watchdog removes it first.
    if os.geteuid() != 0:
        missing("podman with a store of the test's own runs as root here")
    need("runc", "apt-get install -y podman runc busybox-static")
    if not BUSYBOX.is_file():
        missing(f"no {BUSYBOX}: apt-get install -y busybox-static")
    tag = _tag()
    podman = podman_runner(tmp_path / "store")
    try:
        root = tmp_path / "rootfs"
        (root / "bin").mkdir(parents=True)
        shutil.copy(BUSYBOX, root / "bin/busybox")
        (root / "bin/sleep").symlink_to("busybox")
        with tarfile.open(tmp_path / "rootfs.tar", "w") as tar:
            tar.add(root, arcname=".")
        podman("import", "--change", "WORKDIR=/", str(tmp_path / "rootfs.tar"), "gate-tiny:1")
        code = (
            "from gate.container.place import resolve\n"
            "place = resolve('localhost/gate-tiny:1', gpus='none')\n"
            "print('resolved', flush=True)\n"
            f"place.run(['sleep', '{tag}'], timeout=600)\n"
        )
        with _cleaned_up(tag):
            gate = subprocess.Popen(
                [sys.executable, "-c", code],
                env={**_environment(), **podman.env},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                assert gate.stdout is not None
                assert gate.stdout.readline() == "resolved\n", gate.communicate(timeout=60)
                _wait(lambda: podman("ps", "--quiet") != "", 120, "the container never ran")
                gate.kill()
                _, err = gate.communicate(timeout=120)
            finally:
                gate.kill()
                gate.wait()
            assert podman("ps", "--all", "--quiet") == "", err  # removed, not just stopped
            _wait(lambda: _processes_with(f"sleep {tag}") == [], 10, "the sleep outlived it")
        assert "its watchdog ended `/" in err  # the runtime's path: `podman run ...`
        assert ", after `" in err
        assert "rm --force --time=0 cuda-gate-" in err
        assert err.rstrip().endswith(": exit status 0)"), err
    finally:
        remove_runner(podman)
