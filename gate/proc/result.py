"""What a command did (:class:`Result`), how a person would type it, and where a tool is.

:func:`gate.proc.run` returns a :class:`Result`; its one-line failure message
(:meth:`Result.describe_failure`) is the one every caller shows, so none builds its own.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gate.errors import ToolError

# The lines that say what went wrong, most telling first (Result.error_line).
_ERROR_LINES = (
    re.compile(r"^(?:\w+\.)*\w*(?:Error|Exception): \S"),  # a Python exception
    re.compile(
        r"(?:^|: )(?:fatal )?error(?: [A-Z]*\d+)?: |undefined reference to|"
        r"^CMake Error|^nvcc fatal|(?:^|/)ld(?:\.\w+)?: |collect2: error|"
        r"\bCUDA error\b|\bcuda\w*Error\w+|\bCUDA_ERROR_[A-Z_]+"
    ),
    re.compile(r"(?i)\berror\b(?!: subprocess-exited-with-error)(?!s? originates)"),
)
# Lines that only say that something failed, written after the line that says what: the
# linker driver's, the build tool's and the Python packaging front end's epilogues. They
# are quoted only when nothing else says more (`ld: cannot find -lcudart_static` rather
# than `collect2: error: ld returned 1 exit status`).
_EPILOGUE = re.compile(
    r"collect2: error: ld returned|\bld returned \d+ exit status|clang\S*: error: linker "
    r"command failed|^ninja: build stopped|^FAILED: |^g?make(?:\[\d+\])?: \*\*\*|"
    r"^error: command '[^']*' failed with exit (?:code|status)|\bCalledProcessError: Command|"
    r"returned non-zero exit status|Error compiling objects for extension|"
    r"^error: (?:metadata-generation-failed|subprocess-exited-with-error)|"
    r"^\d+ errors? detected in the compilation|^-- Configuring incomplete|"
    r"^CMake Error: (?:Generator|The following)"
)
LINE_SHOWN = 300  # characters of a line quoted (an error line, a heartbeat's last line)


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
    # Not run: an identical earlier build was reused (gate.tools.buildcache); its cache key.
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
        compiler or linker error or CUDA error, else the last line mentioning an error; a
        line that only says a step failed (:data:`_EPILOGUE`) counts only when no other does.
        """
        lines = [line.strip() for line in self.output().splitlines() if line.strip()]
        if containing:
            held = [line for line in lines if containing.lower() in line.lower()]
            if held:
                return held[-1][:LINE_SHOWN]
        telling = [i for i, line in enumerate(lines) if not _EPILOGUE.search(line)]
        for candidates in (telling, range(len(lines))):
            for pattern in _ERROR_LINES:
                found = [i for i in candidates if pattern.search(lines[i])]
                if found:
                    return _with_message(lines, found[-1])[:LINE_SHOWN]
        return self.last_line()[:LINE_SHOWN]

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


def _with_message(lines: Sequence[str], at: int) -> str:
    """Line ``at``, with the next line joined where the tool writes its message below a
    heading (``CMake Error at CMakeLists.txt:3 (project):`` then the message)."""
    line = lines[at]
    if line.startswith("CMake Error") and line.endswith(":") and at + 1 < len(lines):
        return f"{line} {lines[at + 1]}"
    return line


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
