"""The one subprocess wrapper: every external command cuda-gate runs goes through here.

It resolves the tool, records the exact command line and the environment changes
(they go into the evidence), runs the child in a process group of its own with a
timeout that kills the whole group, and turns failures into typed errors carrying
the tool's own message. Nothing else in the package calls ``subprocess``.

Three things a careless wrapper gets wrong, done right here:

* Output goes to files, not pipes: a background process the child leaves behind
  (``setsid sleep 40 &``) keeps a pipe open and would stall the gate; a file does
  not. Each stream is read back up to :data:`OUTPUT_LIMIT` bytes (head and tail
  kept, the middle cut with a note), so a chatty program cannot exhaust memory.
* Processes the child leaves running are found (the gate makes itself the
  "child subreaper", so orphans are re-parented to it instead of to init), killed,
  and named in the result. Commands may run from several threads at once (the
  cuobjdump cross-check does): a process another thread is running is never taken
  for a stray.
* What the commands run leaves is ended even when the gate cannot end it itself
  (SIGKILL, the OOM killer): a watchdog process (:mod:`gate.guard.watchdog`), started with
  the first command, ends the sessions of the commands still running when the gate dies.
* Children never see the gate's own secrets (:func:`gate.guard.redact.child_environment`):
  the signing key and its file, store credentials, GitHub and Actions tokens.

The parts: :mod:`gate.proc.result` (what a command did, and the one failure message),
:mod:`gate.proc.running` (the commands running now, and the watchdog told of each),
:mod:`gate.proc.waiting` (waiting for a command, reading its output back). Import from
here: :func:`run`, :func:`run_checked`, :class:`Result`, :func:`which`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from gate.errors import ToolError, ToolTimeoutError
from gate.guard import watchdog
from gate.guard.redact import child_environment
from gate.proc.result import Result, command_line, which
from gate.proc.running import ended, live, live_lock, start_watchdog, started, watchdog_pid
from gate.proc.waiting import read_back, tail_line, wait_for_exit
from gate.pump import Pump

__all__ = [
    "DEFAULT_TIMEOUT",
    "HEARTBEAT_EVERY",
    "OUTPUT_LIMIT",
    "Heartbeat",
    "Result",
    "command_line",
    "heartbeats",
    "kill_running",
    "run",
    "run_checked",
    "which",
]

DEFAULT_TIMEOUT = 600.0
# Bytes of each stream kept in memory: the first and last half of this.
OUTPUT_LIMIT = 32 << 20
# After killing a group, how long to wait for the child to be reaped.
_REAP_TIMEOUT = 5.0
_PR_SET_CHILD_SUBREAPER = 36


# While a command of the gate's main line runs longer than this, a heartbeat (elapsed
# seconds, the command, its last output line) goes to the callback the pipeline set.
HEARTBEAT_EVERY = 30.0
Heartbeat = Callable[[float, tuple[str, ...], str], None]
_heartbeat: Heartbeat | None = None
_heartbeat_end: Callable[[], None] | None = None
# How often a sink gets what a command wrote since: often enough for `tail -f`.
_PUMP_EVERY = 0.25


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    env_set: Mapping[str, str] | None = None,
    env_unset: Sequence[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    base_env: Mapping[str, str] | None = None,
    output_limit: int | None = None,
    claim_strays: bool = True,
    sink: Callable[[str], None] | None = None,
    settle: float = 0.0,
    on_timeout: Callable[[], object] | None = None,
    on_abandon: Sequence[str] = (),
) -> Result:
    """Run ``argv`` to completion or timeout; never raises for a non-zero exit.

    What the command left running (processes that escaped its group and came back to
    this process) is killed and named in ``strays``; never a process whose session is
    another running command's. ``claim_strays=False`` is for the gate's own read-only
    tools running beside a project's command: they claim nothing, so an orphan of
    the project's is never taken for theirs while the project's command still runs.

    Each stream is kept up to ``output_limit`` bytes (default :data:`OUTPUT_LIMIT`): past
    it, only the head and the tail, and ``cut`` says so.

    ``sink`` gets the output while the command runs (a log being written, for ``tail
    -f``): whole lines, each stream's first ``output_limit`` bytes, then one note.

    ``settle`` seconds are given to what the command left running to end on its own
    before it is killed: a container runtime's monitor (podman's conmon) finishes the
    container's cleanup just after ``podman run`` returns, and is no stray.
    ``on_timeout`` is called when the timeout passes, before the group is killed: a
    container is removed through its runtime first, while its monitor still tends it.
    ``on_abandon`` is the command the watchdog runs, with this one's environment, if the
    gate dies (SIGKILL) while this one runs, before it kills the command's session: a
    container's removal (:mod:`gate.guard.watchdog`).

    ``env_set`` and ``env_unset`` change the environment of this child only, on top
    of ``base_env`` (default: this process's environment without the gate's secrets).
    On timeout the child's whole process group is killed and ``timed_out`` is set.
    """
    args, env = _command(argv, cwd, base_env, env_set, env_unset)
    _become_subreaper()
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        before, child = _start(args, out, err, cwd, env, on_abandon=on_abandon)
        limit = OUTPUT_LIMIT if output_limit is None else output_limit
        pump = Pump(sink, (out.fileno(), err.fileno()), limit) if sink is not None else None
        report = _heartbeat if claim_strays and _on_main_thread() else None
        ticks = _ticks(args, (out, err), report, pump)
        timed_out = _wait(
            child, before, timeout, ticks, claim=claim_strays, on_timeout=on_timeout, report=report
        )
        duration = time.monotonic() - start
        if pump is not None:
            pump.pump(final=True)
        strays = _after(before, child.pid, claim=claim_strays, settle=settle)
        (stdout, cut_out), (stderr, cut_err) = read_back(out, limit), read_back(err, limit)
    return Result(
        argv=args,
        returncode=child.returncode if child.returncode is not None else -9,
        stdout=stdout,
        stderr=stderr,
        duration=duration,
        timed_out=timed_out,
        env_set=tuple(sorted((env_set or {}).items())),
        env_unset=tuple(env_unset),
        cwd=os.fspath(cwd) if cwd is not None else None,
        strays=strays,
        cut=cut_out or cut_err,
    )


def _command(
    argv: Sequence[str | os.PathLike[str]],
    cwd: str | os.PathLike[str] | None,
    base_env: Mapping[str, str] | None,
    env_set: Mapping[str, str] | None,
    env_unset: Sequence[str],
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The command line and the child's environment; ToolError for an empty command or a
    working folder that does not exist."""
    args = tuple(os.fspath(a) for a in argv)
    if not args:
        raise ToolError("internal error: an empty command")
    if cwd is not None and not Path(cwd).is_dir():
        raise ToolError(f"{args[0]}: working folder {os.fspath(cwd)} does not exist")
    env = child_environment(os.environ if base_env is None else base_env)
    for name in env_unset:
        env.pop(name, None)
    env.update(env_set or {})
    return args, env


