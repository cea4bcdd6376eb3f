"""The one subprocess wrapper: every external command cuda-gate runs goes through here.

It resolves the tool, records the exact command line and the environment changes
(they go into the evidence), runs the child in a process group of its own with a
timeout that kills the whole group, and turns failures into typed errors carrying
the tool's own message. Nothing else in the package calls ``subprocess``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gate.errors import ToolError, ToolTimeoutError

DEFAULT_TIMEOUT = 600.0
# After killing a group, how long to wait for the pipes to close.
_REAP_TIMEOUT = 5.0


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

    @property
    def ok(self) -> bool:
        """Exit status 0 and not killed."""
        return self.returncode == 0 and not self.timed_out

    def command_line(self) -> str:
        """The command as a person would type it, with the environment changes first."""
        parts: list[str] = []
        if self.env_unset or self.env_set:
            parts.append("env")
            parts += [f"-u {shlex.quote(name)}" for name in self.env_unset]
            parts += [shlex.quote(f"{k}={v}") for k, v in self.env_set]
        parts.append(shlex.join(self.argv))
        return " ".join(parts)

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
) -> Result:
    """Run ``argv`` to completion or timeout; never raises for a non-zero exit.

    ``env_set`` and ``env_unset`` change the environment of this child only. On
    timeout the child's whole process group is killed and ``timed_out`` is set.
    """
    args = tuple(os.fspath(a) for a in argv)
    env = dict(os.environ if base_env is None else base_env)
    for name in env_unset:
        env.pop(name, None)
    env.update(env_set or {})
    start = time.monotonic()
    try:
        child = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError as e:
        raise ToolError(f"{args[0]} not found", hint="is it installed and on PATH?") from e
    except PermissionError as e:
        raise ToolError(f"{args[0]} is not executable: {e.strerror}") from e
    except OSError as e:
        raise ToolError(f"{args[0]} could not be started: {e.strerror or e}") from e
    timed_out = False
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(child)
        out, err = _drain(child)
    except BaseException:
        _kill_group(child)
        _drain(child)
        raise
    return Result(
        argv=args,
        returncode=child.returncode if child.returncode is not None else -9,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        duration=time.monotonic() - start,
        timed_out=timed_out,
        env_set=tuple(sorted((env_set or {}).items())),
        env_unset=tuple(env_unset),
        cwd=os.fspath(cwd) if cwd is not None else None,
    )


def run_checked(
    argv: Sequence[str | os.PathLike[str]],
    *,
    what: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    cwd: str | os.PathLike[str] | None = None,
) -> Result:
    """Like :func:`run`, but a non-zero exit or a timeout raises ToolError with its message."""
    result = run(argv, timeout=timeout, cwd=cwd)
    label = what or Path(result.argv[0]).name
    if result.timed_out:
        raise ToolTimeoutError(f"{label} did not finish within {timeout:g} s; it was killed")
    if result.returncode != 0:
        raise ToolError(
            f"{label} failed with exit status {result.returncode}: "
            f"{result.last_line() or 'no output'}"
        )
    return result


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()


def _drain(child: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Collect what a killed child printed; give up if something else holds the pipes."""
    try:
        return child.communicate(timeout=_REAP_TIMEOUT)
    except subprocess.TimeoutExpired:
        # A grandchild escaped the group (setsid) and keeps the pipes open.
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
        child.wait(timeout=_REAP_TIMEOUT)
        return b"", b""
