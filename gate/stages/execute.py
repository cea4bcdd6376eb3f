"""Stage 5, execute: every entry point twice, native SASS only and forced PTX JIT.

Native: ``CUDA_DISABLE_PTX_JIT=1`` and the JIT cache made unusable. On a real H200 a
PTX-only program passed under ``CUDA_DISABLE_PTX_JIT=1`` when the default cache was
warm from an earlier run (CUDA-FACTS.md), so the native run also gets
``CUDA_CACHE_DISABLE=1`` and a fresh, empty ``CUDA_CACHE_PATH``: nothing compiled
from PTX, now or earlier, can stand in for SASS.

JIT: ``CUDA_FORCE_PTX_JIT=1`` with ``CUDA_CACHE_DISABLE=1`` and its own empty cache
folder, checked empty afterwards, so the run neither reuses nor leaves cache state.

Each run is a fresh process; the variables apply to that child only. glibc's loader
log records every shared library each run really loaded (gate.stages.loaded); the
libraries with device code are judged (gate.stages.libraries), each run is compared
with what inspection predicted (gate.stages.predict), and where the whole program
cannot run under forced JIT because of a library outside the project, the project's
own PTX is loaded by the driver's JIT module by module (gate.stages.jitproof).
"""

from __future__ import annotations

import enum
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from gate import proc
from gate.config import Config, EntryPoint
from gate.errors import GateError
from gate.evidence import EvidenceDir, safe_name
from gate.fsutil import sha256_file
from gate.reader.targets import Capability, Version
from gate.record import Cause, Check, ExecPath, Execution, LoadedLibrary
from gate.stages import jitproof, libraries, loaded, predict
from gate.stages.build import SMOKE
from gate.stages.inspect import Inspected

DEFAULT_TIMEOUT = 300.0

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

    @property
    def cause(self) -> Cause:
        """The ranked cause this failure stands for."""
        return _FAILURE_CAUSES[self]

    @property
    def is_code_failure(self) -> bool:
        """The device had no usable code for a kernel (what inspection predicts)."""
        return self in (
            RuntimeFailure.NO_KERNEL_IMAGE,
            RuntimeFailure.JIT_DISABLED,
            RuntimeFailure.UNSUPPORTED_PTX,
            RuntimeFailure.INVALID_PTX,
        )


_FAILURE_CAUSES = {
    RuntimeFailure.NO_KERNEL_IMAGE: Cause.NO_KERNEL_IMAGE,
    RuntimeFailure.JIT_DISABLED: Cause.JIT_DISABLED,
    RuntimeFailure.UNSUPPORTED_PTX: Cause.UNSUPPORTED_PTX,
    RuntimeFailure.INVALID_PTX: Cause.INVALID_PTX,
    RuntimeFailure.JIT_NOT_FOUND: Cause.INVALID_PTX,
    RuntimeFailure.NO_DEVICE: Cause.EXIT_STATUS,
    RuntimeFailure.DRIVER_TOO_OLD: Cause.DRIVER_TOO_OLD,
}


def classify(log: str) -> RuntimeFailure | None:
    """The first known runtime failure whose message appears in ``log``."""
    lowered = log.lower()
    for failure in RuntimeFailure:
        if failure.text.lower() in lowered:
            return failure
    return None


@dataclass(frozen=True)
class Run:
    """One entry point run on one path: the process, the verdict on it, what it loaded."""

    entry_point: EntryPoint
    path: ExecPath
    result: proc.Result
    log_name: str
    output_ok: bool
    cache_clean: bool
    failure: RuntimeFailure | None
    loaded: tuple[Path, ...] = ()

    def record(self, log_sha256: str | None = None) -> Execution:
        """The run as the run record keeps it (which decides whether it passed)."""
        return Execution(
            entry_point=self.entry_point.name,
            path=self.path,
            command=self.result.command_line(),
            returncode=None if self.result.timed_out else self.result.returncode,
            timed_out=self.result.timed_out,
            duration=self.result.duration,
            log=self.log_name,
            log_sha256=log_sha256,
            output_ok=self.output_ok,
            expected_returncode=self.entry_point.expected_returncode,
            cache_clean=self.cache_clean,
            failure=self.failure.text if self.failure else None,
        )

    @property
    def passed(self) -> bool:
        """As the run record decides it."""
        return self.record().passed

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

    def cause(self) -> Cause | None:
        """The ranked cause of a failed run."""
        if self.passed:
            return None
        if self.result.timed_out:
            return Cause.TIMEOUT
        if self.failure is not None:
            return self.failure.cause
        if self.result.returncode != self.entry_point.expected_returncode:
            return Cause.EXIT_STATUS
        return Cause.OUTPUT if not self.output_ok else Cause.JIT_CACHE


