"""Stage 3, build: the smoke program for the target, then the project's build commands.

The smoke program (the seed's ``check.cu``, shipped as ``gate/cuda/smoke.cu``) is built
with ``-gencode arch=compute_XY,code=[sm_XY,compute_XY]``: native SASS and PTX of the
same target in one fat binary; an identical earlier build of it is reused
(gate.tools.buildcache) and still run and inspected. It compiles beside the project's own
build commands, which run in order with the required targets substituted
(gate.config.placeholders). Every command is recorded exactly as it ran; the first
failing one stops the pipeline, its log kept. With prebuilt
files (``--prebuilt SHA256SUMS``) the project's commands are not run: the files are
checked against the list instead (gate.stages.prebuilt).

In the delivery image (``--image``) the smoke program is built by the image's own nvcc,
into the gate's work folder, and the project's build commands are not run: the image
is the build's product, its artifacts are gated as it ships them (gate.stages.inimage).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gate import proc
from gate.config import SMOKE_NAME, Config
from gate.config.placeholders import gencode
from gate.container.place import HOST, Place
from gate.errors import GateError, ToolError
from gate.evidence import EvidenceDir, safe_name
from gate.fsutil import full_file_systems
from gate.record import Build
from gate.rules.causes import Cause
from gate.rules.require import Requirement
from gate.rules.targets import Target
from gate.rules.verdict import Check, CheckState
from gate.scan.checksums import Checksums
from gate.stages import prebuilt as prebuilt_stage
from gate.stages.probe import compile_gate_program
from gate.system import machine, toolkit
from gate.tools.programs import BUILD_TIMEOUT, cuda_source

SMOKE = SMOKE_NAME
SMOKE_KERNEL = "write_value"
_RUNNING = "# running: this log grows as the step prints, and is written whole when it ends\n"
_REUSED = "reused: the same toolchain built this from the same source and options before"


@dataclass(frozen=True)
class BuildOutcome:
    """The required targets, every build as it ran, and the smoke program's path.

    ``built_since`` is when the project's first build command started (None when the
    configuration has none): what the artifacts' modification times are judged by.
    """

    required: tuple[Requirement, ...]
    builds: tuple[Build, ...]
    smoke: Path | None
    commands: tuple[proc.Result, ...]
    checks: tuple[Check, ...]
    failure: GateError | None = None
    built_since: float | None = None


def build_record(name: str, result: proc.Result) -> Build:
    """A finished command as the run record keeps it."""
    return Build(
        name=name,
        command=result.command_line(),
        argv=result.argv,
        cwd=result.cwd,
        returncode=result.returncode,
        duration=result.duration,
        timed_out=result.timed_out,
    )


def build_smoke(
    nvcc: str,
    workdir: Path,
    sass: Sequence[Target],
    ptx: Sequence[Target],
    *,
    use_cache: bool = True,
    claim_strays: bool = True,
    place: Place = HOST,
) -> tuple[Path, proc.Result]:
    """Compile smoke.cu with the given targets into ``workdir/smoke``.

    The gate's own program: an identical earlier build (same toolchain, source and
    targets) is reused when the build cache holds it (gate.tools.buildcache).
    """
    source = workdir / f"{SMOKE}.cu"
    source.write_text(cuda_source(f"{SMOKE}.cu"), encoding="utf-8")
    output = workdir / SMOKE
    argv = [nvcc, "-O2", *gencode(sass, ptx), str(source), "-o", str(output)]
    result = compile_gate_program(
        argv,
        output=output,
        inputs=[source],
        cwd=workdir,
        use_cache=use_cache,
        place=place,
        claim_strays=claim_strays,
    )
    return output, result


def _head(command: str, cwd: str | Path | None) -> str:
    return f"# {command}\n# cwd: {cwd or '.'}\n"


def _log(result: proc.Result) -> str:
    head = _head(result.command_line(), result.cwd)
    if result.reused:
        head += f"# {_REUSED} (build cache key {result.reused})\n"
    if result.strays:
        head += "# left running after it exited (killed): " + "; ".join(result.strays) + "\n"
    return head + result.output()


def run(
    evidence: EvidenceDir,
    *,
    config: Config,
    target: Target,
    requirement: Requirement,
    workdir: Path,
    tools: Mapping[str, str],
    sass: tuple[Target, ...] | None = None,
    ptx: tuple[Target, ...] | None = None,
    use_cache: bool = True,
    prebuilt: Checksums | None = None,
    on_smoke: Callable[[Path], None] | None = None,
    place: Place = HOST,
) -> BuildOutcome:
    """Build the smoke program (unless the config turns it off) and the configured steps.

    ``target`` is what the builds are for (their placeholders); ``requirement`` the
    device's or the named target's requirement, which leads the run's requirements.
    With ``prebuilt``, the configured steps are not run: the listed files are checked.

    The smoke program is the gate's own: it compiles in a thread of its own while the
    project's steps run (claiming none of their strays), and is recorded first.
    ``on_smoke`` is called with its path as soon as it is built (in that thread).
    """
    targets = config.required_targets(target)
    smoke_job: Future[tuple[Path, proc.Result]] | None = None
    pool = ThreadPoolExecutor(1, thread_name_prefix="smoke-build")
    if config.smoke:
        sass_of = sass if sass is not None else (target.as_sass(),)
        ptx_of = ptx if ptx is not None else (target.as_ptx(),)
        # The project's steps run meanwhile (none in the delivery image, nor prebuilt).
        beside = bool(config.builds) and prebuilt is None and not place.in_image

        def smoke_built() -> tuple[Path, proc.Result]:
            output, result = build_smoke(
                tools["nvcc"],
                workdir,
                sass_of,
                ptx_of,
                use_cache=use_cache,
                claim_strays=not beside,
                place=place,
            )
            if result.ok and on_smoke is not None:
                on_smoke(output)
            return output, result

        smoke_job = pool.submit(smoke_built)
    try:
        steps = _steps(evidence, config, targets, tools, prebuilt, place=place)
    finally:
        pool.shutdown(wait=True)  # an interrupt still waits for the compile's group to go
    builds: list[Build] = []
    commands: list[proc.Result] = []
    checks: list[Check] = []
    smoke = None
    failure: GateError | None = None
    if smoke_job is not None:
        output, result = smoke_job.result()
        commands.append(result)
        builds.append(build_record(SMOKE, result))
        evidence.write_text("build.log", _log(result))
        checks.append(_build_check(SMOKE, result, "the smoke program"))
        if result.ok:
            smoke = output
        else:
            failure = ToolError(
                result.describe_failure("building the smoke program", BUILD_TIMEOUT),
                hint=machine.nvcc_failure_hint(
                    result.output(), None if place.in_image else tools["nvcc"]
                ),
            )
    return BuildOutcome(
        config.requirements(requirement),
        tuple(builds) + steps.builds,
        smoke,
        tuple(commands) + steps.commands,
        tuple(checks) + steps.checks,
        failure or steps.failure,
        steps.built_since,
    )


def _steps(
    evidence: EvidenceDir,
    config: Config,
    targets: Sequence[Target],
    tools: Mapping[str, str],
    prebuilt: Checksums | None,
    *,
    place: Place = HOST,
) -> BuildOutcome:
    """The project's part: its build steps in order (the first failing one stops them), or
    the check of the prebuilt files; nothing in the delivery image. Requirements and
    smoke are the caller's."""
    builds: list[Build] = []
    commands: list[proc.Result] = []
    checks: list[Check] = []
    since: list[float] = []

    def outcome(failure: GateError | None = None) -> BuildOutcome:
        return BuildOutcome(
            (),
            tuple(builds),
            None,
            tuple(commands),
            tuple(checks),
            failure,
            since[0] if since else None,
        )

    if place.in_image:
        # The image is the build's product: its artifacts are gated as it ships them.
        return outcome()
    if prebuilt is not None:
        # Built elsewhere: no build time, so no freshness check (built_since stays None).
        checked = prebuilt_stage.run(evidence, config, prebuilt)
        checks.append(checked.check)
        return outcome(checked.failure)
    # The project's builds link with the toolkit the gate found (a wheel toolkit's library
    # folder); a step's own env has the last word.
    linking = toolkit.of(tools["nvcc"]).build_environment(tools["nvcc"], os.environ)
    for step in config.builds:
        if not since:
            since.append(time.time())
        try:
            command = step.render(targets, tools)
            name = f"build-{safe_name(step.name)}.log"
            env = {**linking, **dict(command.env)}
            shown = proc.command_line(command.argv, sorted(env.items()))
            # Written as the output comes (tail -f), then replaced by the whole log.
            with evidence.live(name, _head(shown, command.cwd) + _RUNNING) as live:
                result = proc.run(
                    command.argv,
                    env_set=env,
                    cwd=command.cwd,
                    timeout=command.timeout,
                    sink=live.write,
                )
        except GateError as e:
            checks.append(
                Check(
                    f"build {step.name}",
                    "gate.build",
                    CheckState.FAILED,
                    e.one_line(),
                    cause=Cause.TOOLCHAIN,
                )
            )
            return outcome(
                type(e)(f"build step {step.name!r} ({step.key}): {e.message}", hint=e.hint)
            )
        commands.append(result)
        builds.append(build_record(step.name, result))
        log = evidence.write_text(name, _log(result))
        checks.append(_build_check(step.name, result, f"{step.key}", str(log)))
        if not result.ok:
            label = f"build step {step.name!r} ({step.key})"
            return outcome(
                ToolError(
                    result.describe_failure(label, command.timeout, str(log)),
                    hint=_failure_hint(tools["nvcc"], result, command.cwd, env),
                )
            )
    return outcome()


