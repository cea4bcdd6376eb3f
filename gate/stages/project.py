"""The project's stages: build, inspect and execute the smoke program and the configured project.

A passing smoke program proves only the toolchain (the seed, section 5): the project's
own build commands run with the detected target substituted, every final artifact is
inspected for every required target and kernel, every real entry point runs under both
paths, and the shared libraries those processes really loaded (``dlopen`` included)
are inspected too, so a library with device code cannot slip past undeclared.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import zipfile
from dataclasses import replace
from pathlib import Path

from gate import config, proc
from gate.errors import BadInputError, ToolError
from gate.reader import read as reader
from gate.reader.listing import Kind, Listing
from gate.reader.targets import Capability
from gate.stages import build, checks, execute, loaded
from gate.stages import inspect as inspection
from gate.stages.state import RunOptions, RunState, record_command, target_of, toolkit_of

SMOKE_KERNEL = "write_value"
# Driver and JIT components: their device code is CUDA's own, not the application's.
_CUDA_RUNTIME_PARTS = re.compile(r"^lib(cuda|nvidia-|nvrtc|nvJitLink|nvptxcompiler|cudadebugger)")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _config(options: RunOptions) -> config.Config:
    return options.project_config or config.Config(project_dir=options.project_dir.resolve())


def stage_build(state: RunState, options: RunOptions, workdir: Path) -> None:
    """The smoke program (unless turned off), then the project's build commands in order."""
    cfg = _config(options)
    target = target_of(state)
    state.required = cfg.required_targets(target)
    if cfg.smoke:
        sass = options.sass if options.sass is not None else (target.as_sass(),)
        ptx = options.ptx if options.ptx is not None else (target.as_ptx(),)
        built = build.build_smoke(toolkit_of(state).nvcc, workdir, sass, ptx)
        record_command(state, built.result)
        state.builds.append(built)
        state.evidence.write_text("build.log", built.result.output())
        state.checks.append(
            checks.Check(
                "build check",
                "gate.build",
                True,
                built.result.command_line(),
                duration=built.result.duration,
            )
        )
    for step in cfg.builds:
        command = step.render(state.required, toolkit_of(state).nvcc)
        done = record_command(
            state,
            proc.run(
                command.argv, env_set=dict(command.env), cwd=command.cwd, timeout=command.timeout
            ),
        )
        state.evidence.write_text(
            f"build-{_safe(step.name)}.log",
            f"# {done.command_line()}\n# cwd: {command.cwd}\n" + done.output(),
        )
        ok = done.ok
        state.checks.append(
            checks.Check(
                f"build {step.name}",
                "gate.build",
                ok,
                done.command_line()
                if ok
                else f"{step.key}: exit status "
                f"{'timeout' if done.timed_out else done.returncode}: {done.last_line()}",
                duration=done.duration,
            )
        )
        if not ok:
            raise ToolError(
                f"build step {step.name!r} ({step.key}) failed: {done.last_line() or 'no output'}"
            )


def _safe(name: str) -> str:
    return _SAFE.sub("_", name).strip("_") or "artifact"


def configured_artifacts(options: RunOptions, workdir: Path) -> list[tuple[Path, tuple[str, ...]]]:
    """Every configured artifact file with its kernels; wheels are unpacked to their libraries."""
    cfg = _config(options)
    found: list[tuple[Path, tuple[str, ...]]] = []
    for spec in config.resolve_artifact_specs(cfg):
        if not spec.is_wheel:
            found.append((spec.path, spec.kernels))
            continue
        found += [(lib, spec.kernels) for lib in _unpack_wheel(spec.path, workdir / "wheels")]
    return found


def _unpack_wheel(wheel: Path, into: Path) -> list[Path]:
    """The shared libraries inside a wheel, extracted so they can be hashed and run."""
    target = into / wheel.name
    shutil.rmtree(target, ignore_errors=True)
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if re.search(r"\.so(\.\d+)*$", m)]
            for member in members:
                archive.extract(member, target)
    except (zipfile.BadZipFile, OSError) as e:
        raise BadInputError(f"{wheel}: not a readable wheel: {e}") from e
    return [target / m for m in members]


