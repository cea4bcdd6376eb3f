"""Stage 4, inspect: host format, hash, dependencies and device code of every final artifact.

Our own fatbin reader (gate.reader) is the primary inspector: it needs no toolkit and
sees ``f`` targets and containers outside ``.nv_fatbin``. Where cuobjdump is available
it runs too, as an independent cross-check: any disagreement on what cuobjdump can
show (kinds, archs, order, kernel names, PTX ISA) fails the gate, with both listings in
the evidence. Every listing is judged by its content, never by a tool's exit status.

Per artifact the seed's checks: the host ELF machine, the required targets as SASS
and as PTX, the required kernels in both, every kernel in every target, PTX headers,
and (when the driver is known) whether the driver can JIT the PTX's ISA.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from gate import buildcache, cuobjdump, fsutil, machine, proc
from gate.config import Config, ResolvedArtifact, resolve_artifact_specs
from gate.demangle import demangle
from gate.errors import BadInputError, GateError, ToolError
from gate.evidence import EvidenceDir, unique_name
from gate.reader import artifacts as found_files
from gate.reader import summary
from gate.reader.hostelf import Dependency, HostFormat, dependencies, read_format
from gate.reader.limits import Limits
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.reader.read import ArtifactReport
from gate.record import Artifact, CrossCheck
from gate.render.text import count
from gate.rules.causes import Cause, ExecPath
from gate.rules.hosts import HostRule
from gate.rules.kernels import describe, matching, parse
from gate.rules.policy import DEFAULT_POLICY, Action, ReleasePolicy
from gate.rules.require import Requirement, why_not
from gate.rules.routes import general, jit_support, min_driver
from gate.rules.targets import Capability, Target, Variant, Version
from gate.rules.verdict import Check, CheckState
from gate.scan.cache import inspect_file
from gate.stages.policycheck import policy_checks, sass_optional, stand_in_entries
from gate.stages.stubcheck import stub_check

# Full SASS dumps cost minutes on real libraries (FATBIN.md): only below this size, or on request.
SASS_DUMP_LIMIT = 16 * 1024 * 1024
INSPECTOR = "cuda-gate reader"
_SASS_FUNCTION = re.compile(r"^\s*Function : \S", re.MULTILINE)
_SHARED_LIBRARY = re.compile(r"\.so(\.\d+)*$")


@dataclass(frozen=True)
class Inspected:
    """Everything the gate learned about one final artifact."""

    name: str
    path: Path
    sha256: str
    size: int
    host: HostFormat
    dependencies: tuple[Dependency, ...]
    listing: Listing
    kernels: tuple[str, ...]  # the kernels it must carry
    smoke: bool
    prefix: str  # its evidence files' folder ("" for the smoke program)
    ptx_modules: tuple[cuobjdump.PtxText, ...] = ()
    cross_check: CrossCheck | None = None
    cross_check_note: str = ""
    in_wheel: bool = False  # a shared library unpacked from a configured wheel
    shown: str | None = None  # its name in the evidence when not its path here (IMAGE!/path)

    def record(self) -> Artifact:
        """The artifact as the run record keeps it."""
        return Artifact(
            name=self.name,
            path=self.shown or str(self.path),
            sha256=self.sha256,
            size=self.size,
            host_format=self.host.description,
            elf_machine=self.host.machine_text,
            dependencies=self.dependencies,
            listing=self.listing,
            inspector=INSPECTOR,
            cross_check=self.cross_check,
        )


# A dump under way: its future, the evidence, the artifact's name and prefix, checked?
_Dump = tuple[Future[proc.Result | ToolError], EvidenceDir, str, str, bool]


class Deferred:
    """Evidence that only one check reads, still being written: the full SASS dumps.

    ``cuobjdump --dump-sass`` is the slowest of cuobjdump's calls by far (a second of
    nvdisasm for an 11 MB torch extension) and only fills ``sass.txt``, whose one check
    is "SASS dump holds SASS": it runs on while the execute stage does, and
    :meth:`finish` (called by the pipeline before the report, whatever happened in
    between) waits for it, writes the files and gives that check.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[_Dump] = []

    def submit(
        self,
        work: Callable[[], proc.Result | ToolError],
        evidence: EvidenceDir,
        name: str,
        prefix: str,
        *,
        checked: bool,
    ) -> None:
        """Start ``work``; its output becomes artifact ``name``'s ``{prefix}sass.txt``,
        checked for SASS when ``checked`` (an artifact with device code of its own)."""
        if self._pool is None:
            # nvdisasm is one core per dump: leave most of the machine to the project.
            workers = machine.background_threads()
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="sass-dump")
        self._pending.append((self._pool.submit(work), evidence, name, prefix, checked))

    def finish(self) -> list[Check]:
        """Wait for every dump, write it (or why it is absent), and check what it holds.

        Never raises: a dump that cannot be written is a failed check naming why, and the
        other dumps are still written.
        """
        pending, self._pending = self._pending, []
        checks: list[Check] = []
        try:
            for future, evidence, name, prefix, checked in pending:
                try:
                    _write_sass(evidence, prefix, future.result())
                    if checked:
                        checks += _holds_checks(evidence, name, prefix, _SASS_HOLDS)
                except GateError as e:
                    checks.append(_dump_failed(name, e.one_line()))
                except Exception as e:  # noqa: BLE001  (a bug must still leave a report)
                    checks.append(_dump_failed(name, f"internal error: {type(e).__name__}: {e}"))
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
                self._pool = None
        return checks