def _failure_hint(
    nvcc: str, result: proc.Result, cwd: str | Path | None, env: Mapping[str, str]
) -> str | None:
    """What to do about a failed build step: the full file system it wrote to (its
    folder's, its temporary folder's) first, then what the toolkit's files say."""
    temporary = env.get("TMPDIR") or os.environ.get("TMPDIR") or tempfile.gettempdir()
    output = result.output()
    said = [
        full_file_systems((Path(cwd or "."), Path(temporary)), output),
        toolkit.failure_hint(nvcc, output),
    ]
    return "; ".join(s for s in said if s) or None


def _build_check(name: str, result: proc.Result, what: str, log: str | None = None) -> Check:
    if result.ok:
        message = result.command_line()
        if result.reused:
            message += f" ({_REUSED.split(':', 1)[0]} from the gate's build cache)"
        if result.strays:
            message += f" (left {len(result.strays)} process(es) running; killed)"
        return Check(
            f"build {name}", "gate.build", CheckState.PASSED, message, duration=result.duration
        )
    return Check(
        f"build {name}",
        "gate.build",
        CheckState.FAILED,
        result.describe_failure(what, log=log),
        duration=result.duration,
        output=result.output(),
        cause=Cause.TIMEOUT if result.timed_out else Cause.TOOLCHAIN,
    )
