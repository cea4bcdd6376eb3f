"""Stage 4, inspect: host format, hash, dependencies and device code of every final artifact.

Our own fatbin reader (gate.reader) is the primary inspector: it needs no toolkit and
sees ``f`` targets and containers outside ``.nv_fatbin``. Where cuobjdump is available
it runs too, as an independent cross-check (gate.stages.crosscheck); its full SASS
dumps run on beside the execute stage (gate.stages.sassdump). What the stage learns of
each artifact is an :class:`~gate.stages.inspected.Inspected`, and the checks on it are
gate.stages.artifactchecks'.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from gate import fsutil
from gate.config import Config, ResolvedArtifact, resolve_artifact_specs
from gate.errors import BadInputError, GateError
from gate.evidence import EvidenceDir, unique_name
from gate.reader import artifacts as found_files
from gate.reader.hostelf import Dependency, HostFormat, dependencies, read_format
from gate.reader.limits import Limits
from gate.reader.read import ArtifactReport
from gate.record import CrossCheck
from gate.render import inspect as summary
from gate.rules.causes import Cause
from gate.rules.hosts import HostRule
from gate.rules.policy import DEFAULT_POLICY, ReleasePolicy
from gate.rules.require import Requirement
from gate.rules.targets import Capability, Version
from gate.rules.verdict import Check, CheckState
from gate.scan.cache import inspect_file
from gate.stages.artifactchecks import (
    artifact_checks,
    content_checks,
    coverage_check,
    host_check,
    listing_checks,
)
from gate.stages.crosscheck import cross_check, find_cuobjdump, our_list
from gate.stages.inspected import Inspected
from gate.stages.policycheck import sass_optional
from gate.stages.sassdump import Deferred
from gate.system import machine
from gate.tools import cuobjdump

# The stage as the pipeline reaches it (inspect.run, inspect.Deferred), and the checks
# and the record it is read with, from the modules that hold them.
__all__ = [
    "Deferred",
    "InspectOutcome",
    "Inspected",
    "content_checks",
    "coverage_check",
    "freshness_check",
    "host_check",
    "inspect_artifact",
    "listing_checks",
    "read_device_code",
    "run",
    "unpack_wheel",
]

_SHARED_LIBRARY = re.compile(r"\.so(\.\d+)*$")


@dataclass(frozen=True)
class InspectOutcome:
    """Every inspected artifact and the checks on them; SASS dumps may still be running."""

    artifacts: tuple[Inspected, ...]
    checks: tuple[Check, ...]
    failure: GateError | None = None
    deferred: Deferred | None = None


def read_device_code(path: Path, *, use_cache: bool = True) -> tuple[ArtifactReport, str, int]:
    """Our reader's report of ``path`` with names, and its SHA-256 and size, hashed once.

    A file already read (same SHA-256, same reader) comes from the inspection cache.
    """
    return inspect_file(path, names=True, limits=Limits.from_env(), use_cache=use_cache)


@dataclass(frozen=True)
class _Wanted:
    """One file to inspect: the smoke program, a configured artifact, or a wheel's library."""

    path: Path
    kernels: tuple[str, ...]
    smoke: bool = False
    in_wheel: bool = False
    shown: str | None = None  # its name in the image, when read from one


@dataclass(frozen=True)
class _Reading:
    """How every file of one run is read (:func:`inspect_artifact`'s settings)."""

    evidence: EvidenceDir
    devices: tuple[Capability, ...]
    deferred: Deferred
    dump_sass: str
    use_cuobjdump: bool
    use_cache: bool
    deps_of: Callable[[Path, HostFormat], tuple[Dependency, ...]] | None

    def inspect(self, want: _Wanted, prefix: str, policy: ReleasePolicy) -> Inspected:
        """Inspect one wanted file, its evidence under ``prefix``."""
        return inspect_artifact(
            want.path,
            self.evidence,
            kernels=want.kernels,
            smoke=want.smoke,
            prefix=prefix,
            dump_sass=self.dump_sass,
            devices=self.devices,
            use_cuobjdump=self.use_cuobjdump,
            use_cache=self.use_cache,
            deferred=self.deferred,
            in_wheel=want.in_wheel,
            policy=policy,
            deps_of=self.deps_of,
        )


@dataclass(frozen=True)
class _Judging:
    """What an inspected artifact is judged by (:func:`artifact_checks`' rules)."""

    host: HostRule
    required: tuple[Requirement, ...]
    policy: ReleasePolicy
    must_run: tuple[Capability, ...]
    devices: tuple[Capability, ...]
    driver_cuda: Version | None
    runner_class: str | None

    def checks(self, artifact: Inspected, evidence: EvidenceDir) -> list[Check]:
        """Every check on ``artifact`` by these rules."""
        return artifact_checks(
            artifact,
            evidence,
            self.host,
            self.required,
            self.driver_cuda,
            devices=self.devices,
            policy=self.policy,
            must_run=self.must_run,
            runner_class=self.runner_class,
        )


