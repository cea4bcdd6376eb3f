"""Project code cannot read the gate's secrets back from the gate (gate.guard.vault).

A build step walks every ancestor's ``/proc/PID/environ``, ``cmdline`` and
``/proc/PID/fd/*`` (each descriptor opened and read) and dumps what it could read; no
secret given to the gate through the environment may be in it. The walk runs as an
unprivileged process of the gate's own user: as that user when the tests run as one,
and when they run as root, as root without any capability (an empty bounding set, so
no CAP_SYS_PTRACE and no CAP_DAC_OVERRIDE): same uid as the gate, no privilege, which
is exactly where a same-user build stands. A dumpable ancestor (the ``sh`` between the
gate and the walker) stays readable, so the walk is shown to work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gate.attest.signing import generate_key_pair
from gate.guard import vault
from gate.guard.redact import GATE_SECRETS

pytestmark = pytest.mark.integration

WALKER = r"""
import json, os, stat, sys

out = sys.argv[1]


def parent(pid):
    try:
        data = open(f"/proc/{pid}/stat", "rb").read()
    except OSError:
        return 0
    return int(data[data.rfind(b")") + 2 :].split()[1])


found = {"ancestors": [], "read": {}, "denied": {}}
dump = bytearray()
pid = os.getppid()
while pid > 1:
    found["ancestors"].append(pid)
    read, denied = found["read"].setdefault(str(pid), []), found["denied"].setdefault(str(pid), [])
    for what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                dump += f.read()
            read.append(what)
        except OSError as e:
            denied.append(what)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        read.append("fd")
    except OSError:
        fds = []
        denied.append("fd")
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(handle).st_mode):
                dump += os.pread(handle, 1 << 20, 0)
            else:
                dump += os.read(handle, 1 << 16)
            read.append(f"fd/{fd}")
        except OSError:
            pass
        finally:
            os.close(handle)
    pid = parent(pid)
with open(out + ".bin", "wb") as f:
    f.write(dump)
with open(out, "w") as f:
    json.dump(found, f)
"""


def unprivileged() -> list[str]:
    """The prefix that runs a command as an unprivileged process of this user."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to drop root's capabilities for this test")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--"]


def secrets() -> dict[str, str]:
    return {
        "CUDA_GATE_SIGNING_KEY": generate_key_pair().private_pem.decode(),
        "AWS_ACCESS_KEY_ID": "AKIAWALKERTESTKEY0001",
        "AWS_SECRET_ACCESS_KEY": "walker/secret/access/key/0123456789abcdef",
        "GITHUB_TOKEN": "ghs_walkertesttoken0123456789abcdef",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-request-token-for-the-walker-test",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.actions.example.invalid/oidc?x=1",
    }


