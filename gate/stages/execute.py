"""The execute stage: run an entry point twice, native SASS only and forced PTX JIT.

Native: ``CUDA_DISABLE_PTX_JIT=1`` and the JIT cache made unusable. On a real H200 a
PTX-only program passed under ``CUDA_DISABLE_PTX_JIT=1`` when the default cache was
warm from an earlier run (CUDA-FACTS.md), so the native run also gets
``CUDA_CACHE_DISABLE=1`` and a fresh, empty ``CUDA_CACHE_PATH``: nothing compiled
from PTX, now or earlier, can stand in for SASS.

JIT: ``CUDA_FORCE_PTX_JIT=1`` with ``CUDA_CACHE_DISABLE=1`` and its own empty cache
folder, checked empty afterwards, so the run neither reuses nor leaves cache state.

Each run is a fresh process; the variables apply to that child only.
"""

from __future__ import annotations

import enum
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gate import proc

DEFAULT_TIMEOUT = 300.0


class ExecPath(enum.Enum):
    """The two execution paths the gate proves separately."""

    NATIVE = "native"
    JIT = "jit"

    @property
    def log_name(self) -> str:
        """The seed's log file name for this path."""
        return "native.log" if self is ExecPath.NATIVE else "ptx-jit.log"

    @property
    def title(self) -> str:
        """Human name of the path."""
        return "native SASS (PTX JIT disabled)" if self is ExecPath.NATIVE else "forced PTX JIT"


# Variables each path sets and removes. CUDA_CACHE_PATH is added per run (a fresh folder).
PATH_ENV: dict[ExecPath, tuple[dict[str, str], tuple[str, ...]]] = {
    ExecPath.NATIVE: (
        {"CUDA_DISABLE_PTX_JIT": "1", "CUDA_CACHE_DISABLE": "1"},
        ("CUDA_FORCE_PTX_JIT",),
    ),
    ExecPath.JIT: (
        {"CUDA_FORCE_PTX_JIT": "1", "CUDA_CACHE_DISABLE": "1"},
        ("CUDA_DISABLE_PTX_JIT",),
    ),
}


class RuntimeFailure(enum.Enum):
    """CUDA runtime errors worth telling apart, matched on the runtime's own text."""

    NO_KERNEL_IMAGE = (209, "no kernel image is available for execution on the device")
    JIT_DISABLED = (223, "PTX JIT compilation was disabled")
    UNSUPPORTED_PTX = (222, "the provided PTX was compiled with an unsupported toolchain")
    INVALID_PTX = (218, "a PTX JIT compilation failed")
    JIT_NOT_FOUND = (221, "PTX JIT compiler library not found")
    NO_DEVICE = (100, "no CUDA-capable device is detected")
    DRIVER_TOO_OLD = (35, "CUDA driver version is insufficient for CUDA runtime version")

    @property
    def code(self) -> int:
        """The cudaError_t value."""
        return int(self.value[0])

    @property
    def text(self) -> str:
        """The runtime's message."""
        return str(self.value[1])


def classify(log: str) -> RuntimeFailure | None:
    """The first known runtime failure whose message appears in ``log``."""
    lowered = log.lower()
    for failure in RuntimeFailure:
        if failure.text.lower() in lowered:
            return failure
    return None


@dataclass(frozen=True)
class EntryPoint:
    """A program to run under both paths, and what a good run looks like."""

    name: str
    argv: tuple[str, ...]
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    expected_returncode: int = 0
    expected_output: str = r"(?m)^PASS$"


@dataclass(frozen=True)
class Execution:
    """One entry point run on one path."""

    entry_point: EntryPoint
    path: ExecPath
    result: proc.Result
    log_name: str
    output_ok: bool
    cache_clean: bool
    failure: RuntimeFailure | None

    @property
    def passed(self) -> bool:
        """Exit status as expected, expected output present, not killed, no cache left."""
        return (
            not self.result.timed_out
            and self.result.returncode == self.entry_point.expected_returncode
            and self.output_ok
            and self.cache_clean
        )

    def reason(self) -> str:
        """Why it failed (or 'passed'), in one phrase."""
        if self.passed:
            return "passed"
        if self.result.timed_out:
            return f"killed after {self.entry_point.timeout:g} s"
        if self.failure is not None:
            return f"{self.failure.text} (error {self.failure.code})"
        if self.result.returncode != self.entry_point.expected_returncode:
            last = self.result.last_line()
            return f"exit status {self.result.returncode}" + (f": {last}" if last else "")
        if not self.output_ok:
            return f"expected output /{self.entry_point.expected_output}/ not found"
        return "the run left files in its JIT cache folder"


def run_entry_point(entry: EntryPoint, path: ExecPath, log_name: str | None = None) -> Execution:
    """Run ``entry`` once on ``path`` in a fresh process with its own empty JIT cache folder."""
    env_set, env_unset = PATH_ENV[path]
    cache_dir = Path(tempfile.mkdtemp(prefix=f"cuda-gate-{path.value}-cache-"))
    try:
        result = proc.run(
            entry.argv,
            env_set={**dict(entry.env), **env_set, "CUDA_CACHE_PATH": str(cache_dir)},
            env_unset=env_unset,
            cwd=entry.cwd,
            timeout=entry.timeout,
        )
        cache_clean = not any(cache_dir.rglob("*"))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    output = result.output()
    return Execution(
        entry_point=entry,
        path=path,
        result=result,
        log_name=log_name or path.log_name,
        output_ok=re.search(entry.expected_output, output) is not None,
        cache_clean=cache_clean,
        failure=None if result.ok else classify(output),
    )


def run_both(entry: EntryPoint, log_names: Sequence[str] | None = None) -> tuple[Execution, ...]:
    """Native first, then JIT; each a fresh process."""
    names = list(log_names) if log_names else [p.log_name for p in ExecPath]
    return tuple(run_entry_point(entry, p, n) for p, n in zip(ExecPath, names, strict=True))


def log_text(execution: Execution) -> str:
    """The log file for one run: the exact command, then everything it printed."""
    r = execution.result
    header = [
        f"# entry point: {execution.entry_point.name}",
        f"# path: {execution.path.title}",
        f"# command: {r.command_line()}",
        f"# cwd: {r.cwd or '.'}",
        f"# exit status: {'killed (timeout)' if r.timed_out else r.returncode}",
        f"# duration: {r.duration:.3f} s",
        f"# JIT cache folder empty afterwards: {'yes' if execution.cache_clean else 'NO'}",
        "",
    ]
    return "\n".join(header) + r.output()
