"""Stage 5, execute: every entry point twice, native SASS only and forced PTX JIT.

Each run (gate.stages.runs) is a fresh process with the path's variables for that
child only; the libraries with device code that the runs loaded are judged
(gate.stages.libraries), each run is compared with what inspection predicted
(gate.stages.predict), and where the whole program cannot run under forced JIT
because of a library outside the project, the project's own PTX is loaded by the
driver's JIT module by module (gate.stages.jitproof). With the launch recorder
(gate.launch.recorder) every run also records its modules and kernel launches, judged
for coverage, runtime modules and recorded routes (gate.launch.coverage).
"""

from __future__ import annotations

import contextlib
import functools
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from gate import proc
from gate.config import Config, EntryPoint, resolve_artifact_specs
from gate.errors import GateError
from gate.evidence import EvidenceDir, safe_name
from gate.fsutil import sha256_file
from gate.launch import coverage as launches
from gate.launch.recorder import Recorder
from gate.record import Execution, LoadedLibrary
from gate.rules.causes import ExecPath
from gate.rules.targets import Capability, Version
from gate.rules.verdict import Check, CheckState, Diagnosed
from gate.stages import jitproof, libraries, predict
from gate.stages.build import SMOKE
from gate.stages.inspected import Inspected
from gate.stages.runs import (
    DEFAULT_TIMEOUT,
    Instrument,
    Run,
    RunsIn,
    log_text,
    run_entry_point,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "ExecuteOutcome",
    "RunsIn",
    "SmokeAhead",
    "entry_points",
    "run",
    "skipped",
    "smoke_entry",
]


@dataclass(frozen=True)
class ExecuteOutcome:
    """Every run, the loaded libraries judged, the prediction checks, the JIT proofs."""

    executions: tuple[Execution, ...]
    loaded: tuple[LoadedLibrary, ...]
    checks: tuple[Check, ...]
    diagnoses: tuple[Diagnosed, ...]
    paths_proved: tuple[str, ...]
    commands: tuple[proc.Result, ...] = ()
    failure: GateError | None = None
    launches: launches.LaunchOutcome | None = None


def entry_points(
    config: Config, smoke: Path | None, timeout: float, tools: Mapping[str, str]
) -> list[EntryPoint]:
    """The smoke program (the seed's log names) and the configured entry points, in order."""
    out = [smoke_entry(smoke, timeout)] if smoke is not None else []
    return out + [spec.entry_point(tools) for spec in config.entry_points]


def smoke_entry(smoke: Path, timeout: float) -> EntryPoint:
    """The smoke program as an entry point (the seed's log names)."""
    return EntryPoint(SMOKE, (str(smoke),), timeout=timeout)


class SmokeAhead:
    """The smoke program's two paths, run while the project builds and is inspected.

    The gate's own program, both paths at once (as :func:`run` does on a device in the
    default compute mode), before the project's entry points run: what the device does
    then is the gate's, and the project's build is no GPU work. It claims none of the
    build's strays. :func:`run` takes its runs in the smoke program's place; a run that
    never gets to the execute stage calls :meth:`discard`.
    """

    def __init__(
        self,
        entry: EntryPoint,
        evidence: EvidenceDir,
        instrument: Callable[[], Instrument | None],
        runs_in: RunsIn = RunsIn(),  # noqa: B008 - frozen, shared safely
    ) -> None:
        self.entry, self._evidence, self._runs_in = entry, evidence, runs_in
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="smoke-ahead")
        self._runs = self._pool.submit(self._both, instrument)
        self._pool.shutdown(wait=False)

    def _both(self, instrument: Callable[[], Instrument | None]) -> list[Run]:
        names = [p.log_name for p in ExecPath]
        return both_at_once(
            self.entry,
            names,
            self._evidence,
            instrument(),
            claim_strays=False,
            runs_in=self._runs_in,
        )

    def runs(self) -> list[Run]:
        """Both runs, native first (waiting for them)."""
        return self._runs.result()

    def discard(self) -> None:
        """The execute stage will not run: wait for the runs and take their files away."""
        with contextlib.suppress(Exception):
            self._runs.result()
        for path in ExecPath:
            self._evidence.path(path.log_name).unlink(missing_ok=True)
            shutil.rmtree(self._evidence.path(f"launches/{Path(path.log_name).stem}"), True)


