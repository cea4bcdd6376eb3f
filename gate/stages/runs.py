"""One entry point run on one path: the process, its environment, and how it ended.

Native: ``CUDA_DISABLE_PTX_JIT=1`` and the JIT cache made unusable. On a real H200 a
PTX-only program passed under ``CUDA_DISABLE_PTX_JIT=1`` when the default cache was
warm from an earlier run (CUDA-FACTS.md), so the native run also gets
``CUDA_CACHE_DISABLE=1`` and a fresh, empty ``CUDA_CACHE_PATH``: nothing compiled
from PTX, now or earlier, can stand in for SASS.

JIT: ``CUDA_FORCE_PTX_JIT=1`` with ``CUDA_CACHE_DISABLE=1`` and its own empty cache
folder, checked empty afterwards, so the run neither reuses nor leaves cache state.

cuTile (CUDA 13.1+) compiles a kernel with ``tileiras`` when the program first launches
it and keeps the cubin in its own disk cache (``CUDA_TILE_CACHE_DIR``, by default
``~/.cache/cutile-python``): a cubin cached by an earlier run, or by another driver or
toolkit, would stand in for the compile this run must prove. Each run, on either path,
gets ``CUDA_TILE_CACHE_DIR`` set to a fresh, empty folder of its own, removed afterwards;
what cuTile compiled there is no cache state of the driver's, so it is not checked empty.

Each run is a fresh process; the variables apply to that child only. glibc's loader
log records every shared library it really loaded (gate.stages.loaded); the launch
recorder, when the caller hands in its ``instrument`` (gate.launch.recorder), records
every module and kernel launch into the evidence (gate.launch.log). Whether it
passed, and why not, is the decision core's (gate.rules.causes). This module imports
no other stage: the stages that judge runs (libraries, predict) import it.

In the delivery image (``--image``) each run is a fresh container of it (``where``):
the JIT cache folder and the loader log are in the gate's work folder, mounted into
it at the same path, and what the run loaded is found here by ``locate`` (the image's
files, read from its layers).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from gate import proc
from gate.config import EntryPoint
from gate.container.place import HOST, Place
from gate.errors import BadInputError
from gate.evidence import EvidenceDir
from gate.launch.log import ProcessRecord, read_folder
from gate.record import Execution
from gate.rules.causes import Cause, ExecPath, RuntimeFailure, classify
from gate.stages import loaded

DEFAULT_TIMEOUT = 300.0


# The launch recorder's variables for a run recording into a folder, or none and why not
# (gate.launch.recorder.Recorder.env_for).
class Instrument(Protocol):
    """What records a run (gate.launch.recorder.Recorder): the variables for one run, and the
    objects it brings into the process, which are the gate's and not the program's."""

    def env_for(
        self, folder: Path, entry_env: Mapping[str, str], environ: Mapping[str, str] | None = None
    ) -> tuple[dict[str, str], str]: ...

    def objects(self) -> frozenset[Path]: ...


LAUNCH_VARIABLES = ("CUDA_INJECTION64_PATH", "CUDA_GATE_LAUNCH_DIR")

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


@dataclass(frozen=True)
class RunsIn:
    """Where entry points run: this machine (the default), or containers of the image with
    their scratch folders in ``scratch`` and what they loaded found here by ``locate``."""

    where: Place = HOST
    scratch: Path | None = None
    locate: Callable[[tuple[Path, ...]], tuple[Path | None, ...]] | None = None
    exists: Callable[[str], bool] | None = None  # a path is a file where the runs are


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
    # What the launch recorder wrote, per process; launch_folder is evidence-relative.
    launches: tuple[ProcessRecord, ...] = ()
    launch_folder: str | None = None
    launch_note: str = ""

    @property
    def recorded(self) -> bool:
        """Whether the launch recorder observed this run (a record from some process)."""
        return bool(self.launches)

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
            failure=self.failure,
        )

    @property
    def passed(self) -> bool:
        """As the decision core decides it (gate.rules.causes.RunFacts)."""
        return self.record().passed

    def reason(self) -> str:
        """Why it failed (or 'passed'), in one phrase, with the run's own details: the line
        of its output that carries the error (the build's finder, proc.Result.error_line)."""
        known = self.failure.text if self.failure is not None else None
        return (
            self.record()
            .facts()
            .reason(
                timeout=self.entry_point.timeout,
                error_line=self.result.error_line(known),
                expected_output=self.entry_point.expected_output,
            )
        )

    def cause(self) -> Cause | None:
        """The ranked cause of a failed run."""
        return self.record().facts().cause()


def run_entry_point(
    entry: EntryPoint,
    path: ExecPath,
    log_name: str | None = None,
    *,
    record_loaded: bool = True,
    evidence: EvidenceDir | None = None,
    instrument: Instrument | None = None,
    runs_in: RunsIn = RunsIn(),
    claim_strays: bool = True,
) -> Run:
    """Run ``entry`` once on ``path`` in a fresh process with its own empty JIT cache folder.

    With ``evidence``, the run's log there grows as the program prints (``tail -f``);
    the caller writes the whole log (:func:`log_text`) once it ends. With ``evidence``
    and ``instrument``, the launch recorder writes into ``launches/<log stem>/`` there.
    ``runs_in`` says where it runs (:class:`RunsIn`). ``claim_strays=False``: the gate's
    own program beside the project's commands (proc.run).
    """
    where, scratch = runs_in.where, runs_in.scratch
    env_set, env_unset = PATH_ENV[path]
    cache_dir = Path(tempfile.mkdtemp(prefix=f"cuda-gate-{path.value}-cache-", dir=scratch))
    tile_dir = Path(tempfile.mkdtemp(prefix=f"cuda-gate-{path.value}-tile-", dir=scratch))
    log_dir = Path(tempfile.mkdtemp(prefix="cuda-gate-ld-", dir=scratch))
    name = log_name or path.log_name
    try:
        extra = loaded.loader_env(log_dir) if record_loaded else {}
        launch_env, launch_folder, launch_note = _launch_env(entry, name, evidence, instrument)
        extra = {**extra, **launch_env}
        with contextlib.ExitStack() as stack:
            live = (
                stack.enter_context(evidence.live(name, _live_head(entry, path)))
                if evidence is not None
                else None
            )
            result = where.run(
                entry.argv,
                env_set={
                    **dict(entry.env),
                    **extra,
                    **env_set,
                    "CUDA_CACHE_PATH": str(cache_dir),
                    "CUDA_TILE_CACHE_DIR": str(tile_dir),
                },
                env_unset=env_unset,
                cwd=entry.cwd,
                timeout=entry.timeout,
                sink=live.write if live is not None else None,
                claim_strays=claim_strays,
            )
        cache_clean = not any(cache_dir.rglob("*"))
        found = _what_it_loaded(
            log_dir if record_loaded else None,
            entry,
            runs_in,
            instrument if launch_folder is not None else None,
        )
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
        shutil.rmtree(tile_dir, ignore_errors=True)
        shutil.rmtree(log_dir, ignore_errors=True)
    launches, launch_note = _launches(evidence, launch_folder, launch_note)
    if record_loaded or launch_folder is not None:
        result = _without_instruments(result, log_dir)
    output = result.output()
    return Run(
        entry_point=entry,
        path=path,
        result=result,
        log_name=name,
        output_ok=re.search(entry.expected_output, output) is not None,
        cache_clean=cache_clean,
        failure=None if result.ok else classify(output),
        loaded=tuple(lib.path for lib in found),
        launches=launches,
        launch_folder=launch_folder,
        launch_note=launch_note,
    )


def _launch_env(
    entry: EntryPoint, name: str, evidence: EvidenceDir | None, instrument: Instrument | None
) -> tuple[dict[str, str], str | None, str]:
    """The launch recorder's variables for one run, the evidence folder it records into
    (None: it does not record) and its note on why not."""
    if instrument is None or evidence is None:
        return {}, None, ""
    launch_folder = f"launches/{Path(name).stem}"
    folder = evidence.path(launch_folder)
    folder.mkdir(parents=True, exist_ok=True)
    launch_env, launch_note = instrument.env_for(folder, dict(entry.env))
    return launch_env, launch_folder if launch_env else None, launch_note


def _what_it_loaded(
    log_dir: Path | None, entry: EntryPoint, runs_in: RunsIn, recorder: Instrument | None
) -> tuple[loaded.LoadedLibrary, ...]:
    """The libraries the loader log in ``log_dir`` (None: none kept) says the run loaded,
    found here (in the image's files, where ``runs_in`` says so); less ``recorder``'s own,
    when it recorded the run."""
    found = (
        loaded.parse_loaded(log_dir, cwd=Path(entry.cwd or "."), exists=runs_in.exists)
        if log_dir is not None
        else ()
    )
    if runs_in.locate is not None:
        here = runs_in.locate(tuple(lib.path for lib in found))
        found = tuple(
            replace(lib, path=p) for lib, p in zip(found, here, strict=True) if p is not None
        )
    if recorder is not None:
        ours = recorder.objects()  # the recorder and its CUPTI: not the program's
        found = tuple(lib for lib in found if lib.path not in ours)
    return found


def _without_instruments(result: proc.Result, log_dir: Path) -> proc.Result:
    """The run's command without the loader and recorder variables: they are the gate's
    instruments, not part of the command to repeat."""
    names = set(loaded.loader_env(log_dir)) | set(LAUNCH_VARIABLES)
    return replace(result, env_set=tuple((k, v) for k, v in result.env_set if k not in names))


def _launches(
    evidence: EvidenceDir | None, folder: str | None, note: str
) -> tuple[tuple[ProcessRecord, ...], str]:
    """The recorder's records of one run, or none and why."""
    if evidence is None or folder is None:
        return (), note
    try:
        records = read_folder(evidence.path(folder))
    except BadInputError as e:
        return (), f"launch record unreadable: {e.message}"
    if not records:
        return (), "no launch record: no process of it initialised CUDA, or it was killed first"
    errors = [f"pid {r.pid}: {e}" for r in records for e in r.errors]
    if errors and not any(r.kernels or r.modules or r.loads for r in records):
        return (), "launch recorder could not observe: " + "; ".join(errors)
    return records, "; ".join(errors)


def _live_head(entry: EntryPoint, path: ExecPath) -> str:
    """The top of a run's log while it runs: the whole log replaces it at the end."""
    return "\n".join(
        [
            f"# entry point: {entry.name}",
            f"# path: {path.title}",
            f"# command: {proc.command_line(entry.argv, entry.env)}",
            f"# cwd: {entry.cwd or '.'}",
            "# running: this log grows as the program prints, and is written whole when it ends",
            "",
        ]
    )


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