def _start(
    args: tuple[str, ...],
    out: IO[bytes],
    err: IO[bytes],
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str],
    *,
    on_abandon: Sequence[str] = (),
) -> tuple[set[int], subprocess.Popen[bytes]]:
    """Start the child in a session of its own, told to the watchdog; the orphans there
    were before it, and it."""
    try:
        with live_lock:
            start_watchdog()  # before the first command's orphans are listed: never a stray
            before = _orphans()
            child = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
            started(child.pid, args, on_abandon, env)
    except FileNotFoundError as e:
        raise ToolError(f"{args[0]} not found", hint="is it installed and on PATH?") from e
    except PermissionError as e:
        raise ToolError(f"{args[0]} is not executable: {e.strerror}") from e
    except OSError as e:
        raise ToolError(f"{args[0]} could not be started: {e.strerror or e}") from e
    return before, child


def _ticks(
    args: tuple[str, ...],
    outputs: tuple[IO[bytes], IO[bytes]],
    report: Heartbeat | None,
    pump: Pump | None,
) -> list[tuple[float, Callable[[float], None]]]:
    """What runs while the command does: the heartbeat ``report`` (with the last line of
    ``outputs``), the ``pump`` feeding a sink."""
    ticks: list[tuple[float, Callable[[float], None]]] = []
    if report is not None:
        ticks.append((HEARTBEAT_EVERY, lambda t: report(t, args, tail_line(*outputs))))
    if pump is not None:
        ticks.append((_PUMP_EVERY, lambda _: pump.pump()))
    return ticks


def _wait(
    child: subprocess.Popen[bytes],
    before: set[int],
    timeout: float,
    ticks: Sequence[tuple[float, Callable[[float], None]]],
    *,
    claim: bool,
    on_timeout: Callable[[], object] | None,
    report: Heartbeat | None,
) -> bool:
    """Wait for the child to exit (False) or ``timeout`` to pass (True: ``on_timeout``
    called, the child reaped); either way, what is left in its group is killed.

    Interrupted (a signal), the group goes, and what escaped it too (``claim``), before
    the interruption goes on.
    """
    timed_out = False
    try:
        timed_out = not wait_for_exit(child, timeout, ticks)
        if timed_out and on_timeout is not None:
            on_timeout()
    except BaseException:
        _kill_group(child.pid)
        child.wait(timeout=_REAP_TIMEOUT)
        with live_lock:
            ended(child.pid)
            if claim:
                _kill_strays(before | live, child.pid, live)
        raise
    finally:
        # Whatever is left in the child's group goes too, finished or not.
        _kill_group(child.pid)
        if report is not None and _heartbeat_end is not None:
            _heartbeat_end()
    if timed_out:
        child.wait(timeout=_REAP_TIMEOUT)
    return timed_out