def both_at_once(
    entry: EntryPoint,
    names: Sequence[str],
    evidence: EvidenceDir,
    instrument: Instrument | None,
    *,
    claim_strays: bool = True,
    runs_in: RunsIn = RunsIn(),  # noqa: B008 - frozen, shared safely
) -> list[Run]:
    """The gate's own program on both paths at once (separate processes, caches and
    environments; each mostly CUDA start-up), native first. The project's entry points
    run one at a time, as they would alone."""
    one = functools.partial(
        run_entry_point,
        entry,
        evidence=evidence,
        instrument=instrument,
        claim_strays=claim_strays,
        runs_in=runs_in,
    )
    with ThreadPoolExecutor(2, thread_name_prefix="smoke") as pool:
        return list(pool.map(one, ExecPath, names))


def entry_names(config: Config) -> list[str]:
    """The entry points' names, before anything is built (for a run that stops early)."""
    return ([SMOKE] if config.smoke else []) + [spec.name for spec in config.entry_points]


def skipped_checks(names: Sequence[str], reason: str) -> list[Check]:
    """Every entry point and path as a check that did not run, with the one reason."""
    return [
        Check(
            f"{name} [{path.value}]",
            f"gate.execute.{path.value}",
            CheckState.NOT_RUN,
            reason,
            path=path,
        )
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
            CheckState.NOT_RUN,
            f"no device code of its own: covered only by execution, {reason}",
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
    recorder: Recorder | None = None,
    smoke_ahead: SmokeAhead | None = None,
    runs_in: RunsIn = RunsIn(),  # noqa: B008 - frozen, shared safely
) -> ExecuteOutcome:
    """Run every entry point on both paths, judge what they loaded, check the predictions.

    What each run loaded is read while the next entry point runs (libraries.Prefetch).
    With ``side_by_side`` (the device is in the default compute mode) the gate's own
    programs, the smoke program's two paths and the PTX proofs, run at once; else one
    process at a time, as exclusive-process mode admits. With ``recorder`` each run's
    launches are recorded and judged (gate.launch.coverage). ``smoke_ahead``: the smoke
    program's runs, started earlier (:class:`SmokeAhead`).
    """
    with libraries.Prefetch(use_cache=use_cache, cap=capability) as prefetch:
        runs = _run_points(
            evidence,
            points,
            prefetch,
            side_by_side=side_by_side,
            instrument=recorder,
            ahead=smoke_ahead,
            runs_in=runs_in,
        )
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
    predictions, proofs = _predict_and_prove(
        evidence,
        runs,
        artifacts,
        judged,
        capability=capability,
        driver_cuda=driver_cuda,
        side_by_side=side_by_side,
        recorder=recorder,
    )
    proved = proofs.proved_names()
    for done in runs:
        log = str(evidence.path(done.log_name))
        checks.append(execution_check(done, predict.excuse(done, predictions, proved), log))
    checks += [p.check(runs) for p in predictions]
    checks += proofs.checks
    checks += libraries.codeless_checks(artifacts, runs, judged)
    recorded = None
    if recorder is not None:
        recorded = _judge_launches(
            evidence, recorder, runs, artifacts, capability=capability, config=config
        )
        checks += recorded.checks
    return ExecuteOutcome(
        executions=_executions(evidence, runs),
        loaded=judged.records,
        checks=tuple(checks),
        diagnoses=tuple(predict.diagnosed(runs, predictions)),
        paths_proved=tuple(predict.paths_proved(runs, predictions, proved, proofs.by_launches)),
        commands=proofs.commands,
        launches=recorded,
    )


