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
  (SIGKILL, the OOM killer): a watchdog process (:mod:`gate.watchdog`), started with
  the first command, ends the sessions of the commands still running when the gate dies.
* Children never see the gate's own secrets (:func:`gate.redact.child_environment`):
  the signing key and its file, store credentials, GitHub and Actions tokens.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gate import watchdog
from gate.errors import ToolError, ToolTimeoutError
from gate.pump import Pump
from gate.redact import child_environment

DEFAULT_TIMEOUT = 600.0
# The lines that say what went wrong, most telling first (Result.error_line).
_ERROR_LINES = (
    re.compile(r"^(?:\w+\.)*\w*(?:Error|Exception): \S"),  # a Python exception
    re.compile(
        r"(?:^|: )(?:fatal )?error(?: [A-Z]*\d+)?: |undefined reference to|"
        r"^CMake Error|^nvcc fatal|^ld: |collect2: error|"
        r"\bCUDA error\b|\bcuda\w*Error\w+|\bCUDA_ERROR_[A-Z_]+"
    ),
    re.compile(r"(?i)\berror\b(?!: subprocess-exited-with-error)(?!s? originates)"),
)
_ERROR_LINE_SHOWN = 300
# Bytes of each stream kept in memory: the first and last half of this.
OUTPUT_LIMIT = 32 << 20
# After killing a group, how long to wait for the child to be reaped.
_REAP_TIMEOUT = 5.0
_PR_SET_CHILD_SUBREAPER = 36
# The children running now, from every thread: never strays of another command.
_live: set[int] = set()
_live_lock = threading.Lock()


@dataclass(frozen=True)
class Result:
    """What one finished (or killed) command did."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration: float
    timed_out: bool = False
    env_set: tuple[tuple[str, str], ...] = ()
    env_unset: tuple[str, ...] = ()
    cwd: str | None = None
    # Processes the command left running after it exited (killed by the gate), as "pid cmd".
    strays: tuple[str, ...] = ()
    # Not run: an identical earlier build was reused (gate.buildcache); its cache key.
    reused: str | None = None
    # Some output was cut (more than the run's output limit): the middle is missing.
    cut: bool = False

    @property
    def ok(self) -> bool:
        """Exit status 0 and not killed."""
        return self.returncode == 0 and not self.timed_out

    def command_line(self) -> str:
        """The command as a person would type it, with the environment changes first."""
        return command_line(self.argv, self.env_set, self.env_unset)

    def output(self) -> str:
        """stdout and stderr together, as a log file holds them."""
        if self.stdout and self.stderr:
            sep = "" if self.stdout.endswith("\n") else "\n"
            return f"{self.stdout}{sep}{self.stderr}"
        return self.stdout or self.stderr

    def last_line(self) -> str:
        """The last non-empty line of the output: usually the tool's own error."""
        for line in reversed(self.output().splitlines()):
            if line.strip():
                return line.strip()
        return ""

    def error_line(self, containing: str | None = None) -> str:
        """The line of the output that says what went wrong, else the last line.

        The last line is often a tool's epilogue ("hint: See above for details.", "ninja:
        build stopped"); the error is the last line holding ``containing`` (any case: a
        known CUDA runtime message), else the last Python exception line, else the last
        compiler or linker error or CUDA error, else the last line mentioning an error.
        """
        lines = [line.strip() for line in self.output().splitlines() if line.strip()]
        if containing:
            held = [line for line in lines if containing.lower() in line.lower()]
            if held:
                return held[-1][:_ERROR_LINE_SHOWN]
        for pattern in _ERROR_LINES:
            found = [line for line in lines if pattern.search(line)]
            if found:
                return found[-1][:_ERROR_LINE_SHOWN]
        return self.last_line()[:_ERROR_LINE_SHOWN]

    def describe_failure(
        self, label: str, timeout: float | None = None, log: str | None = None
    ) -> str:
        """One line: killed after the timeout, or the exit status and the line that says what
        went wrong (:meth:`error_line`), and the log file holding the whole output."""
        where = f" (log: {log})" if log else ""
        if self.timed_out:
            limit = f" within {timeout:g} s" if timeout is not None else ""
            return f"{label} did not finish{limit}; its processes were killed{where}"
        said = self.error_line() or "no output"
        return f"{label} failed with exit status {self.returncode}: {said}{where}"