def run(
    evidence: EvidenceDir,
    *,
    config: Config,
    smoke: Path | None,
    smoke_kernels: tuple[str, ...],
    smoke_requirement: Requirement,
    required: tuple[Requirement, ...],
    capability: Capability | None,
    driver_cuda: Version | None,
    host: HostRule,
    host_arch: str,
    workdir: Path,
    built_since: float | None = None,
    dump_sass: str = "auto",
    use_cuobjdump: bool = True,
    use_cache: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
    runner_class: str | None = None,
    from_image: Sequence[tuple[ResolvedArtifact, str]] | None = None,
    deps_of: Callable[[Path, HostFormat], tuple[Dependency, ...]] | None = None,
) -> InspectOutcome:
    """Inspect the smoke program and every configured artifact (wheels library by library).

    ``host`` is what the configured artifacts must run on (gate.rules.hosts); the smoke
    program, which never ships, must run on ``host_arch``, the machine in front.
    ``built_since`` is when this run's build commands started (None when there were
    none): an artifact last written before then is stale (:func:`freshness_check`).
    Full SASS dumps are left running (``InspectOutcome.deferred``): the caller must call
    its ``finish()`` before the evidence is complete.
    ``progress`` hears (files done, files in all, the one read now) before each file.
    ``runner_class`` picks the devices ``[policy] required_devices`` asks of every artifact.
    ``from_image``: the artifacts as read from the delivery image (gate.stages.inimage),
    each with its name there, in place of the configured globs on this machine;
    ``deps_of`` then resolves dependencies as the image's own loader does.
    """
    deferred = Deferred()
    must_run = config.policy.devices_for(runner_class)
    devices: tuple[Capability, ...] = (capability or smoke_requirement.target.capability,)
    devices += tuple(d for d in (*config.devices, *must_run) if d not in devices)
    reading = _Reading(evidence, devices, deferred, dump_sass, use_cuobjdump, use_cache, deps_of)
    judging = _Judging(host, required, config.policy, must_run, devices, driver_cuda, runner_class)
    # The smoke program never ships: it runs (or not) on the machine in front.
    here = HostRule(host_arch, "this host")
    smoke_judging = replace(
        judging, host=here, required=(smoke_requirement,), policy=ReleasePolicy(), must_run=()
    )
    done: list[Inspected] = []
    checks: list[Check] = []
    seen: set[str] = set()
    try:
        wanted = [_Wanted(smoke, smoke_kernels, smoke=True)] if smoke is not None else []
        wanted += _configured(config, from_image, workdir, built_since, checks)
        for i, want in enumerate(wanted):
            if progress is not None:
                progress(i, len(wanted), want.path.name)
            rules = smoke_judging if want.smoke else judging
            prefix = "" if want.smoke else f"artifacts/{unique_name(want.path.name, seen)}/"
            artifact = reading.inspect(want, prefix, rules.policy)
            done.append(replace(artifact, shown=want.shown))
            evidence.write_text(
                "sha256.txt", "".join(f"{a.sha256}  {a.shown or a.path}\n" for a in done)
            )
            checks += rules.checks(artifact, evidence)
    except GateError as e:
        return InspectOutcome(tuple(done), tuple(checks), e, deferred)
    except BaseException:
        deferred.finish()  # a bug: leave no dump running behind the error
        raise
    return InspectOutcome(tuple(done), tuple(checks), deferred=deferred)


def _configured(
    config: Config,
    from_image: Sequence[tuple[ResolvedArtifact, str]] | None,
    workdir: Path,
    built_since: float | None,
    checks: list[Check],
) -> list[_Wanted]:
    """The configured artifacts (or those read from the image), each wheel's libraries
    unpacked into ``workdir``; each one's freshness check is added to ``checks`` as it
    is found, so that those before a broken wheel stay in the outcome."""
    found = (
        from_image
        if from_image is not None
        else [(spec, None) for spec in resolve_artifact_specs(config)]
    )
    wanted: list[_Wanted] = []
    for spec, shown_as in found:
        if built_since is not None:
            checks.append(freshness_check(spec.path, built_since, fail=config.stale_fails))
        if spec.is_wheel:
            unpacked = workdir / "wheels"
            wanted += [
                _Wanted(
                    lib, spec.kernels, in_wheel=True, shown=_member_name(shown_as, lib, unpacked)
                )
                for lib in unpack_wheel(spec.path, unpacked)
            ]
        else:
            wanted.append(_Wanted(spec.path, spec.kernels, shown=shown_as))
    return wanted


def _member_name(wheel: str | None, library: Path, unpacked: Path) -> str | None:
    """A wheel's library in the image: ``IMAGE!/opt/x.whl!lib/x.so`` (None: not an image's)."""
    if wheel is None:
        return None
    inside = library.relative_to(unpacked).parts[1:]  # past the wheel's own folder
    return f"{wheel}!{'/'.join(inside)}"


# File systems keep modification times to a second or two (FAT: two); a file the build
# wrote in the second it started must not read as older than the build.
_MTIME_SLACK = 2.0


