"""The commands running now, from every thread, and the watchdog told of each.

What the commands run leaves is ended even when the gate cannot end it itself (SIGKILL,
the OOM killer): a watchdog process (:mod:`gate.guard.watchdog`), started with the first
command, hears of each command started and ended, and ends the sessions of the commands
still running when the gate dies (first running a command's ``on_abandon``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from gate.guard import watchdog
from gate.guard.redact import child_environment

# The children running now, from every thread: never strays of another command.
live: set[int] = set()
live_lock = threading.Lock()

# The watchdog (gate.guard.watchdog): its pid, the pipe's end the gate writes, the environment it
# started with (a cleanup's is said as changes to it). Started once; -2: gone, not restarted.
_watchdog_pid = -1
_watchdog_fd = -1
_watchdog_env: dict[str, str] = {}
_watchdog_process: list[subprocess.Popen[bytes]] = []  # kept: never collected while it runs
# At exit, with a command still running, how long the watchdog is given to end it.
_WATCHDOG_EXIT = 2.0


def watchdog_pid() -> int:
    """The watchdog's pid (the gate's own child, never a stray); -1 before it started."""
    return _watchdog_pid


def start_watchdog() -> None:
    """Start the watchdog with the first command (under ``live_lock``), where /proc is.

    In a session of its own: a signal to the gate's process group leaves it to act. The
    pipe's write end is not inherited by children (PEP 446): it closes when the gate ends.
    Where the watchdog cannot start, commands run unwatched, as before it existed.
    """
    global _watchdog_pid, _watchdog_fd, _watchdog_env  # noqa: PLW0603 - one per process
    if _watchdog_fd != -1 or not sys.executable or not Path("/proc/self/stat").is_file():
        return
    read, write = os.pipe()
    env = child_environment(os.environ)
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", watchdog.__file__, str(os.getpid())],
            stdin=read,
            stdout=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    except BaseException as e:
        os.close(write)
        if not isinstance(e, OSError):
            raise
        _watchdog_fd = -2
        return
    finally:
        os.close(read)
    _watchdog_process.append(process)
    _watchdog_pid, _watchdog_fd, _watchdog_env = process.pid, write, env
    atexit.register(_stop_watchdog)


def _stop_watchdog() -> None:
    """At the gate's exit the pipe closes and the watchdog ends: waited for (a moment at
    most) only where a command still runs, whose session it ends first."""
    global _watchdog_fd  # noqa: PLW0603 - one per process
    with live_lock:
        if _watchdog_fd >= 0:
            os.close(_watchdog_fd)
        _watchdog_fd = -2
        running = bool(live)
    if running:
        for process in _watchdog_process:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=_WATCHDOG_EXIT)
    with warnings.catch_warnings():
        # One still starting up ends on its own; the gate does not wait for that.
        warnings.simplefilter("ignore", ResourceWarning)
        _watchdog_process.clear()


def started(pid: int, args: Sequence[str], cleanup: Sequence[str], env: Mapping[str, str]) -> None:
    """The command ``pid`` runs (under ``live_lock``): a running command, the watchdog's to
    end (after ``cleanup``, run with ``env``) if the gate dies first."""
    live.add(pid)
    _tell_watchdog(_started_line(pid, args, cleanup, env))


def ended(pid: int) -> None:
    """The command ``pid`` ran is over (under ``live_lock``): neither a running command
    nor the watchdog's to end."""
    live.discard(pid)
    _tell_watchdog(watchdog.ended(pid))


def _started_line(
    pid: int, args: Sequence[str], cleanup: Sequence[str], env: Mapping[str, str]
) -> bytes:
    """The watchdog's line for a command started, its cleanup's environment as changes."""
    if not cleanup:
        return watchdog.started(pid, args)
    changed = {k: v for k, v in env.items() if _watchdog_env.get(k) != v}
    unset = [k for k in _watchdog_env if k not in env]
    return watchdog.started(pid, args, cleanup, changed, unset)


def _tell_watchdog(line: bytes) -> None:
    """Write ``line`` to the watchdog (under ``live_lock``: whole lines, one at a time);
    one that is gone is left alone."""
    global _watchdog_fd  # noqa: PLW0603 - one per process
    if _watchdog_fd < 0:
        return
    try:
        view = memoryview(line)
        while view:
            view = view[os.write(_watchdog_fd, view) :]
    except OSError:
        os.close(_watchdog_fd)
        _watchdog_fd = -2