def _predict_and_prove(
    evidence: EvidenceDir,
    runs: Sequence[Run],
    artifacts: Sequence[Inspected],
    judged: libraries.Judged,
    *,
    capability: Capability,
    driver_cuda: Version | None,
    side_by_side: bool,
    recorder: Recorder | None,
) -> tuple[tuple[predict.Prediction, ...], jitproof.Proofs]:
    """What inspection predicted of each run, and the PTX proofs where a run cannot tell.

    The PTX loads wait on the driver in processes of their own: the loaded libraries'
    evidence (torch's come to megabytes of JSON) is written meanwhile.
    """
    predictions = predict.predict_all(runs, artifacts, judged, capability, driver_cuda)
    jit_launched = launches.jit_compiled_symbols(runs, artifacts) if recorder else frozenset()
    pending = jitproof.start(
        predictions, artifacts, capability, side_by_side=side_by_side, jit_launched=jit_launched
    )
    try:
        libraries.write_views(evidence, judged)
    finally:
        proofs = pending.finish(evidence)
    return predictions, proofs


def _judge_launches(
    evidence: EvidenceDir,
    recorder: Recorder,
    runs: Sequence[Run],
    artifacts: Sequence[Inspected],
    *,
    capability: Capability,
    config: Config,
) -> launches.LaunchOutcome:
    """Each run's recorded launches judged (gate.launch.coverage); the recorder's note written."""
    recorded = launches.judge(
        evidence,
        runs=runs,
        artifacts=artifacts,
        capability=capability,
        required=required_launches(config),
        launch_coverage=config.policy.launch_coverage,
    )
    evidence.write_text("launches/recorder.txt", recorder.note + "\n")
    return recorded


def _executions(evidence: EvidenceDir, runs: Sequence[Run]) -> tuple[Execution, ...]:
    """Each run as the run record keeps it, with its log's SHA-256 (None: no log written)."""
    return tuple(
        r.record(
            sha256_file(evidence.path(r.log_name)) if evidence.path(r.log_name).exists() else None
        )
        for r in runs
    )


def required_launches(config: Config) -> dict[Path, str | tuple[str, ...]]:
    """Each configured artifact file's ``require_launch`` (wheels: none; they unpack)."""
    if not any(spec.require_launch for spec in config.artifacts):
        return {}
    found: dict[Path, str | tuple[str, ...]] = {}
    for spec in config.artifacts:
        if spec.require_launch:
            for resolved in resolve_artifact_specs(replace(config, artifacts=(spec,))):
                if not resolved.is_wheel:
                    found[resolved.path] = spec.require_launch
    return found


def _run_points(
    evidence: EvidenceDir,
    points: Sequence[EntryPoint],
    prefetch: libraries.Prefetch,
    *,
    side_by_side: bool,
    instrument: Instrument | None = None,
    ahead: SmokeAhead | None = None,
    runs_in: RunsIn = RunsIn(),  # noqa: B008 - frozen, shared safely
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
        if smoke and ahead is not None and ahead.entry == entry:
            pair = ahead.runs()
        elif smoke and side_by_side:
            pair = both_at_once(entry, names, evidence, instrument, runs_in=runs_in)
        else:
            pair = [
                run_entry_point(
                    entry, p, n, evidence=evidence, instrument=instrument, runs_in=runs_in
                )
                for p, n in zip(ExecPath, names, strict=True)
            ]
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


def execution_check(done: Run, excuse: str | None = None, log: str | None = None) -> Check:
    """One JUnit case per entry point and path, classname by path, log in system-out.

    ``excuse`` (from gate.stages.predict) makes an explained failure of the whole-program
    JIT run a warning: it ran, and failed as predicted because a library outside the
    project ships no PTX, and the project's own PTX was proved by loading it. A run that
    did not pass names ``log``, its log in the evidence folder.
    """
    name = f"{done.entry_point.name} [{done.path.value}]"
    classname = f"gate.execute.{done.path.value}"
    where = f" (log: {log})" if log and not done.passed else ""
    message = f"{done.path.title}: {done.reason()}"
    if excuse is not None and not done.passed:
        return Check(
            name,
            classname,
            CheckState.WARNED,
            f"{message}; {excuse}{where}",
            duration=done.result.duration,
            output=done.result.output(),
            path=done.path,
            error=done.failure.code if done.failure is not None else None,
        )
    return Check(
        name,
        classname,
        CheckState.of(done.passed),
        message + where,
        duration=done.result.duration,
        output=done.result.output(),
        cause=done.cause(),
        path=done.path,
        error=done.failure.code if done.failure is not None and not done.passed else None,
    )