def command_line(
    argv: Sequence[str],
    env_set: Sequence[tuple[str, str]] = (),
    env_unset: Sequence[str] = (),
) -> str:
    """A command as a person would type it, with the environment changes first."""
    parts: list[str] = []
    if env_unset or env_set:
        parts.append("env")
        parts += [f"-u {shlex.quote(name)}" for name in env_unset]
        parts += [shlex.quote(f"{k}={v}") for k, v in env_set]
    parts.append(shlex.join(argv))
    return " ".join(parts)


def which(tool: str, *, extra_dirs: Sequence[str | os.PathLike[str]] = ()) -> str:
    """Absolute path of ``tool`` from PATH, then ``extra_dirs``; ToolError when absent."""
    found = shutil.which(tool)
    if found:
        return found
    for directory in extra_dirs:
        candidate = Path(directory) / tool
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise ToolError(f"{tool} not found on PATH", hint="install it or put it on PATH")


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
    container's removal (:mod:`gate.watchdog`).

    ``env_set`` and ``env_unset`` change the environment of this child only, on top
    of ``base_env`` (default: this process's environment without the gate's secrets).
    On timeout the child's whole process group is killed and ``timed_out`` is set.
    """
    args = tuple(os.fspath(a) for a in argv)
    if not args:
        raise ToolError("internal error: an empty command")
    if cwd is not None and not Path(cwd).is_dir():
        raise ToolError(f"{args[0]}: working folder {os.fspath(cwd)} does not exist")
    env = child_environment(os.environ if base_env is None else base_env)
    for name in env_unset:
        env.pop(name, None)
    env.update(env_set or {})
    _become_subreaper()
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        before, child = _start(args, out, err, cwd, env, on_abandon=on_abandon)
        timed_out = False
        limit = OUTPUT_LIMIT if output_limit is None else output_limit
        pump = Pump(sink, (out.fileno(), err.fileno()), limit) if sink is not None else None
        report = _heartbeat if claim_strays and _on_main_thread() else None
        ticks: list[tuple[float, Callable[[float], None]]] = []
        if report is not None:
            ticks.append((HEARTBEAT_EVERY, lambda t: report(t, args, _tail_line(out, err))))
        if pump is not None:
            ticks.append((_PUMP_EVERY, lambda _: pump.pump()))
        try:
            timed_out = not _wait(child, timeout, ticks)
            if timed_out and on_timeout is not None:
                on_timeout()
        except BaseException:
            # Interrupted (a signal): the group goes, and what escaped it too.
            _kill_group(child.pid)
            child.wait(timeout=_REAP_TIMEOUT)
            with _live_lock:
                _ended(child.pid)
                if claim_strays:
                    _kill_strays(before | _live, child.pid, _live)
            raise
        finally:
            # Whatever is left in the child's group goes too, finished or not.
            _kill_group(child.pid)
            if report is not None and _heartbeat_end is not None:
                _heartbeat_end()
        if timed_out:
            child.wait(timeout=_REAP_TIMEOUT)
        duration = time.monotonic() - start
        if pump is not None:
            pump.pump(final=True)
        strays = _after(before, child.pid, claim=claim_strays, settle=settle)
        (stdout, cut_out), (stderr, cut_err) = _read_back(out, limit), _read_back(err, limit)
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
        with _live_lock:
            _start_watchdog()  # before the first command's orphans are listed: never a stray
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
            _live.add(child.pid)
            _tell_watchdog(_started_line(child.pid, args, on_abandon, env))
    except FileNotFoundError as e:
        raise ToolError(f"{args[0]} not found", hint="is it installed and on PATH?") from e
    except PermissionError as e:
        raise ToolError(f"{args[0]} is not executable: {e.strerror}") from e
    except OSError as e:
        raise ToolError(f"{args[0]} could not be started: {e.strerror or e}") from e
    return before, child


# The watchdog (gate.watchdog): its pid, the pipe's end the gate writes, the environment it
# started with (a cleanup's is said as changes to it). Started once; -2: gone, not restarted.
_watchdog_pid = -1
_watchdog_fd = -1
_watchdog_env: dict[str, str] = {}
_watchdog_process: list[subprocess.Popen[bytes]] = []  # kept: never collected while it runs
# At exit, with a command still running, how long the watchdog is given to end it.
_WATCHDOG_EXIT = 2.0


def _start_watchdog() -> None:
    """Start the watchdog with the first command (under ``_live_lock``), where /proc is.

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
    with _live_lock:
        if _watchdog_fd >= 0:
            os.close(_watchdog_fd)
        _watchdog_fd = -2
        running = bool(_live)
    if running:
        for process in _watchdog_process:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=_WATCHDOG_EXIT)
    with warnings.catch_warnings():
        # One still starting up ends on its own; the gate does not wait for that.
        warnings.simplefilter("ignore", ResourceWarning)
        _watchdog_process.clear()


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
    """Write ``line`` to the watchdog (under ``_live_lock``: whole lines, one at a time);
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


def _ended(pid: int) -> None:
    """The command ``pid`` ran is over (under ``_live_lock``): neither a running command
    nor the watchdog's to end."""
    _live.discard(pid)
    _tell_watchdog(watchdog.ended(pid))


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
            running = tuple(_live)
            break
        except RuntimeError:  # the set changed size while being copied
            continue
    else:
        return
    for pid in running:
        _kill_group(pid)