def stage_inspect(state: RunState, options: RunOptions, workdir: Path) -> None:
    """Inspect every final artifact: format, hash, dependencies, listings, required targets."""
    ev = state.evidence
    devices: tuple[Capability, ...] = (
        (state.capability,) if state.capability else (target_of(state).capability,)
    )
    cfg = _config(options)
    devices += tuple(d for d in cfg.devices if d not in devices)
    artifacts: list[tuple[Path, tuple[str, ...]]] = [
        (b.output, (SMOKE_KERNEL,)) for b in state.builds
    ]
    artifacts += configured_artifacts(options, workdir)
    seen: set[str] = set()
    for path, kernels in artifacts:
        smoke = any(path == b.output for b in state.builds)
        prefix = "" if smoke else f"artifacts/{_unique(_safe(path.name), seen)}/"
        artifact = inspection.inspect_artifact(
            path,
            ev,
            prefix=prefix,
            dump_sass=options.dump_sass,
            devices=devices,
            use_cuobjdump=options.use_cuobjdump,
        )
        state.artifacts.append(artifact)
        ev.write_text(f"{prefix}binary-format.txt", artifact.host.description + "\n")
        _write_sha256(state)
        ev.write_text(
            f"{prefix}dependencies.txt",
            "".join(
                f"{d.needed_by}: {d.name} => {d.resolved or 'not found'}\n"
                for d in artifact.dependencies
            ),
        )
        has_code = smoke or bool(artifact.listing.entries)
        state.checks += inspection.content_checks(
            artifact, ev, state.host_arch, prefix, expect_device_code=has_code
        )
        state.checks.append(inspection.cross_check(artifact))
        if has_code:
            for target in state.required if not smoke else (target_of(state),):
                state.checks += checks.listing_checks(
                    artifact.name, artifact.listing, target, kernels
                )
            state.checks.append(coverage_check(artifact.name, artifact.listing))


def _unique(name: str, seen: set[str]) -> str:
    candidate, n = name, 1
    while candidate in seen:
        n += 1
        candidate = f"{name}-{n}"
    seen.add(candidate)
    return candidate


def _write_sha256(state: RunState) -> None:
    state.evidence.write_text(
        "sha256.txt", "".join(f"{a.sha256}  {a.path}\n" for a in state.artifacts)
    )


def coverage_check(name: str, listing: Listing) -> checks.Check:
    """Per kernel: present for one target but missing for another, or from the PTX."""
    missing = listing.missing_kernels()
    by_kernel: dict[str, list[str]] = {}
    for target, kernels in missing.items():
        for kernel in kernels:
            by_kernel.setdefault(kernel, []).append(target)
    detail = "; ".join(f"{k} missing from {', '.join(ts)}" for k, ts in list(by_kernel.items())[:5])
    if len(by_kernel) > 5:
        detail += f"; and {len(by_kernel) - 5} more kernels"
    return checks.Check(
        f"{name}: every kernel for every target",
        "gate.inspect",
        not by_kernel,
        f"{len(listing.kernels())} kernels in every SASS and PTX target"
        if not by_kernel
        else detail,
    )


def entry_points(state: RunState, options: RunOptions) -> list[tuple[execute.EntryPoint, bool]]:
    """The smoke program (seed log names) and the configured entry points, in order."""
    out = [
        (execute.EntryPoint(b.name, (str(b.output),), timeout=options.timeout), True)
        for b in state.builds
    ]
    out += [(spec.entry_point(), False) for spec in _config(options).entry_points]
    return out


def stage_execute(state: RunState, options: RunOptions) -> None:
    """Run every entry point natively and through forced JIT, recording what it loaded."""
    points = entry_points(state, options)
    if state.capability is None:
        reason = f"not run: {state.device_error or 'no CUDA device'}"
        for entry, _ in points:
            for path in execute.ExecPath:
                state.checks.append(
                    checks.Check(
                        f"{entry.name} [{path.value}]",
                        f"gate.execute.{path.value}",
                        False,
                        reason,
                        skipped=True,
                    )
                )
        state.evidence.write_text(
            "execution-status.txt", f"native=not run\nptx_jit=not run\nreason={reason}\n"
        )
        for artifact in _codeless(state):
            state.checks.append(
                checks.Check(
                    f"{artifact.name}: device code",
                    "gate.inspect",
                    False,
                    f"no device code of its own: covered only by execution, {reason}",
                    skipped=True,
                )
            )
        return
    loaded_by: dict[Path, list[str]] = {}
    status: list[str] = []
    for entry, smoke in points:
        runs = []
        for path in execute.ExecPath:
            log_name = path.log_name if smoke else f"entry-{_safe(entry.name)}.{path.log_name}"
            with tempfile.TemporaryDirectory(prefix="cuda-gate-ld-") as folder:
                logged = replace(entry, env=(*entry.env, *loaded.loader_env(Path(folder)).items()))
                run = execute.run_entry_point(logged, path, log_name)
                libraries = loaded.parse_loaded(Path(folder), cwd=Path(entry.cwd or "."))
            for lib in libraries:
                names = loaded_by.setdefault(lib.path, [])
                if entry.name not in names:
                    names.append(entry.name)
            runs.append(run)
            state.evidence.write_text(log_name, execute.log_text(run))
            state.checks.append(checks.execution_check(run))
        state.executions += runs
        codes = {
            r.path: "timeout" if r.result.timed_out else str(r.result.returncode) for r in runs
        }
        line = f"native={codes[execute.ExecPath.NATIVE]}\nptx_jit={codes[execute.ExecPath.JIT]}\n"
        status.append(line if smoke else f"{entry.name}: {line.replace(chr(10), ' ').strip()}\n")
        smoke_artifact = next(
            (a for a in state.artifacts if smoke and a.path == Path(entry.argv[0]).resolve()), None
        )
        if smoke_artifact is not None:
            state.checks.append(
                checks.prediction_check(
                    smoke_artifact.name,
                    smoke_artifact.listing,
                    state.capability,
                    state.driver.cuda_version if state.driver else None,
                    runs,
                )
            )
    state.evidence.write_text("execution-status.txt", "".join(status))
    _inspect_loaded(state, loaded_by)