def run_entry_point(
    entry: EntryPoint, path: ExecPath, log_name: str | None = None, *, record_loaded: bool = True
) -> Run:
    """Run ``entry`` once on ``path`` in a fresh process with its own empty JIT cache folder."""
    env_set, env_unset = PATH_ENV[path]
    cache_dir = Path(tempfile.mkdtemp(prefix=f"cuda-gate-{path.value}-cache-"))
    log_dir = Path(tempfile.mkdtemp(prefix="cuda-gate-ld-"))
    try:
        extra = loaded.loader_env(log_dir) if record_loaded else {}
        result = proc.run(
            entry.argv,
            env_set={**dict(entry.env), **extra, **env_set, "CUDA_CACHE_PATH": str(cache_dir)},
            env_unset=env_unset,
            cwd=entry.cwd,
            timeout=entry.timeout,
        )
        cache_clean = not any(cache_dir.rglob("*"))
        found = loaded.parse_loaded(log_dir, cwd=Path(entry.cwd or ".")) if record_loaded else ()
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
        shutil.rmtree(log_dir, ignore_errors=True)
    if record_loaded:
        # The loader variables are the gate's instrument, not part of the command to repeat.
        names = set(loaded.loader_env(log_dir))
        result = replace(result, env_set=tuple((k, v) for k, v in result.env_set if k not in names))
    output = result.output()
    return Run(
        entry_point=entry,
        path=path,
        result=result,
        log_name=log_name or path.log_name,
        output_ok=re.search(entry.expected_output, output) is not None,
        cache_clean=cache_clean,
        failure=None if result.ok else classify(output),
        loaded=tuple(lib.path for lib in found),
    )


def run_both(entry: EntryPoint, log_names: Sequence[str] | None = None) -> tuple[Run, ...]:
    """Native first, then JIT; each a fresh process."""
    names = list(log_names) if log_names else [p.log_name for p in ExecPath]
    return tuple(run_entry_point(entry, p, n) for p, n in zip(ExecPath, names, strict=True))


def log_text(run: Run) -> str:
    """The log file for one run: the exact command, then everything it printed."""
    r = run.result
    header = [
        f"# entry point: {run.entry_point.name}",
        f"# path: {run.path.title}",
        f"# command: {r.command_line()}",
        f"# cwd: {r.cwd or '.'}",
        f"# exit status: {'killed (timeout)' if r.timed_out else r.returncode}",
        f"# duration: {r.duration:.3f} s",
        f"# JIT cache folder empty afterwards: {'yes' if run.cache_clean else 'NO'}",
    ]
    if r.strays:
        header.append("# left running after it exited (killed): " + "; ".join(r.strays))
    return "\n".join([*header, ""]) + r.output()


@dataclass(frozen=True)
class ExecuteOutcome:
    """Every run, the loaded libraries judged, the prediction checks, the JIT proofs."""

    executions: tuple[Execution, ...]
    loaded: tuple[LoadedLibrary, ...]
    checks: tuple[Check, ...]
    diagnoses: tuple[str, ...]
    paths_proved: tuple[str, ...]
    commands: tuple[proc.Result, ...] = ()
    failure: GateError | None = None


def entry_points(
    config: Config, smoke: Path | None, timeout: float, tools: Mapping[str, str]
) -> list[EntryPoint]:
    """The smoke program (the seed's log names) and the configured entry points, in order."""
    out = [EntryPoint(SMOKE, (str(smoke),), timeout=timeout)] if smoke is not None else []
    return out + [spec.entry_point(tools) for spec in config.entry_points]


def entry_names(config: Config) -> list[str]:
    """The entry points' names, before anything is built (for a run that stops early)."""
    return ([SMOKE] if config.smoke else []) + [spec.name for spec in config.entry_points]


def skipped_checks(names: Sequence[str], reason: str) -> list[Check]:
    """Every entry point and path as a skipped JUnit case with the one reason."""
    return [
        Check(f"{name} [{path.value}]", f"gate.execute.{path.value}", False, reason, skipped=True)
        for name in names
        for path in ExecPath
    ]


def skipped(
    evidence: EvidenceDir, points: Sequence[EntryPoint], artifacts: Sequence[Inspected], reason: str
) -> list[Check]:
    """No device: every run skipped with the one reason; codeless artifacts unproven."""
    checks = skipped_checks([entry.name for entry in points], reason)
    checks += [
        Check(
            f"{a.name}: device code",
            "gate.inspect",
            False,
            f"no device code of its own: covered only by execution, {reason}",
            skipped=True,
        )
        for a in artifacts
        if not a.smoke and not a.listing.entries
    ]
    evidence.write_text(
        "execution-status.txt", f"native=not run\nptx_jit=not run\nreason={reason}\n"
    )
    return checks


