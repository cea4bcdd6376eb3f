"""`cuda-gate run`: the stages in order, each a function returning its frozen outcome.

environment -> probe -> build -> inspect -> execute -> report -> manifest -> store.
A stage that cannot go on returns its outcome with a ``failure``; the pipeline marks it
failed, skips what depends on it (each skipped stage with the reason), and still
writes JUnit, the summary and result.json, so the evidence gathered so far is never
lost. The verdict is accepted only with execution evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gate import __version__
from gate.config import Config
from gate.errors import ConfigError, EvidenceError, GateError, Interrupted
from gate.evidence import EvidenceDir
from gate.fsutil import Lock
from gate.guard import selfcheck
from gate.guard.redact import Redactor
from gate.pipeline.options import RunOptions, records_launches, tools
from gate.pipeline.progress import Progress, StageProgress
from gate.pipeline.stages import INTERNAL_ERROR_FILE, run_stages
from gate.record import RunRecord
from gate.render.diff import headline
from gate.render.live import LiveLine
from gate.rules.baseline import CLASSNAME
from gate.rules.baseline import checks as baseline_checks
from gate.rules.verdict import Check, CheckState, StageStatus
from gate.store.settings import StoreSettings

if TYPE_CHECKING:
    from gate.baseline.resolve import Found

__all__ = [
    "BUILD_LOCK",
    "INTERNAL_ERROR_FILE",
    "Outcome",
    "Progress",
    "RunOptions",
    "records_launches",
    "run",
    "tools",
]

# In the build folder: held for the whole run, so two runs never build into one folder.
BUILD_LOCK = ".cuda-gate.lock"


@dataclass(frozen=True)
class Outcome:
    """The end of a run: the record, where the evidence is, what happened to it afterwards."""

    record: RunRecord
    evidence: Path
    manifest: str
    stored: str
    store_error: GateError | None = None
    interrupted: Interrupted | None = None  # a signal ended the stages early


def run(options: RunOptions, say: Progress, live: LiveLine | None = None) -> Outcome:
    """Run every stage up to ``options.stop_after``, then report, sign and store.

    ``live`` (a terminal's) shows the running command in place; ``say`` clears it first.

    The evidence folder and the build folder are locked for the whole run (a second
    run refuses, or waits with ``options.wait``): nothing another run writes can
    mix with this one's files, and what the manifest digests is what is stored.
    """
    # Before anything runs: the gate's own files as installed, all of its modules imported
    # while the first stages wait on their commands (gate.guard.selfcheck).
    guard = selfcheck.Guard.begin()
    try:
        return _guarded_run(options, say, live, guard)
    finally:
        guard.close()


def _guarded_run(
    options: RunOptions, say: Progress, live: LiveLine | None, guard: selfcheck.Guard
) -> Outcome:
    redactor = Redactor.from_environment(
        extra=options.signer.secrets() if options.signer is not None else ()
    )
    evidence = EvidenceDir.create(options.evidence, redactor, wait=options.wait, say=say)
    try:
        # Beside the evidence by default: `cuda-gate verify` re-hashes these artifacts later.
        workdir = (options.build_dir or options.evidence.parent / "gate-build").resolve()
        try:
            workdir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise EvidenceError(f"{workdir}: build folder is not writable: {e.strerror}") from e
        build_lock = Lock.acquire(
            workdir / BUILD_LOCK, f"{workdir} (build folder)", wait=options.wait, say=say
        )
        try:
            if options.first_line:
                say(options.first_line)
            p = StageProgress(say, live)
            return _locked_run(options, evidence, workdir, redactor, p, guard=guard)
        finally:
            build_lock.release()
    finally:
        evidence.release()


def _locked_run(
    options: RunOptions,
    evidence: EvidenceDir,
    workdir: Path,
    redactor: Redactor,
    p: StageProgress,
    *,
    guard: selfcheck.Guard,
) -> Outcome:
    from gate.attest import manifest  # noqa: PLC0415 - preloaded (gate.guard.selfcheck)
    from gate.stages import report  # noqa: PLC0415 - preloaded (gate.guard.selfcheck)

    started = datetime.now(UTC)
    config = options.project_config or Config(project_dir=options.project_dir.resolve())
    found, interrupted = run_stages(options, config, evidence, workdir, p, before_project=guard.arm)
    record = RunRecord(
        tool_version=__version__,
        started=started,
        finished=datetime.now(UTC),
        run=report.run_info(started),
        source=found.source,
        environment=found.environment,
        device=found.device,
        stages=tuple(p.stages),
        builds=found.builds,
        artifacts=found.artifacts,
        requirements=found.requirements,
        loaded_libraries=found.loaded_libraries,
        executions=found.executions,
        checks=tuple(p.checks),
        diagnoses=found.diagnoses,
        paths_proved=found.paths_proved,
        notes=found.notes,
        policy=config.policy,
        launches=found.launches,
        devices=config.devices,
    )
    if options.baseline is not None:
        record = _compared(record, options.baseline, config, p)
    began = p.start("report")
    report.write(evidence, record, config.source, junit_file_attribute=options.junit_file_attribute)
    p.done("report", began)
    # Signed and stored only now, the last process the project started having ended, and
    # only by the code the gate started with: GateChangedError (exit 3) if a file changed.
    guard.check()
    began = p.start("manifest")
    written = manifest.write_manifest(
        evidence.root, options.signer, redactor=redactor, config_file=config.source, record=record
    )
    p.done("manifest", began)  # what it wrote is said once, on the evidence line
    stored, store_error = "evidence not stored (--no-store)", None
    if interrupted is not None:
        stored = f"evidence not stored: interrupted by {interrupted.name}"
        p.skip("store", stored)
    elif options.store_settings is not None:
        began = p.start("store")
        try:
            stored = _store(evidence.root, options.store_settings, options.project_dir)
            p.done("store", began)  # where, on the evidence line
        except GateError as e:
            stored, store_error = f"evidence not stored: {e.one_line()}", e
            p.done("store", began, e)
    return Outcome(record, evidence.root, written.message, stored, store_error, interrupted)


def _compared(record: RunRecord, baseline: Found, config: Config, p: StageProgress) -> RunRecord:
    """The record with its comparison against ``baseline`` and a check per artifact; when
    inspect did not run, one check that did not run either (never a silent pass)."""
    from gate.baseline.resolve import compare_records  # noqa: PLC0415 - only with --baseline

    inspected = any(s.name == "inspect" and s.status is StageStatus.RAN for s in record.stages)
    if not inspected:
        p.checks.append(
            Check(
                "comparison with the baseline",
                CLASSNAME,
                CheckState.NOT_RUN,
                f"not run: the inspect stage did not complete ({baseline.reference})",
            )
        )
        return replace(record, checks=tuple(p.checks))
    compared = compare_records(baseline, record, config.baseline, config.devices)
    p.checks += baseline_checks(compared.diff, compared.describe())
    p.say(f"baseline: {headline(compared.diff, compared.describe())}")
    return replace(record, checks=tuple(p.checks), baseline=compared)


def _store(evidence: Path, settings: StoreSettings, project_dir: Path) -> str:
    """Keep the evidence in the store under its revision; a folder outside git stays local."""
    from gate.store import publish, run_meta_from_evidence  # noqa: PLC0415 - only a run that stores

    try:
        meta = run_meta_from_evidence(evidence, cwd=project_dir)
    except ConfigError as e:
        return f"evidence not stored: {e.message}"
    published = publish(evidence, meta, settings)
    return f"evidence stored: {published.location}"
