"""Run records built in memory, for tests of what reads and renders them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gate.record import Device, Environment, Execution, LoadedLibrary, RunInfo, RunRecord
from gate.rules.causes import Cause, ExecPath
from gate.rules.verdict import Check, CheckState, Diagnosed, Stage
from gate.system.git import SourceInfo

WHEN = datetime(2026, 11, 29, 18, 0, 0, tzinfo=UTC)
RUN = RunInfo("20261129T180000Z-abc123", "h200-01", "h200")
SOURCE = SourceInfo("a" * 40, False, "acme/kernels")


# One check of each kind a report shows: passed, passed with output, failed with a cause,
# not run.
MIXED_CHECKS = (
    Check(
        "check: SASS for sm_90", "gate.inspect", CheckState.PASSED, "SASS for sm_90 present", 0.01
    ),
    Check(
        "check [native]",
        "gate.execute.native",
        CheckState.PASSED,
        "native: passed",
        0.25,
        output="PASS\n",
    ),
    Check(
        "check [jit]",
        "gate.execute.jit",
        CheckState.FAILED,
        "forced PTX JIT: no kernel image",
        0.5,
        output="no kernel image is available for execution on the device\n",
        cause=Cause.NO_KERNEL_IMAGE,
    ),
    Check("other [native]", "gate.execute.native", CheckState.NOT_RUN, "not run: no device"),
)


def execution(name: str, path: ExecPath, *, passed: bool = True) -> Execution:
    """One run that passed (or exited 1)."""
    return Execution(
        name, path, f"./{name}", 0 if passed else 1, False, 0.1, f"{name}.log", None, passed
    )


def both(name: str = "smoke") -> tuple[Execution, ...]:
    """The two passing runs of one entry point."""
    return (execution(name, ExecPath.NATIVE), execution(name, ExecPath.JIT))


def make_record(
    checks: Sequence[Check] = (),
    *,
    executions: Sequence[Execution] = (),
    stages: Sequence[Stage] = (),
    loaded: Sequence[LoadedLibrary] = (),
    diagnoses: Sequence[str] = (),
    paths: Sequence[str] = (),
    run: RunInfo = RUN,
    source: SourceInfo = SOURCE,
    finished: datetime = WHEN,
) -> RunRecord:
    """A run record of an H200 machine with the given checks and runs."""
    return RunRecord(
        tool_version="0.1.0",
        started=WHEN,
        finished=finished,
        run=run,
        source=source,
        environment=Environment("x86_64", "Debian 12", None, None, (), None),
        device=Device(None, None, None, None),
        stages=tuple(stages),
        loaded_libraries=tuple(loaded),
        executions=tuple(executions),
        checks=tuple(checks),
        diagnoses=tuple(Diagnosed(d) for d in diagnoses),
        paths_proved=tuple(paths),
    )


def verdict_record(accepted: bool, name: str = "smoke", **fields: Any) -> RunRecord:
    """A record whose run passed, or whose native run failed ("native path failed")."""
    if accepted:
        check = Check(f"{name} [native]", "gate.execute.native", CheckState.PASSED, "passed")
        runs = both(name)
    else:
        check = Check(
            f"{name} [native]",
            "gate.execute.native",
            CheckState.FAILED,
            "native path failed",
            cause=Cause.EXIT_STATUS,
        )
        runs = (execution(name, ExecPath.NATIVE, passed=False), execution(name, ExecPath.JIT))
    return make_record((check,), executions=runs, **fields)


def write_record(folder: Path, record: RunRecord) -> Path:
    """``folder/result.json`` holding ``record``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(record.dumps(), encoding="utf-8")
    return folder