def run(
    evidence: EvidenceDir,
    *,
    config: Config,
    points: Sequence[EntryPoint],
    artifacts: Sequence[Inspected],
    capability: Capability,
    driver_cuda: Version | None,
    use_cache: bool = True,
    side_by_side: bool = True,
) -> ExecuteOutcome:
    """Run every entry point on both paths, judge what they loaded, check the predictions.

    What each run loaded is read while the next entry point runs (libraries.Prefetch).
    With ``side_by_side`` (the device is in the default compute mode) the gate's own
    programs, the smoke program's two paths and the PTX proofs, run at once; else one
    process at a time, as exclusive-process mode admits.
    """
    with libraries.Prefetch(use_cache=use_cache) as prefetch:
        runs = _run_points(evidence, points, prefetch, side_by_side=side_by_side)
        judged = libraries.judge(
            evidence,
            runs=runs,
            artifacts=artifacts,
            cap=capability,
            driver=driver_cuda,
            config=config,
            use_cache=use_cache,
            prefetch=prefetch,
        )
    checks = list(judged.checks)
    predictions = predict.predict_all(runs, artifacts, judged, capability, driver_cuda)
    # The PTX loads wait on the driver in processes of their own: write the loaded
    # libraries' evidence (torch's come to megabytes of JSON) meanwhile.
    pending = jitproof.start(predictions, artifacts, capability, side_by_side=side_by_side)
    try:
        libraries.write_views(evidence, judged, capability)
    finally:
        proofs = pending.finish(evidence)
    for done in runs:
        checks.append(execution_check(done, predict.excuse(done, predictions, proofs)))
    checks += [p.check(runs) for p in predictions]
    checks += proofs.checks
    checks += libraries.codeless_checks(artifacts, runs, judged)
    executions = tuple(
        r.record(
            sha256_file(evidence.path(r.log_name)) if evidence.path(r.log_name).exists() else None
        )
        for r in runs
    )
    return ExecuteOutcome(
        executions=executions,
        loaded=judged.records,
        checks=tuple(checks),
        diagnoses=tuple(predict.diagnose(runs, predictions)),
        paths_proved=tuple(predict.paths_proved(runs, predictions, proofs)),
        commands=proofs.commands,
    )


def _run_points(
    evidence: EvidenceDir,
    points: Sequence[EntryPoint],
    prefetch: libraries.Prefetch,
    *,
    side_by_side: bool,
) -> list[Run]:
    """Every entry point on both paths, each run's log and execution-status.txt written,
    and what each run loaded handed to ``prefetch`` while the next one runs."""
    runs: list[Run] = []
    status: list[str] = []
    for entry in points:
        smoke = entry.name == SMOKE
        names = [
            path.log_name if smoke else f"entry-{safe_name(entry.name)}.{path.log_name}"
            for path in ExecPath
        ]
        if smoke and side_by_side:
            # The gate's own program: both paths at once (separate processes, caches and
            # environments; each mostly CUDA start-up). The project's entry
            # points run one at a time, as they would alone.
            with ThreadPoolExecutor(2) as pool:
                pair = list(pool.map(run_entry_point, [entry] * len(names), ExecPath, names))
        else:
            pair = [run_entry_point(entry, p, n) for p, n in zip(ExecPath, names, strict=True)]
        for done in pair:
            evidence.write_text(done.log_name, log_text(done))
            prefetch.add(done.loaded)  # read while the next entry point runs
        runs += pair
        codes = {
            r.path: "timeout" if r.result.timed_out else str(r.result.returncode) for r in pair
        }
        line = f"native={codes[ExecPath.NATIVE]}\nptx_jit={codes[ExecPath.JIT]}\n"
        status.append(line if smoke else f"{entry.name}: {line.replace(chr(10), ' ').strip()}\n")
    evidence.write_text("execution-status.txt", "".join(status))
    return runs


def execution_check(done: Run, excuse: str | None = None) -> Check:
    """One JUnit case per entry point and path, classname by path, log in system-out.

    ``excuse`` (from gate.stages.predict) turns an explained failure of the whole-program
    JIT run into a skip: a library outside the project ships no PTX, as predicted, and
    the project's own PTX was proved by loading it.
    """
    name = f"{done.entry_point.name} [{done.path.value}]"
    classname = f"gate.execute.{done.path.value}"
    message = f"{done.path.title}: {done.reason()}"
    if excuse is not None and not done.passed:
        return Check(
            name,
            classname,
            False,
            f"{message}; {excuse}",
            duration=done.result.duration,
            output=done.result.output(),
            skipped=True,
        )
    return Check(
        name,
        classname,
        done.passed,
        message,
        duration=done.result.duration,
        output=done.result.output(),
        cause=done.cause(),
    )