def _dump_failed(name: str, why: str) -> Check:
    return Check(f"{name}: SASS dump", "gate.inspect", CheckState.FAILED, why, cause=Cause.EVIDENCE)


def _write_sass(evidence: EvidenceDir, prefix: str, dumped: proc.Result | ToolError) -> None:
    if isinstance(dumped, ToolError):
        # The listings do not need nvdisasm; a full dump does. Say why it is absent.
        evidence.write_text(f"{prefix}sass-not-dumped.txt", dumped.one_line() + "\n")
    else:
        evidence.write_text(f"{prefix}sass.txt", dumped.stdout)


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
    policy = config.policy
    must_run = policy.devices_for(runner_class)
    devices: tuple[Capability, ...] = (capability or smoke_requirement.target.capability,)
    devices += tuple(d for d in (*config.devices, *must_run) if d not in devices)
    done: list[Inspected] = []
    checks: list[Check] = []
    seen: set[str] = set()
    try:
        wanted: list[tuple[Path, tuple[str, ...], bool, bool, str | None]] = (
            [(smoke, smoke_kernels, True, False, None)] if smoke is not None else []
        )
        found = (
            from_image
            if from_image is not None
            else [(spec, None) for spec in resolve_artifact_specs(config)]
        )
        for spec, shown_as in found:
            if built_since is not None:
                checks.append(freshness_check(spec.path, built_since, fail=config.stale_fails))
            if spec.is_wheel:
                unpacked = workdir / "wheels"
                libraries = unpack_wheel(spec.path, unpacked)
                wanted += [
                    (lib, spec.kernels, False, True, _member_name(shown_as, lib, unpacked))
                    for lib in libraries
                ]
            else:
                wanted.append((spec.path, spec.kernels, False, False, shown_as))
        for i, (path, kernels, is_smoke, in_wheel, shown_as) in enumerate(wanted):
            if progress is not None:
                progress(i, len(wanted), path.name)
            prefix = "" if is_smoke else f"artifacts/{unique_name(path.name, seen)}/"
            artifact = inspect_artifact(
                path,
                evidence,
                kernels=kernels,
                smoke=is_smoke,
                prefix=prefix,
                dump_sass=dump_sass,
                devices=devices,
                use_cuobjdump=use_cuobjdump,
                use_cache=use_cache,
                deferred=deferred,
                in_wheel=in_wheel,
                policy=ReleasePolicy() if is_smoke else policy,
                deps_of=deps_of,
            )
            done.append(replace(artifact, shown=shown_as))
            evidence.write_text(
                "sha256.txt", "".join(f"{a.sha256}  {a.shown or a.path}\n" for a in done)
            )
            # The smoke program never ships: it runs (or not) on the machine in front.
            here = HostRule(host_arch, "this host")
            checks += artifact_checks(
                artifact,
                evidence,
                here if is_smoke else host,
                (smoke_requirement,) if is_smoke else required,
                driver_cuda,
                devices=devices,
                policy=ReleasePolicy() if is_smoke else policy,
                must_run=() if is_smoke else must_run,
                runner_class=runner_class,
            )
    except GateError as e:
        return InspectOutcome(tuple(done), tuple(checks), e, deferred)
    except BaseException:
        deferred.finish()  # a bug: leave no dump running behind the error
        raise
    return InspectOutcome(tuple(done), tuple(checks), deferred=deferred)


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
    view = summary.artifact_json(report, devices)
    evidence.write_text(f"{prefix}device-code.txt", summary.console(view, demangle=demangle))
    evidence.write_json(f"{prefix}device-code.json", {"version": 1, "artifact": view})
    evidence.write_text(f"{prefix}binary-format.txt", fmt.description + "\n")
    evidence.write_text(
        f"{prefix}dependencies.txt",
        "".join(f"{d.needed_by}: {d.name} => {d.resolved or 'not found'}\n" for d in deps),
    )
    try:
        tool = cuobjdump.find() if use_cuobjdump else None
        note = "cuobjdump cross-check not run: turned off with --no-cuobjdump"
    except ToolError as e:
        tool, note = (
            None,
            (
                f"cuobjdump cross-check not run: {e.one_line()}; "
                "`pip install 'cuda-gate[cuobjdump]'` (nox -s gate does) gives it"
            ),
        )
    cross: CrossCheck | None = None
    modules: tuple[cuobjdump.PtxText, ...] = ()
    if tool is None:
        evidence.write_text(f"{prefix}elf-list.txt", _our_list(report.listing))
    else:
        theirs, modules = _cuobjdump_listing(
            tool,
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
        cross = CrossCheck(
            f"cuobjdump ({cuobjdump.version(tool)})", compare(report.listing, theirs)
        )
        note = ""
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


def _our_list(listing: Listing) -> str:
    """An ELF/PTX list in cuobjdump's style, from our reader (when cuobjdump is absent)."""
    lines = []
    for kind, label in ((Kind.SASS, "ELF"), (Kind.PTX, "PTX")):
        for i, e in enumerate(listing.of_kind(kind), 1):
            lines.append(f"{label} file {i:>4}: {e.name or 'entry'}.{e.target.as_sass()}")
    return "\n".join(lines) + "\n"


def _cuobjdump_listing(
    tool: str,
    path: Path,
    evidence: EvidenceDir,
    *,
    prefix: str,
    dump_sass: str,
    size: int,
    digest: str,
    use_cache: bool = True,
    deferred: Deferred | None = None,
    checked: bool = True,
) -> tuple[Listing, tuple[cuobjdump.PtxText, ...]]:
    """cuobjdump's view of one artifact: its calls run side by side, and an output already
    kept for these bytes and this cuobjdump is not asked again (gate.buildcache).

    With ``deferred``, the full SASS dump is left running there (its SASS checked when
    ``checked``); without, it is waited for and written here.
    """
    wanted = [["--list-elf"], ["--list-ptx"], ["-symbols"], ["--dump-ptx"]]
    dump = dump_sass == "always" or (dump_sass == "auto" and size <= SASS_DUMP_LIMIT)
    if dump and deferred is None:
        wanted.append(["--dump-sass"])

    def one(args: list[str], *, claim: bool = True) -> proc.Result | ToolError:
        try:
            return buildcache.tool_output(
                [tool, *args, str(path)],
                subject=path,
                digest=digest,
                companions=[str(Path(tool).parent / "nvdisasm")],
                run=lambda: cuobjdump.run_tool(tool, args, path, claim_strays=claim),
                use_cache=use_cache,
            )
        except ToolError as e:
            return e

    if dump and deferred is not None:
        # It runs on beside the project's entry points: it claims no strays (gate.proc).
        deferred.submit(
            lambda: one(["--dump-sass"], claim=False), evidence, path.name, prefix, checked=checked
        )
    with ThreadPoolExecutor(len(wanted)) as pool:
        elf_list, ptx_list, symbols, ptx, *sass = pool.map(one, wanted)
    for done in (elf_list, ptx_list, symbols, ptx):
        if isinstance(done, ToolError):
            raise done
    assert isinstance(elf_list, proc.Result)  # noqa: S101 - errors were raised above
    assert isinstance(ptx_list, proc.Result)  # noqa: S101
    assert isinstance(symbols, proc.Result)  # noqa: S101
    assert isinstance(ptx, proc.Result)  # noqa: S101
    evidence.write_text(f"{prefix}elf-list.txt", elf_list.output())
    evidence.write_text(f"{prefix}ptx-list.txt", ptx_list.output())
    evidence.write_text(f"{prefix}symbols.txt", symbols.output())
    evidence.write_text(f"{prefix}ptx.txt", ptx.stdout)
    for dumped in sass:
        _write_sass(evidence, prefix, dumped)
    return cuobjdump.listing(symbols.stdout, ptx.stdout), tuple(
        cuobjdump.parse_ptx_dump(ptx.stdout)
    )


def _comparable(entry: DeviceEntry) -> tuple[str, str, str, tuple[str, ...]]:
    # cuobjdump names an sm_100f cubin sm_100: compare without the family suffix.
    target = entry.target
    if target.variant is Variant.FAMILY:
        target = target.plain()
    isa = str(entry.ptx_isa) if entry.ptx_isa else "-"
    return entry.kind.value, str(target), isa, tuple(sorted(entry.kernels))


def compare(ours: Listing, theirs: Listing) -> tuple[str, ...]:
    """Where cuobjdump's listing and ours differ, in the sections cuobjdump reads."""
    sections = {e.section for e in ours.entries}
    primary = ".nv_fatbin" if ".nv_fatbin" in sections else "__nv_relfatbin"
    out: list[str] = []
    for kind in (Kind.SASS, Kind.PTX):
        mine = [_comparable(e) for e in ours.of_kind(kind) if e.section == primary]
        other = [_comparable(e) for e in theirs.of_kind(kind)]
        if len(mine) != len(other):
            out.append(f"{kind.value}: cuda-gate lists {len(mine)} entries, cuobjdump {len(other)}")
        for i, (a, b) in enumerate(zip(mine, other, strict=False), 1):
            if a[:2] != b[:2]:
                out.append(f"{kind.value} entry {i}: cuda-gate {a[1]}, cuobjdump {b[1]}")
            elif kind is Kind.PTX and a[2] != b[2] and b[2] != "-":
                out.append(f"{kind.value} entry {i} ({a[1]}): ISA {a[2]} vs cuobjdump {b[2]}")
            elif a[3] != b[3]:
                only_ours = sorted(set(a[3]) - set(b[3]))[:3]
                only_theirs = sorted(set(b[3]) - set(a[3]))[:3]
                out.append(
                    f"{kind.value} entry {i} ({a[1]}): kernels differ "
                    f"(only cuda-gate: {only_ours}; only cuobjdump: {only_theirs})"
                )
    return tuple(out)


# --- checks -------------------------------------------------------------------------------


def artifact_checks(
    artifact: Inspected,
    evidence: EvidenceDir,
    host: HostRule,
    required: Sequence[Requirement],
    driver_cuda: Version | None,
    *,
    devices: Sequence[Capability] = (),
    policy: ReleasePolicy = DEFAULT_POLICY,
    must_run: Sequence[Capability] = (),
    runner_class: str | None = None,
) -> list[Check]:
    """Every check on one artifact; an artifact without device code of its own gets fewer,
    and fails when kernels are required of it. ``devices``: those its trap stubs are
    judged for (gate.stages.stubcheck); ``policy`` the release policy it is judged by,
    ``must_run`` the devices it requires of ``runner_class`` (gate.stages.policycheck)."""
    has_code = artifact.smoke or bool(artifact.listing.entries)
    checks = [host_check(artifact, host)]
    if has_code:
        name, listing = artifact.name, artifact.listing
        checks += content_checks(artifact, evidence, policy)
        for requirement in required:
            checks += listing_checks(name, listing, requirement, artifact.kernels, policy)
        checks.append(coverage_check(name, listing))
        stubs = stub_check(name, listing, devices, trap_stubs=policy.trap_stubs)
        checks += [stubs] if stubs is not None else []
        checks += driver_checks(name, listing, required, driver_cuda)
        checks += policy_checks(
            name,
            listing,
            required,
            policy,
            devices=must_run,
            runner_class=runner_class,
            driver=driver_cuda,
        )
    elif artifact.kernels and not artifact.in_wheel:
        checks.append(
            Check(
                f"{artifact.name}: kernels {', '.join(artifact.kernels)}",
                "gate.inspect",
                CheckState.FAILED,
                "required of it, but it holds no device code",
                cause=Cause.MISSING_KERNEL,
            )
        )
    if artifact.cross_check is not None:
        checks.append(cross_check(artifact))
    return checks


def host_check(artifact: Inspected, host: HostRule) -> Check:
    """The artifact's ELF machine is the one its host runs (gate.rules.hosts)."""
    ok = artifact.host.matches_host(host.host) and host.conflict is None
    machine = artifact.host.machine_text
    if host.conflict is not None:
        message = f"{machine}: {host.conflict}"
    elif ok:
        message = f"{machine} matches {host.host} ({host.reason})"
    else:
        message = f"{machine} does not run on {host.host} ({host.reason})"
    return Check(
        f"{artifact.name}: host ELF machine",
        "gate.inspect",
        CheckState.of(ok),
        message,
        cause=None if ok else Cause.HOST_ARCH,
    )


_Holds = tuple[tuple[str, str, Callable[[str], bool]], ...]


def _holds_checks(evidence: EvidenceDir, name: str, prefix: str, holds: _Holds) -> list[Check]:
    """For each (file, what, test) whose file exists: the check that it holds ``what``.

    A file not written (no cuobjdump, or its SASS dump still running) gives no check.
    """
    checks = []
    for file_name, what, test in holds:
        path = evidence.path(prefix + file_name)
        if not path.exists():
            continue
        ok = test(path.read_text(encoding="utf-8", errors="replace"))
        checks.append(
            Check(
                f"{name}: {what}",
                "gate.inspect",
                CheckState.of(ok),
                f"{prefix}{file_name} has it" if ok else f"{prefix}{file_name} has none",
                cause=None if ok else Cause.NO_DEVICE_CODE,
            )
        )
    return checks


def content_checks(
    artifact: Inspected, evidence: EvidenceDir, policy: ReleasePolicy = DEFAULT_POLICY
) -> list[Check]:
    """The listings and dumps hold what their names say: ELF entries, SASS code, PTX text.

    ``sass.txt`` with only cuobjdump's "Fatbin ptx code" header is not a SASS dump. An
    artifact of PTX alone that the policy accepts as device code is asked for no cubin
    and no SASS (:func:`gate.stages.policycheck.sass_optional`).
    """
    cls, name, prefix = "gate.inspect", artifact.name, artifact.prefix
    holds = (*_LISTING_HOLDS, *_SASS_HOLDS)
    if sass_optional(artifact.listing, policy):
        holds = tuple(h for h in holds if h not in (_LISTS_CUBIN, *_SASS_HOLDS))
    checks = _holds_checks(evidence, name, prefix, holds)
    for module in artifact.ptx_modules:
        missing = [
            label
            for label, ok in ((".version", module.version), (".target", module.target))
            if not ok
        ]
        checks.append(
            Check(
                f"{name}: PTX {module.arch} declares .version and .target",
                cls,
                CheckState.of(not missing),
                f".version {module.version}, .target {module.target}, "
                f"{count(len(module.entries), 'entry', 'entries')}"
                if not missing
                else f"PTX {module.arch} lacks {', '.join(missing)}",
                cause=Cause.INVALID_PTX if missing else None,
            )
        )
    return checks


def _lists_cubin(text: str) -> bool:
    return bool(cuobjdump.parse_list(text, "ELF"))


def _holds_ptx(text: str) -> bool:
    return ".target" in text or ".entry" in text


def _holds_sass(text: str) -> bool:
    return bool(_SASS_FUNCTION.search(text))


_LISTS_CUBIN = ("elf-list.txt", "ELF listing lists a cubin", _lists_cubin)
_LISTING_HOLDS: _Holds = (
    _LISTS_CUBIN,
    ("ptx.txt", "PTX dump holds PTX", _holds_ptx),
)
_SASS_HOLDS: _Holds = (("sass.txt", "SASS dump holds SASS", _holds_sass),)


def listing_checks(
    artifact: str,
    listing: Listing,
    requirement: Requirement,
    kernels: Sequence[str],
    policy: ReleasePolicy = DEFAULT_POLICY,
) -> list[Check]:
    """The seed's inspection checks: the target and the kernels, in SASS and in PTX.

    What satisfies the required target is the decision core's table
    (gate.rules.require); a kernel is matched by its whole name (gate.rules.kernels),
    and the check names the kernel it matched. What a missing target does is the
    release policy's: ``missing_sass`` and ``missing_ptx`` (fail, warn; PTX also
    allow), and ``ptx_as_device_code``, under which PTX that JIT-compiles for the
    target stands in for its SASS (a warning: the first launch JIT-compiles).
    """
    checks = []
    for kind, label, cause in (
        (Kind.SASS, requirement.sass_label(), Cause.MISSING_SASS),
        (Kind.PTX, requirement.ptx_label(), Cause.MISSING_PTX),
    ):
        ptx = kind is Kind.PTX
        action = policy.missing_ptx if ptx else policy.missing_sass
        key = "missing_ptx" if ptx else "missing_sass"
        matching = [e for e in listing.of_kind(kind) if requirement.satisfied_by(e.target)]
        # A kernel-less entry (nvcc's device-link stub) is no kernel's code: where the
        # artifact has kernels, only an entry holding some stands for the target.
        entries = [e for e in matching if e.kernels or not listing.kernels()]
        found = tuple(dict.fromkeys(e.target for e in entries))
        where = f"{label} {kind.value}"
        state = CheckState.PASSED
        if entries:
            isa = f" (ISA {entries[0].ptx_isa})" if ptx and entries[0].ptx_isa else ""
            message = f"{kind.value} for {label} present: {_names(found)}{isa}"
        else:
            if matching:
                stubs = _names(tuple(dict.fromkeys(e.target for e in matching)))
                message = f"no {kind.value} for {label}: only kernel-less entries ({stubs})"
            else:
                message = _lto_only(listing) or why_not(requirement, listing.targets(kind), ptx=ptx)
            standing = (
                ()
                if ptx or not policy.ptx_as_device_code
                else stand_in_entries(listing, requirement)
            )
            if standing:
                entries = list(standing)
                shown = _names(tuple(dict.fromkeys(e.target for e in standing)))
                where = f"{shown} PTX (standing in for {label} SASS)"
                state = CheckState.WARNED
                message += (
                    f"; {shown} PTX stands in as device code (policy.ptx_as_device_code = "
                    "true): the driver JIT-compiles it at the first launch"
                )
            else:
                state = action.state(found=True)
                message += (
                    f' (policy.{key} = "{action.value}")' if action is not Action.FAIL else ""
                )
        checks.append(
            Check(
                f"{artifact}: {kind.value} for {label}",
                "gate.inspect",
                state,
                message,
                cause=cause if state is CheckState.FAILED else None,
                path=ExecPath.JIT if ptx else ExecPath.NATIVE,
            )
        )
        if not entries and not action.judged:
            continue  # an allowed absence: no kernel is looked for in code that is not there
        names = {k for e in entries for k in e.kernels}
        for kernel in kernels:
            check = _kernel_check(artifact, kernel, names, where, ptx=ptx)
            if not entries and check.failed and action is Action.WARN:
                check = replace(check, state=CheckState.WARNED, cause=None)
            checks.append(check)
    return checks


def _kernel_check(artifact: str, wanted: str, names: set[str], where: str, *, ptx: bool) -> Check:
    """One required kernel in one target's SASS or PTX: which kernel matched, or why none."""
    found = matching(wanted, names)
    if found:
        message = f"{wanted} present in {where} as {describe(found)}"
    else:
        alike = sorted(n for n in names if wanted in (parse(n).function or n))[:3]
        hint = f" (kernels named like it: {describe(tuple(alike))})" if alike else ""
        message = f"{wanted} missing from {where}{hint}"
    return Check(
        f"{artifact}: kernel {wanted} in {where}",
        "gate.inspect",
        CheckState.of(bool(found)),
        message,
        cause=None if found else Cause.MISSING_KERNEL,
        path=ExecPath.JIT if ptx else ExecPath.NATIVE,
    )


def _lto_only(listing: Listing) -> str | None:
    """The reason when the artifact holds LTO IR and nothing that can run."""
    lto = listing.targets(Kind.LTOIR)
    if not lto or listing.targets(Kind.SASS) or listing.has_ptx:
        return None
    shown = " ".join(f"lto_{t.number}{t.variant.value}" for t in lto)
    return f"LTO IR only ({shown}): it runs nowhere until it is device-linked; device-link it first"


def coverage_check(name: str, listing: Listing) -> Check:
    """Per kernel of the plain builds: present for one target but missing from another
    (gate.reader.listing.missing_by_target); a kernel only in a/f builds is expected
    nowhere else and is counted apart."""
    missing = listing.missing_kernels()
    by_kernel: dict[str, list[str]] = {}
    for target, kernels in missing.items():
        for kernel in kernels:
            by_kernel.setdefault(kernel, []).append(target)
    shown = list(by_kernel.items())[:5]
    detail = "; ".join(f"{demangle(k)} missing from {', '.join(ts)}" for k, ts in shown)
    if len(by_kernel) > 5:
        detail += f"; and {count(len(by_kernel) - 5, 'more kernel', 'more kernels')}"
    general_builds = {
        k
        for e in listing.entries
        if e.kind is not Kind.LTOIR and general(e.target)
        for k in e.kernels
    }
    special = len(listing.kernels()) - len(general_builds)
    extra = f"; {count(special, 'kernel')} only in a/f builds" if special else ""
    return Check(
        f"{name}: every kernel for every target",
        "gate.inspect",
        CheckState.of(not by_kernel),
        f"{count(len(general_builds), 'kernel', 'kernels')} in every plain SASS and PTX target"
        + extra
        if not by_kernel
        else detail,
        cause=Cause.MISSING_KERNEL if by_kernel else None,
    )


def driver_checks(
    name: str, listing: Listing, required: Sequence[Requirement], driver_cuda: Version | None
) -> list[Check]:
    """The driver can JIT the required targets' PTX (gate.rules.routes.jit_support).

    One check per required target that has PTX with an ISA; none where the driver is not
    known. Where the rules cannot tell (an ISA and a driver both newer than they know),
    the check warns.
    """
    if driver_cuda is None:
        return []
    checks = []
    for requirement in required:
        entries = [
            e
            for e in listing.of_kind(Kind.PTX)
            if requirement.satisfied_by(e.target) and e.ptx_isa is not None
        ]
        if not entries:
            continue
        entry = entries[0]
        assert entry.ptx_isa is not None  # noqa: S101 - filtered above
        support = jit_support(entry.ptx_isa, driver_cuda)
        need = min_driver(entry.ptx_isa)
        needs = f"driver CUDA >= {need}" if need else "a driver newer than the rules know"
        state = CheckState.WARNED if support is None else CheckState.of(support)
        checks.append(
            Check(
                f"{name}: driver can JIT {entry.target} PTX",
                "gate.inspect",
                state,
                f"PTX ISA {entry.ptx_isa} needs {needs}; the driver is CUDA {driver_cuda}"
                + ("; the rules cannot tell whether it can" if support is None else ""),
                cause=Cause.PTX_NEEDS_DRIVER if support is False else None,
                path=ExecPath.JIT,
            )
        )
    return checks


def cross_check(artifact: Inspected) -> Check:
    """The cuobjdump cross-check as a check (only where it ran: see ``cross_check_note``)."""
    name = f"{artifact.name}: cuobjdump agrees with the cuda-gate reader"
    assert artifact.cross_check is not None  # noqa: S101 - the caller checks
    issues = artifact.cross_check.disagreements
    return Check(
        name,
        "gate.inspect",
        CheckState.of(not issues),
        f"{artifact.cross_check.tool}: same kinds, archs, order and kernel names"
        if not issues
        else "; ".join(issues[:5]) + (" ..." if len(issues) > 5 else ""),
        cause=Cause.CROSS_CHECK if issues else None,
    )


def _names(targets: Iterable[Target]) -> str:
    return " ".join(str(t) for t in targets) or "none"
