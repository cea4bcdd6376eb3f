"""The watchdog: the commands a gate started end when the gate dies, even by SIGKILL.

SIGINT, SIGTERM and SIGHUP reach the gate, which kills every running command's process
group itself (:func:`gate.proc.kill_running`). SIGKILL (and the OOM killer) cannot be
caught, and each command runs in a session of its own (a Ctrl-C reaches only the gate),
so without help what the gate started would run on. With its first command the gate
starts this file as a small program of its own (``python -I -S watchdog.py GATE_PID``:
the standard library only, in a session of its own, so a signal to the gate's process
group does not take it too) and tells it through a pipe each command it starts (the
process id, which leads the command's session and process group, and the process's
start time) and each it is done with (:func:`started`, :func:`ended`). When the gate is
gone (its pid file descriptor says so, or the pipe closes), for each command still told:

1. Is it the same session? A leader that is now another process (its start time differs)
   means the number was free, so the session is empty: nothing is done. A leader that is
   gone is no doubt: Linux reuses no number a session or a group still holds.
2. Its cleanup command first, while the command still runs (a container removed through
   its runtime, whose monitor still tends it), with the command's environment.
3. Every process of the session is killed (its process group, and any other group in it:
   ninja runs each compiler in a group of its own), round after round until none is left.
4. One line to the gate's standard error says what was ended.

A process that left the command's session (``setsid``) is not found: the gate, alive,
finds those as orphans adopted by it (gate.proc); once it is dead they belong to init.
The gate's own records stay the gate's: the watchdog writes nothing but that line.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# How long a cleanup command (a container's removal) may take.
CLEANUP_TIMEOUT = 60.0
# Rounds of killing a session's processes (what forked meanwhile is seen by the next).
_ROUNDS = 50
_PAUSE = 0.02
# Without a pid file descriptor (Linux before 5.3): how often the gate's pid is looked at.
_POLL_MS = 500
# /proc/PID/stat after the command name: state, ppid, pgrp, session, ..., starttime (22nd).
_STATE, _SESSION, _STARTTIME = 0, 3, 19
_GONE = (b"Z", b"X")  # a zombie has ended; only its parent's wait is missing
_COMMAND_SHOWN = 80


def stat_fields(pid: int | str) -> list[bytes] | None:
    """``/proc/PID/stat`` after the command name (state, ppid, pgrp, session, ...).

    The name (2nd field) is in parentheses and may hold spaces. None when the process
    is gone or unreadable.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def start_time(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot), None when there is no such process."""
    fields = stat_fields(pid)
    return fields[_STARTTIME].decode() if fields and len(fields) > _STARTTIME else None


def started(
    pid: int,
    argv: Sequence[str],
    cleanup: Sequence[str] = (),
    env_set: Mapping[str, str] | None = None,
    env_unset: Sequence[str] = (),
) -> bytes:
    """The line that tells the watchdog the command ``argv`` runs as ``pid`` (its session);
    ``cleanup`` runs first if the gate dies meanwhile, with the watchdog's environment
    changed by ``env_set`` and ``env_unset``."""
    command = shlex.join(argv)
    if len(command) > _COMMAND_SHOWN:
        command = command[: _COMMAND_SHOWN - 3] + "..."
    message = {
        "pid": pid,
        "start": start_time(pid),
        "command": command,
        "cleanup": list(cleanup),
        "env_set": dict(env_set or {}),
        "env_unset": list(env_unset),
    }
    return json.dumps(message).encode() + b"\n"


def ended(pid: int) -> bytes:
    """The line that tells the watchdog the gate is done with the command ``pid`` ran."""
    return json.dumps({"ended": pid}).encode() + b"\n"


@dataclass(frozen=True)
class _Command:
    """A command the gate said it started, as the watchdog keeps it."""

    pid: int
    start: str | None
    command: str
    cleanup: tuple[str, ...]
    env_set: tuple[tuple[str, str], ...]
    env_unset: tuple[str, ...]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> _Command:
        """A :func:`started` line, decoded."""
        return cls(
            int(doc["pid"]),
            None if doc["start"] is None else str(doc["start"]),
            str(doc["command"]),
            tuple(str(a) for a in doc["cleanup"]),
            tuple((str(k), str(v)) for k, v in dict(doc["env_set"]).items()),
            tuple(str(n) for n in doc["env_unset"]),
        )


def main(argv: Sequence[str]) -> int:
    """``watchdog.py GATE_PID``, the gate's pipe on standard input: wait for the gate to
    end, then end what its commands left (the module's steps)."""
    gate = int(argv[1])
    running = _follow(gate, sys.stdin.fileno())
    said = [done for command in running.values() if (done := _end(command))]
    if said:
        line = (
            f"cuda-gate: the gate (pid {gate}) ended without stopping its commands; "
            f"its watchdog ended {'; '.join(said)}\n"
        )
        with contextlib.suppress(OSError):
            os.write(2, line.encode("utf-8", "replace"))
    return 0


def _follow(gate: int, fd: int) -> dict[int, _Command]:
    """The commands still running when the gate ``gate`` ended, as its lines on ``fd`` said."""
    os.set_blocking(fd, False)
    gone = _pidfd(gate)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if gone is not None:
        poller.register(gone, select.POLLIN)
    running: dict[int, _Command] = {}
    pending = b""
    while True:
        ready = {ready_fd for ready_fd, _ in poller.poll(-1 if gone is not None else _POLL_MS)}
        pending, open_ = _read(fd, pending, running)
        if not open_ or gone in ready or (gone is None and os.getppid() != gate):
            # A process the gate forked and never exec'd holds the pipe open: what was
            # written before the gate died is in it already.
            _read(fd, pending, running)
            return running


def _pidfd(gate: int) -> int | None:
    """A descriptor that becomes readable when the gate ends (None: no pidfd here, or the
    gate ended already and the parent is looked at instead)."""
    try:
        fd = os.pidfd_open(gate)
    except (AttributeError, OSError):
        return None
    if os.getppid() != gate:  # the gate ended before the descriptor was opened
        os.close(fd)
        return None
    return fd


def _read(fd: int, pending: bytes, running: dict[int, _Command]) -> tuple[bytes, bool]:
    """Apply the whole lines readable now; the part of a line left, and whether the pipe is
    still open."""
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return pending, True
        except OSError:
            return pending, False
        if not data:
            return pending, False
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            _apply(line, running)


def _apply(line: bytes, running: dict[int, _Command]) -> None:
    """One line of the gate's: a command started, or one ended."""
    try:
        doc = json.loads(line)
        if "ended" in doc:
            running.pop(int(doc["ended"]), None)
        else:
            command = _Command.from_json(doc)
            running[command.pid] = command
    except (ValueError, KeyError, TypeError):
        return


def _end(command: _Command) -> str | None:
    """End what ``command`` left running (the module's steps 1-3); what was done, in a few
    words, or None when nothing of it was left."""
    now = start_time(command.pid)
    if now is not None and now != command.start:
        return None  # 1. another process has its number: the session is empty
    if not _members(command.pid):
        return None
    cleaned = ""
    if command.cleanup:  # 2. before its processes go
        cleaned = f", after `{shlex.join(command.cleanup)}`: {_cleanup(command)}"
    killed = _kill_session(command.pid)  # 3.
    return f"`{command.command}` ({killed} process{'es' if killed != 1 else ''} killed{cleaned})"


def _members(session: int) -> set[int]:
    """The processes of ``session`` that have not ended."""
    try:
        names = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return set()
    wanted = str(session).encode()
    found = set()
    for name in names:
        fields = stat_fields(name) or []
        if len(fields) > _SESSION and fields[_SESSION] == wanted and fields[_STATE] not in _GONE:
            found.add(int(name))
    return found


def _kill_session(session: int) -> int:
    """Kill every process of ``session``, round after round; how many there were."""
    killed: set[int] = set()
    for _ in range(_ROUNDS):
        members = _members(session)
        if not members:
            break
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed |= members
        time.sleep(_PAUSE)
    return len(killed)


def _cleanup(command: _Command) -> str:
    """Run the command's cleanup (output discarded) for up to :data:`CLEANUP_TIMEOUT`
    seconds; how it ended, in a few words."""
    env = dict(os.environ)
    for name in command.env_unset:
        env.pop(name, None)
    env.update(command.env_set)
    actions = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    try:
        pid = os.posix_spawnp(command.cleanup[0], command.cleanup, env, file_actions=actions)
    except OSError as e:
        return f"could not start: {e.strerror or e}"
    deadline = time.monotonic() + CLEANUP_TIMEOUT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return f"exit status {os.waitstatus_to_exitcode(status)}"
        time.sleep(_PAUSE)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return f"killed after {CLEANUP_TIMEOUT:g} s"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