def _inspect_loaded(state: RunState, loaded_by: dict[Path, list[str]]) -> None:
    """Inspect every loaded library that carries device code; report the undeclared ones."""
    declared = {a.path for a in state.artifacts}
    lines = []
    seen: set[str] = set()
    for path, users in loaded_by.items():
        listing = _device_code(path)
        mark = "device code" if listing and listing.entries else "no device code"
        if _CUDA_RUNTIME_PARTS.match(path.name):
            mark = "CUDA driver/JIT component (not inspected)"
            listing = None
        lines.append(f"{path}  [{mark}]  loaded by {', '.join(users)}\n")
        if listing is None or not listing.entries:
            continue
        prefix = f"loaded/{_unique(_safe(path.name), seen)}/"
        report = inspection.inspect_artifact(
            path,
            state.evidence,
            prefix=prefix,
            dump_sass="never",
            devices=(state.capability,) if state.capability else (),
            # The cross-check is for what the project builds; on a loaded vendor library
            # (libtorch_cuda: 5 GB and seconds per cuobjdump call) it would only cost.
            use_cuobjdump=False,
        )
        record = inspection.LoadedRecord(
            path, report.sha256, tuple(users), path in declared, report.listing, prefix
        )
        state.loaded.append(record)
        state.checks.append(_loaded_check(record, state))
    state.evidence.write_text("loaded-libraries.txt", "".join(lines) or "nothing recorded\n")
    for artifact in _codeless(state):
        state.checks.append(_runtime_check(artifact.name, state))


def _codeless(state: RunState) -> list[inspection.InspectedArtifact]:
    """Configured artifacts without device code of their own."""
    built = {b.output.resolve() for b in state.builds}
    return [a for a in state.artifacts if not a.listing.entries and a.path not in built]


def _device_code(path: Path) -> Listing | None:
    try:
        return reader.read_artifact(path, names=False).listing
    except BadInputError:
        return None


def _loaded_check(record: inspection.LoadedRecord, state: RunState) -> checks.Check:
    name = f"loaded {record.path.name}: device code for the device"
    cap = state.capability
    prediction = record.listing.predict(cap) if cap else None
    sass = " ".join(str(t) for t in record.listing.targets(Kind.SASS)) or "none"
    how = f"SASS {sass}; sha256 {record.sha256[:16]}…; loaded by {', '.join(record.entry_points)}"
    if not record.declared:
        how = f"not declared as an artifact; {how}"
    ok = prediction is None or prediction.native or not prediction.kernels
    return checks.Check(
        name,
        "gate.loaded",
        ok,
        f"{prediction.verdict() if prediction else 'not predicted'} on {cap}: {how}",
    )


def _runtime_check(name: str, state: RunState) -> checks.Check:
    """An artifact with no device code: its GPU work comes from elsewhere; say from where."""
    from_libs = [r.path.name for r in state.loaded]
    ran = [
        e for e in state.executions if not any(b.name == e.entry_point.name for b in state.builds)
    ]
    passed = bool(ran) and all(e.passed for e in ran)
    if from_libs:
        message = f"no device code of its own; its kernels come from {', '.join(from_libs)}"
    else:
        message = "runtime-generated: covered only by execution"
    return checks.Check(
        f"{name}: device code",
        "gate.inspect",
        passed,
        message if passed else f"{message}, and execution did not pass",
    )