def run_checked(
    argv: Sequence[str | os.PathLike[str]],
    *,
    what: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    cwd: str | os.PathLike[str] | None = None,
) -> Result:
    """Like :func:`run`, but a non-zero exit or a timeout raises ToolError with its message."""
    result = run(argv, timeout=timeout, cwd=cwd)
    if not result.ok:
        message = result.describe_failure(what or Path(result.argv[0]).name, timeout)
        error = ToolTimeoutError if result.timed_out else ToolError
        raise error(message)
    return result


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def kill_running() -> None:
    """Kill the process group of every command still running, in any thread.

    Each command runs in a session of its own, so a Ctrl-C reaches only the gate; the
    commands that threads wait on (the SASS dumps, the smoke program's two paths, PTX
    proofs) would otherwise run on to their timeouts while the gate waits to exit.
    Safe in a signal handler: takes no lock (a copy of the set is retried if a thread
    changes it meanwhile).
    """
    for _ in range(100):
        try:
            running = tuple(live)
            break
        except RuntimeError:  # the set changed size while being copied
            continue
    else:
        return
    for pid in running:
        _kill_group(pid)


@contextlib.contextmanager
def heartbeats(
    callback: Heartbeat, every: float = HEARTBEAT_EVERY, end: Callable[[], None] | None = None
) -> Iterator[None]:
    """Within: long commands (of the main thread) report to ``callback`` every ``every`` s;
    ``end`` is called when each such command ends (to clear a live line)."""
    global _heartbeat, _heartbeat_end, HEARTBEAT_EVERY
    previous = (_heartbeat, _heartbeat_end, HEARTBEAT_EVERY)
    _heartbeat, _heartbeat_end, HEARTBEAT_EVERY = callback, end, every
    try:
        yield
    finally:
        _heartbeat, _heartbeat_end, HEARTBEAT_EVERY = previous


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


_subreaper = False


def _become_subreaper() -> None:
    """Make orphaned descendants come back to this process (Linux), so none escapes."""
    global _subreaper  # noqa: PLW0603 - a process-wide setting, made once
    if _subreaper:
        return
    _subreaper = True
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        return


def _orphans() -> set[int]:
    """Processes whose parent is this process (our children and adopted orphans).

    Each thread's ``children`` file (Linux 3.5+ with CONFIG_PROC_CHILDREN) names them in
    one read per thread; without it, or when a read fails (a thread that ended between
    the listing and the read), every process's ``stat`` is read (a few ms with a few
    hundred processes, paid after every command).
    """
    found: set[int] = set()
    try:
        for task in Path("/proc/self/task").iterdir():
            found.update(int(pid) for pid in (task / "children").read_bytes().split())
    except (OSError, ValueError):
        return _orphans_by_stat()
    found.discard(watchdog_pid())  # the gate's own, never a stray
    return found


def _session(pid: int) -> int | None:
    """The session id of ``pid`` (None when it is gone or unreadable)."""
    fields = watchdog.stat_fields(pid)
    return int(fields[3]) if fields and len(fields) > 3 and fields[3].isdigit() else None


def _orphans_by_stat() -> set[int]:
    """:func:`_orphans` where no ``children`` file exists: every process's parent read."""
    me = str(os.getpid()).encode()
    found: set[int] = set()
    try:
        entries = [p.name for p in Path("/proc").iterdir()]
    except OSError:
        return found
    for name in entries:
        if name.isdigit():
            fields = watchdog.stat_fields(name)
            if fields and len(fields) > 1 and fields[1] == me:
                found.add(int(name))
    found.discard(watchdog_pid())
    return found


def _command_of(pid: int) -> bytes:
    """A process's command line, else its name (a zombie has no command line), else ``?``."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
        if cmdline:
            return cmdline
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return b"(" + stat[stat.find(b"(") + 1 : stat.rfind(b")")] + b")"
    except OSError:
        return b"?"


def _after(before: set[int], pid: int, *, claim: bool, settle: float) -> tuple[str, ...]:
    """The command ``pid`` ended: what it left running (given ``settle`` seconds to end on
    its own), killed and named when ``claim``."""
    if claim and settle > 0:
        _settle(before | {pid}, settle)
    with live_lock:
        ended(pid)
        return _kill_strays(before | live, pid, live) if claim else ()


def _settle(before: set[int], seconds: float) -> None:
    """Wait up to ``seconds`` for the processes adopted since ``before`` to exit, reaping
    each as it does (never one another thread's command is waiting for)."""
    end = time.monotonic() + seconds
    while True:
        with live_lock:
            left = _orphans() - before - live
        for pid in list(left):
            with contextlib.suppress(ChildProcessError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done == pid:
                    left.discard(pid)
        if not left or time.monotonic() >= end:
            return
        time.sleep(0.02)


def _kill_strays(before: set[int], child: int, others: set[int]) -> tuple[str, ...]:
    """Kill what the command left running (adopted orphans), reap them, and name them.

    An orphan in the session of another running command (``others``: each started a
    session of its own) is that command's, left for it to claim when it ends.
    """
    strays = []
    for pid in sorted(_orphans() - before - {child}):
        if others and _session(pid) in others:
            continue
        cmdline = _command_of(pid)
        _kill_group(pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        strays.append(f"{pid} {cmdline.decode('utf-8', 'replace')}")
    return tuple(strays)