def freshness_check(path: Path, built_since: float, *, fail: bool) -> Check:
    """Whether this run's build wrote ``path``: last modified after the build started.

    A build that leaves an artifact untouched (make said "up to date" after the flags
    changed) would have the gate inspect the old file. A warning by default; a failure
    with ``stale_artifacts = "fail"``.
    """
    try:
        written = path.stat().st_mtime
    except OSError as e:
        raise BadInputError(f"{path}: cannot read: {e.strerror or e}") from e
    name = f"{path.name}: written by this run's build"
    if written >= built_since - _MTIME_SLACK:
        return Check(name, "gate.inspect", CheckState.PASSED, f"modified at {_when(written)}")
    message = (
        f"not written by this run's build: last modified {_when(written)}, before the build "
        f"started at {_when(built_since)}; the gate inspects an older file (did the build "
        "skip it as up to date?)"
    )
    if fail:
        return Check(name, "gate.inspect", CheckState.FAILED, message, cause=Cause.STALE_ARTIFACT)
    return Check(
        name, "gate.inspect", CheckState.WARNED, message + ' (stale_artifacts = "fail" fails)'
    )


def _when(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def unpack_wheel(wheel: Path, into: Path) -> list[Path]:
    """The shared libraries inside a wheel, written out so they can be hashed, run and verified.

    Members are streamed to disk with the reader's bounds (never a size the zip claims),
    never held in memory; a broken member is a BadInputError naming the wheel and the
    member.
    """
    target = into / wheel.name
    written = []
    limits = Limits.from_env()
    with found_files.open_zip(wheel, str(wheel)) as archive:
        for info in found_files.wheel_members(archive.zip):
            base = info.filename.rsplit("/", 1)[-1]
            if not _SHARED_LIBRARY.search(base):
                continue
            path = target.joinpath(*_safe_member_parts(info.filename, wheel))
            with fsutil.atomic_file(path, mode=0o755) as out:
                found_files.extract_member(archive, info, f"{wheel}!{info.filename}", limits, out)
            written.append(path)
    return written


def _safe_member_parts(name: str, wheel: Path) -> list[str]:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise BadInputError(f"{wheel}: member {name!r} would be written outside the wheel folder")
    return parts


def inspect_artifact(
    path: Path,
    evidence: EvidenceDir,
    *,
    kernels: tuple[str, ...] = (),
    smoke: bool = False,
    prefix: str = "",
    dump_sass: str = "auto",
    devices: tuple[Capability, ...] = (),
    use_cuobjdump: bool = True,
    use_cache: bool = True,
    deferred: Deferred | None = None,
    in_wheel: bool = False,
    policy: ReleasePolicy = DEFAULT_POLICY,
    deps_of: Callable[[Path, HostFormat], tuple[Dependency, ...]] | None = None,
) -> Inspected:
    """Inspect one artifact with our reader, cross-checked by cuobjdump where available.

    With ``deferred``, its full SASS dump is left running there; else it is waited for.
    ``policy``: a SASS dump is not checked for SASS the policy does not ask for
    (:func:`gate.stages.policycheck.sass_optional`).
    """
    fmt = read_format(path)
    report, digest, size = read_device_code(path, use_cache=use_cache)
    deps = (
        deps_of(path, fmt) if deps_of is not None else dependencies(path, fmt, machine.ld_cache())
    )
    _write_reader_evidence(evidence, prefix, report, fmt=fmt, deps=deps, devices=devices)
    tool, note = find_cuobjdump(use_cuobjdump=use_cuobjdump)
    cross: CrossCheck | None = None
    modules: tuple[cuobjdump.PtxText, ...] = ()
    if tool is None:
        evidence.write_text(f"{prefix}elf-list.txt", our_list(report.listing))
    else:
        cross, modules = cross_check(
            tool,
            report.listing,
            path,
            evidence,
            prefix=prefix,
            dump_sass=dump_sass,
            size=size,
            digest=digest,
            use_cache=use_cache,
            deferred=deferred,
            # As artifact_checks decides.
            checked=(smoke or bool(report.listing.entries))
            and not sass_optional(report.listing, policy),
        )
    return Inspected(
        name=path.name,
        path=path.resolve(),
        sha256=digest,
        size=size,
        host=fmt,
        dependencies=deps,
        listing=report.listing,
        kernels=kernels,
        smoke=smoke,
        prefix=prefix,
        ptx_modules=modules,
        cross_check=cross,
        cross_check_note=note,
        in_wheel=in_wheel,
    )


def _write_reader_evidence(
    evidence: EvidenceDir,
    prefix: str,
    report: ArtifactReport,
    *,
    fmt: HostFormat,
    deps: tuple[Dependency, ...],
    devices: tuple[Capability, ...],
) -> None:
    """What our reader saw: the device code (text and JSON), host format and dependencies."""
    view = summary.artifact_json(report, devices)
    evidence.write_text(f"{prefix}device-code.txt", summary.console(view))
    evidence.write_json(f"{prefix}device-code.json", {"version": 1, "artifact": view})
    evidence.write_text(f"{prefix}binary-format.txt", fmt.description + "\n")
    evidence.write_text(
        f"{prefix}dependencies.txt",
        "".join(f"{d.needed_by}: {d.name} => {d.resolved or 'not found'}\n" for d in deps),
    )