# While a command of the gate's main line runs longer than this, a heartbeat (elapsed
# seconds, the command, its last output line) goes to the callback the pipeline set.
HEARTBEAT_EVERY = 30.0
Heartbeat = Callable[[float, tuple[str, ...], str], None]
_heartbeat: Heartbeat | None = None
_heartbeat_end: Callable[[], None] | None = None
# How often a sink gets what a command wrote since: often enough for `tail -f`.
_PUMP_EVERY = 0.25


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


def _tail_line(*handles: IO[bytes]) -> str:
    """The last non-empty line written so far to either output file."""
    last = ""
    for handle in handles:
        try:
            size = os.fstat(handle.fileno()).st_size
            data = os.pread(handle.fileno(), 4096, max(0, size - 4096))
        except OSError:
            continue
        lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
        last = next((line for line in reversed(lines) if line), last)
    return last[:_ERROR_LINE_SHOWN]


def _wait(
    child: subprocess.Popen[bytes],
    timeout: float,
    ticks: Sequence[tuple[float, Callable[[float], None]]] = (),
) -> bool:
    """Wait for ``child`` to exit (True) or ``timeout`` seconds to pass (False); each
    ``(every, tick)`` of ``ticks`` is called every ``every`` seconds meanwhile, with the
    time elapsed.

    Popen.wait(timeout=...) polls with sleeps of up to 50 ms, which adds about 25 ms to
    every command; a pidfd (Linux 5.3+) wakes the moment the child exits.
    """
    start = time.monotonic()
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        pidfd = None
    due = [every for every, _ in ticks]
    try:
        while True:
            now = time.monotonic() - start
            left = timeout - now
            if left <= 0:
                return False
            step = max(0.0, min([left, *(d - now for d in due)]))
            if pidfd is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=step)
                    return True
            else:
                poller = select.poll()
                poller.register(pidfd, select.POLLIN)
                if poller.poll(min(max(0, int(step * 1000)), 2**31 - 1)):
                    child.wait()
                    return True
            now = time.monotonic() - start
            for i, (every, tick) in enumerate(ticks):
                if due[i] <= now < timeout:
                    tick(now)
                    due[i] += every
                    if due[i] <= now:  # a slow tick: the next one a whole interval on
                        due[i] = now + every
    finally:
        if pidfd is not None:
            os.close(pidfd)


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


def _read_back(handle: IO[bytes], limit: int) -> tuple[str, bool]:
    """A stream's bytes, decoded, and whether it was cut: beyond ``limit`` only the head
    and the tail are kept."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    if size <= limit:
        data = handle.read()
        return data.decode("utf-8", errors="replace"), False
    half = limit // 2
    head = handle.read(half)
    handle.seek(size - half)
    tail = handle.read(half)
    note = f"\n[cuda-gate: {size - 2 * half} bytes of output cut here]\n"
    return head.decode("utf-8", "replace") + note + tail.decode("utf-8", "replace"), True


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
    found.discard(_watchdog_pid)  # the gate's own, never a stray
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
    found.discard(_watchdog_pid)
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
    with _live_lock:
        _ended(pid)
        return _kill_strays(before | _live, pid, _live) if claim else ()


def _settle(before: set[int], seconds: float) -> None:
    """Wait up to ``seconds`` for the processes adopted since ``before`` to exit, reaping
    each as it does (never one another thread's command is waiting for)."""
    end = time.monotonic() + seconds
    while True:
        with _live_lock:
            left = _orphans() - before - _live
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
