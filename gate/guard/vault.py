"""Keep the gate's secrets out of reach of the project code it runs.

Children never inherit the secrets (:func:`gate.guard.redact.child_environment`), but a build
step running as the same user could still read them from the gate itself:
``/proc/PID/environ`` shows the environment the gate was *started* with, whatever Python
later removes from ``os.environ``, and ``/proc/PID/mem`` and ``/proc/PID/fd/*`` show the
rest. So the command-line entry point calls :func:`seal` before anything else:

1. The gate makes itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): the kernel then
   gives ``/proc/PID/environ``, ``mem``, ``fd``, ``maps`` and ``ptrace`` only to a
   process holding ``CAP_SYS_PTRACE`` (root), never to another process of the same user.
2. When its start-up environment holds any of :data:`gate.guard.redact.GATE_SECRETS`, it
   re-executes itself (same interpreter, same arguments, same process id) with an
   environment without them. The secrets travel through a pipe the new image reads and
   closes first thing, after making itself non-dumpable again (``execve`` resets the
   flag). No project process exists yet at that point: the gate has started none.
3. The new image puts them back into ``os.environ``, the process's own copy: children
   never receive it and no other process can read it. ``/proc/PID/environ`` still shows
   the start-up block, which now holds none of them.

What stays open, and is said in docs/secrets.md: root (``CAP_SYS_PTRACE``) reads anything; the
processes that started the gate (a shell, nox, a CI step) hold the secrets in their own
environment, so CI gives them only to steps that run no project code (``cuda-gate sign``);
a key *file* stays readable to every process of its user while it exists.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import stat
import sys
from collections.abc import Mapping, MutableMapping

from gate.errors import ConfigError
from gate.guard.redact import GATE_SECRETS

# The re-executed image finds its secrets here (and checks it is the process they were for).
FD_VARIABLE = "CUDA_GATE_SEALED_FD"
PID_VARIABLE = "CUDA_GATE_SEALED_PID"
_PR_SET_DUMPABLE = 4
# A pipe holds 64 KiB before a write blocks; nothing reads it until the new image runs.
_PIPE_CAPACITY = 1 << 16
_F_SETPIPE_SZ = 1031
_MAX_SECRETS = 1 << 20


def _prctl(option: int, value: int) -> int:
    """``prctl(option, value)``; -1 where there is no prctl (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0))
    except (OSError, AttributeError):
        return -1


def make_undumpable() -> bool:
    """Close this process's /proc files and ptrace to other processes of its user."""
    return _prctl(_PR_SET_DUMPABLE, 0) == 0


def held(environ: Mapping[str, str]) -> dict[str, str]:
    """The gate's secrets set (non-empty) in ``environ``."""
    return {name: value for name, value in environ.items() if name in GATE_SECRETS and value}


def seal(argv: list[str] | None = None) -> None:
    """Make the gate unreadable to its user's other processes; re-execute it without its
    secrets in the start-up environment when it has any (see the module docstring).

    Returns normally in the re-executed image (secrets back in ``os.environ``) or when
    there was nothing to hide; else does not return. ConfigError when a sealed hand-over
    is not the gate's own (a stale ``CUDA_GATE_SEALED_FD``).
    """
    make_undumpable()
    if FD_VARIABLE in os.environ:
        _unseal(os.environ)
        return
    secrets = held(os.environ)
    if not secrets:
        return
    data = json.dumps(secrets).encode("utf-8")
    if len(data) > _MAX_SECRETS:
        raise ConfigError(f"the gate's secrets in the environment exceed {_MAX_SECRETS} bytes")
    read_end, write_end = os.pipe()
    if len(data) >= _PIPE_CAPACITY:
        import fcntl  # noqa: PLC0415 - rare: only secrets over 64 KiB

        fcntl.fcntl(write_end, _F_SETPIPE_SZ, len(data) + 1)
    os.write(write_end, data)
    os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {k: v for k, v in os.environ.items() if k not in GATE_SECRETS}
    env[FD_VARIABLE] = str(read_end)
    env[PID_VARIABLE] = str(os.getpid())
    args = list(sys.orig_argv) if argv is None else argv
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, args, env)  # noqa: S606 - this very program, re-executed


def _unseal(environ: MutableMapping[str, str]) -> None:
    """In the re-executed image: read the secrets, close the pipe, restore them."""
    text, pid = environ.pop(FD_VARIABLE), environ.pop(PID_VARIABLE, "")
    if pid != str(os.getpid()) or not text.isdigit():
        raise ConfigError(
            f"{FD_VARIABLE}={text[:20]}: not a hand-over from this process",
            hint=f"unset {FD_VARIABLE} and {PID_VARIABLE}",
        )
    fd = int(text)
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise ConfigError(f"{FD_VARIABLE}={fd}: not the gate's pipe")
        chunks = []
        while chunk := os.read(fd, _PIPE_CAPACITY):
            chunks.append(chunk)
            if sum(map(len, chunks)) > _MAX_SECRETS:
                raise ConfigError(f"{FD_VARIABLE}={fd}: more than {_MAX_SECRETS} bytes")
    except OSError as e:
        raise ConfigError(f"{FD_VARIABLE}={fd}: cannot read the hand-over: {e.strerror}") from e
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    try:
        secrets = json.loads(b"".join(chunks))
    except ValueError as e:
        raise ConfigError(f"{FD_VARIABLE}={fd}: the hand-over is not the gate's") from e
    if not isinstance(secrets, dict):
        raise ConfigError(f"{FD_VARIABLE}={fd}: the hand-over is not the gate's")
    for name, value in secrets.items():
        if name in GATE_SECRETS and isinstance(value, str):
            environ[name] = value