def walk_from_a_build(tmp_path: Path, env: dict[str, str], *gate_args: str) -> dict[str, object]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "walker.py").write_text(WALKER, encoding="utf-8")
    out = tmp_path / "walk.json"
    # `; true`: sh does not exec the walker in its own place, so sh stays an ancestor.
    script = f"{sys.executable} walker.py {out}; true"
    (project / "cuda-gate.toml").write_text(
        f'smoke = true\n[[build]]\nname = "walk"\ncommand = ["sh", "-c", "{script}"]\n',
        encoding="utf-8",
    )
    for folder in (tmp_path, project):
        folder.chmod(0o777)
    argv = [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--stop-after", "build"]
    argv += ["--no-store", "--evidence", str(tmp_path / "ev"), "--build-dir", str(tmp_path / "b")]
    with (tmp_path / "gate.out").open("w") as log:  # not a pipe: the walker reads it too
        done = subprocess.run(
            [*unprivileged(), *argv, *gate_args],
            cwd=project,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )
    output = (tmp_path / "gate.out").read_text(encoding="utf-8")
    assert out.is_file(), f"the walker did not run (exit {done.returncode}):\n{output}"
    found: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    found["dump"] = (tmp_path / "walk.json.bin").read_bytes()
    found["output"] = output
    found["gate"] = json.loads((tmp_path / "ev" / "result.json").read_text(encoding="utf-8"))
    return found


def test_a_build_step_walking_its_ancestors_finds_no_secret(tmp_path: Path) -> None:
    given = secrets()
    env = {**os.environ, **given}
    found = walk_from_a_build(tmp_path, env)
    dump = found["dump"]
    assert isinstance(dump, bytes)
    ancestors = found["ancestors"]
    assert isinstance(ancestors, list)
    assert len(ancestors) >= 2, found  # sh, then the gate
    sh, gate = (str(pid) for pid in ancestors[:2])
    read, denied = found["read"], found["denied"]
    assert isinstance(read, dict)
    assert isinstance(denied, dict)
    # The walk works: the dumpable shell's environment and descriptors were read...
    assert "environ" in read[sh], found
    assert "fd" in read[sh], found
    # ...and the gate's were closed to it: its environment, and every descriptor
    # (as root without capabilities the folder /proc/PID/fd still lists, as the
    # owner of a non-dumpable process's files; none of its entries opens).
    assert "environ" in denied[gate], found
    assert [what for what in read[gate] if what.startswith("fd/")] == [], found
    for name, value in given.items():
        for text in [value, *(line for line in value.splitlines() if len(line) > 16)]:
            assert text.encode() not in dump, f"the build read ${name} from an ancestor"
    # The run still had its key: the manifest was signed after the build.
    assert (tmp_path / "ev" / "manifest.dsse.json").is_file(), found["output"]


def test_a_key_file_is_said_to_stay_readable(tmp_path: Path) -> None:
    key = tmp_path / "gate.key"
    key.write_bytes(generate_key_pair().private_pem)
    key.chmod(0o644)
    env = {**os.environ, "CUDA_GATE_SIGNING_KEY_FILE": str(key)}
    found = walk_from_a_build(tmp_path, env)
    output = found["output"]
    assert isinstance(output, str)
    warnings = [line for line in output.splitlines() if "stays readable" in line]
    assert warnings == [
        (
            f"cuda-gate: warning: the signing key file {key} stays readable to the builds and "
            "entry points (they run as your user); sign apart instead: run without a key, then "
            "`cuda-gate sign EVIDENCE` where no project code runs"
        )
    ]
    # Not through the gate, though: its environment (naming the file) is closed.
    dump = found["dump"]
    assert isinstance(dump, bytes)
    assert str(key).encode() not in dump


def test_the_gate_is_not_dumpable_and_its_start_up_environment_holds_no_secret(
    tmp_path: Path,
) -> None:
    """What the walk relies on, seen from inside: the sealed, re-executed gate."""
    probe = (
        "import ctypes, json, os, sys\n"
        "from gate.guard import vault\n"
        "vault.seal()\n"
        # prctl(PR_GET_DUMPABLE): 0 once the gate has closed its /proc files to its user.
        "dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) != 0\n"
        "print(json.dumps({'dumpable': dumpable, 'pid': os.getpid(),"
        " 'environ': open('/proc/self/environ', 'rb').read().decode(errors='replace'),"
        " 'held': sorted(vault.held(os.environ)), 'fd': os.environ.get(vault.FD_VARIABLE)}))\n"
    )
    given = secrets()
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, **given},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["dumpable"] is False
    assert seen["held"] == sorted(given)  # back in the process's own copy
    assert seen["fd"] is None  # the hand-over is gone from it
    for name, value in given.items():
        assert value not in seen["environ"], name
        assert f"{name}=" not in seen["environ"]
    assert set(given) <= GATE_SECRETS


def test_a_stale_hand_over_is_refused_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gate", "--version"],
        env={**os.environ, vault.FD_VARIABLE: "0", vault.PID_VARIABLE: "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 7
    assert done.stderr.strip().splitlines() == [
        (
            f"cuda-gate: error: {vault.FD_VARIABLE}=0: not a hand-over from this process "
            f"(unset {vault.FD_VARIABLE} and {vault.PID_VARIABLE})"
        )
    ]
