"""What the launch recorder saw, judged: kernel coverage per artifact and path, runtime modules.

1. Coverage (gate.rules.coverage): per artifact with kernels, per path, the kernels
   launched of the kernels carried, the ones never launched named (demangled,
   shortest first), and which code ran each launched kernel: where the driver told
   (``CU_FUNC_ATTRIBUTE_BINARY_VERSION``/``PTX_VERSION``, asked at a driver launch),
   SASS for which arch on the native path, JIT from which PTX on the forced-JIT path;
   else (a runtime launch, which shows CUPTI no driver launch) from the module of its
   process that holds it, the cubin the driver loaded: its SM, and whether it is an
   embedded SASS cubin of an inspected file (same SHA-256) or, on the forced-JIT
   path, JIT output. A passed check carries the figures; with ``require_launch`` a
   kernel that never ran fails, naming the path.
2. Modules from anywhere: every image the driver was handed outside the CUDA runtime
   (a ``.cubin``/``.fatbin``/``.ptx`` file named to ``cuModuleLoad``, NVRTC's or
   Triton's output given to ``cuModuleLoadData``) that no inspected file accounts for
   is hashed, kept once under ``loaded/runtime-modules/`` and read by the reader like
   any artifact (targets, kernels, route on the device). An inspected file accounts
   for an image that is the file, or whose every device-code entry (by SHA-256) is
   one of the file's: the CUDA 13 runtime hands a program's own registered fatbin to
   ``cuLibraryLoadData``, which the recorder sees as a direct load; such an image is
   named in ``launches/coverage.txt`` with the file that holds it. A module is judged per
   path, from that path's own loads (gate.rules.clauses): one the driver refused on a
   path fails there with the module's origin, targets and that path's error, ranked as
   a wrong target, so the headline says where the code came from; on a path whose loads
   passed it passes (refused natively, loaded by forced JIT: only native fails).
3. Predictions checked: where inspection predicted a SASS route for a launched
   kernel, the SASS the driver ran must be that target's; a contradiction fails as a
   prediction mismatch with both sides.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gate.config import EntryPoint
from gate.errors import BadInputError
from gate.evidence import EvidenceDir
from gate.launch import summary as launchsummary
from gate.launch.log import LaunchedKernel, ProcessRecord, launch_counts
from gate.launch.routes import Held, jit_compiled, route_text
from gate.launch.summary import ArtifactCoverage, KernelLaunch, Launches
from gate.reader.cubin import read_ptx
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.render.wording import coverage_line, unmet_line
from gate.rules.causes import Cause, ExecPath
from gate.rules.clauses import Load, loads_on
from gate.rules.coverage import ALL, Coverage, coverage, unmet
from gate.rules.kernels import readable
from gate.rules.policy import Action
from gate.rules.routes import Path as RoutePath
from gate.rules.targets import Capability, Target
from gate.rules.verdict import Check, CheckState
from gate.scan.files import read_buffer

RUNTIME_MODULES = "loaded/runtime-modules"
Required = str | tuple[str, ...]


class InspectedArtifact(Protocol):
    """An inspected final artifact, as the checks read it (gate.stages.inspected.Inspected)."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def sha256(self) -> str: ...
    @property
    def smoke(self) -> bool: ...
    @property
    def listing(self) -> Listing: ...


class RecordedRun(Protocol):
    """One entry point run on one path, as the checks read it (gate.stages.runs.Run)."""

    @property
    def entry_point(self) -> EntryPoint: ...
    @property
    def path(self) -> ExecPath: ...
    @property
    def launches(self) -> Sequence[ProcessRecord]: ...
    @property
    def launch_folder(self) -> str | None: ...
    @property
    def launch_note(self) -> str: ...


@dataclass(frozen=True)
class RuntimeModule:
    """A module that reached the driver from no inspected file, as kept and read."""

    sha256: str
    kind: str  # cubin | fatbin | PTX
    kept: str  # its evidence path
    origin: str  # "cuModuleLoad of /opt/x.cubin", "cuModuleLoadData (an image in memory)"
    listing: Listing
    loads: tuple[Load, ...]  # every load of it, by run and path, with the driver's answer

    @property
    def runs(self) -> tuple[str, ...]:
        """``entry [path]`` of the runs that loaded it, each once."""
        return tuple(dict.fromkeys(load.run for load in self.loads))

    @property
    def refused(self) -> str:
        """The driver's first refusal of it, with the run (empty: never refused)."""
        return next((r for p in ExecPath for r in loads_on(self.loads, p)[1]), "")

    def targets(self) -> str:
        """``sm_80 SASS, compute_80 PTX``: what it carries."""
        shown = [f"{e.target} {e.kind.value}" for e in self.listing.entries if not e.is_stub]
        return ", ".join(dict.fromkeys(shown)) or "no device code the reader could find"


@dataclass(frozen=True)
class LaunchOutcome:
    """The checks, the kept runtime modules and the per-artifact coverage lines."""

    checks: tuple[Check, ...]
    modules: tuple[RuntimeModule, ...]
    coverage: tuple[ArtifactCoverage, ...]
    accounted: tuple[str, ...] = ()  # images the driver was handed that inspected files hold

    def summary(self) -> Launches:
        """As the run record and the signed predicate keep it (gate.launch.summary)."""
        return Launches(
            self.coverage,
            tuple(
                launchsummary.RuntimeModule(
                    m.sha256, m.kind, m.kept, m.origin, m.targets(), m.runs, m.refused or None
                )
                for m in self.modules
            ),
        )


def judge(
    evidence: EvidenceDir,
    *,
    runs: Sequence[RecordedRun],
    artifacts: Sequence[InspectedArtifact],
    capability: Capability,
    required: Mapping[Path, Required],
    launch_coverage: Action = Action.OFF,
) -> LaunchOutcome:
    """Coverage, runtime modules and recorded routes of every run (see the module docstring).

    ``launch_coverage`` (``[policy]``): ``warn`` or ``fail`` asks every kernel of every
    artifact without a ``require_launch`` of its own (the smoke program aside) to be
    launched, a never-launched kernel warning or failing; ``fail`` is ``require_launch =
    "all"`` everywhere.
    """
    checks: list[Check] = []
    table: list[ArtifactCoverage] = []
    lines: list[str] = []
    held = Held.of((a.name, a.listing) for a in artifacts)
    for artifact in artifacts:
        carried = artifact.listing.kernels()
        if not carried:
            continue
        wanted, level = required.get(artifact.path), Action.FAIL
        if not wanted and not artifact.smoke and launch_coverage.judged:
            wanted, level = ALL, launch_coverage
        for path in ExecPath:
            on_path = [r for r in runs if r.path is path]
            check, cov, text = coverage_check(artifact, path, on_path, wanted, held, level=level)
            if check is not None:
                checks.append(check)
            lines += text
            if cov is not None:
                table.append(cov)
                checks += route_checks(artifact, path, on_path, capability)
    accounted: list[str] = []
    modules = keep_modules(evidence, runs, artifacts, held, accounted)
    checks += [c for m in modules for c in module_checks(m, capability)]
    if lines or modules or accounted:
        body = (
            lines
            + [""]
            + [f"runtime module {m.kept}: {m.kind} from {m.origin}: {m.targets()}" for m in modules]
            + accounted
        )
        evidence.write_text("launches/coverage.txt", "\n".join(body).strip() + "\n")
    return LaunchOutcome(tuple(checks), tuple(modules), tuple(table), tuple(accounted))


def jit_compiled_symbols(
    runs: Sequence[RecordedRun], artifacts: Sequence[InspectedArtifact]
) -> frozenset[str]:
    """The kernels some process of a forced-JIT run launched from the driver's JIT output,
    as the launch recorder saw them (gate.launch.routes.jit_compiled)."""
    held = Held.of((a.name, a.listing) for a in artifacts)
    return frozenset(
        k.name
        for run in runs
        if run.path is ExecPath.JIT
        for record in run.launches
        for k in record.kernels
        if jit_compiled(k, held)
    )


def coverage_check(
    artifact: InspectedArtifact,
    path: ExecPath,
    runs: Sequence[RecordedRun],
    required: Required | None,
    held: Held | None = None,
    *,
    level: Action = Action.FAIL,
) -> tuple[Check | None, ArtifactCoverage | None, list[str]]:
    """One artifact on one path: a passed case with the figures, or what ``required`` lacks,
    and the coverage as the run record keeps it.

    Unrecorded runs give no check (the rest of the run is unchanged), unless launches
    are required: then the requirement fails (``level`` warn: warns), saying why nothing
    was recorded.
    """
    state = level.state(found=True)
    cause = Cause.EVIDENCE if state is CheckState.FAILED else None
    by = f' (policy.launch_coverage = "{level.value}")' if level is not Action.FAIL else ""
    name = f"{artifact.name}: kernels launched [{path.value}]"
    classname = f"gate.launches.{path.value}"
    records = [p for r in runs for p in r.launches]
    if not records:
        why = next((r.launch_note for r in runs if r.launch_note), "no entry point ran")
        text = [f"{artifact.name} [{path.value}]: {why}"]
        if not required:
            return None, None, text
        message = f"require_launch cannot be checked: {why}{by}"
        check = Check(name, classname, state, message, cause=cause, path=path)
        return check, None, text
    held = held or Held.of([(artifact.name, artifact.listing)])
    launched = launch_counts(records)
    cov = coverage(artifact.listing.kernels(), {k: v.count for k, v in launched.items()})
    ran = code_ran(cov, launched, path, held)
    message = coverage_line(cov) + (f"; {ran}" if ran else "")
    missing = unmet(required, cov) if required else ()
    text = [f"{artifact.name} [{path.value}]: {coverage_line(cov)}"]
    for run in runs:  # and per entry point: which of them ran which kernels
        own = launch_counts(run.launches)
        mine = coverage(cov.carried, {k: v.count for k, v in own.items()})
        text.append(f"  {run.entry_point.name}: {mine.figures} launched")
    names = readable(cov.carried)
    text += [
        f"  {c:>8}  {names[s]}  {route_text(launched[s], path, held)}" for s, c in cov.launched
    ]
    text += [f"  {'never':>8}  {names[s]}" for s in cov.never]
    kept = ArtifactCoverage(
        artifact.name,
        path,
        len(cov.carried),
        tuple(KernelLaunch(s, c, route_text(launched[s], path, held)) for s, c in cov.launched),
        cov.never,
    )
    if missing:
        said = "; ".join(unmet_line(u) for u in missing)
        message = (
            f"require_launch not met on the {path.title} path: {said} ({cov.figures} launched)" + by
        )
        missed = Cause.MISSING_KERNEL if state is CheckState.FAILED else None
        return (
            Check(name, classname, state, message, cause=missed, path=path),
            kept,
            text,
        )
    return Check(name, classname, CheckState.PASSED, message, path=path), kept, text


def code_ran(
    cov: Coverage, launched: Mapping[str, LaunchedKernel], path: ExecPath, held: Held
) -> str:
    """``ran from sm_90 SASS: 3`` per route the driver named; unknown routes counted apart."""
    by_route: dict[str, int] = {}
    for symbol, _ in cov.launched:
        route = route_text(launched[symbol], path, held)
        by_route[route] = by_route.get(route, 0) + 1
    return ", ".join(f"ran from {route}: {n}" for route, n in sorted(by_route.items()))


def route_checks(
    artifact: InspectedArtifact, path: ExecPath, runs: Sequence[RecordedRun], cap: Capability
) -> list[Check]:
    """Where inspection predicted SASS, the SASS the driver ran must be of that target."""
    if path is not ExecPath.NATIVE:
        return []
    launched = launch_counts([p for r in runs for p in r.launches])
    prediction = {k.kernel: k.route for k in artifact.listing.predict(cap).kernels}
    wrong = []
    said = readable(prediction)
    for symbol, route in prediction.items():
        k = launched.get(symbol)
        ran = k.ran_version if k is not None else None
        if k is None or ran is None or route.target is None:
            continue
        if not route.path.is_native:
            continue
        expected = route.target.major * 10 + route.target.minor
        if ran != expected:
            wrong.append(
                f"{said[symbol]}: predicted {route.describe()}, the driver ran "
                f"{k.sass or k.module_sass}"
            )
    if not wrong:
        return []
    return [
        Check(
            f"{artifact.name}: recorded routes [{path.value}]",
            "gate.predict",
            CheckState.FAILED,
            "; ".join(wrong),
            cause=Cause.PREDICTION,
            path=path,
        )
    ]


def keep_modules(
    evidence: EvidenceDir,
    runs: Sequence[RecordedRun],
    artifacts: Sequence[InspectedArtifact],
    held: Held | None = None,
    accounted: list[str] | None = None,
) -> list[RuntimeModule]:
    """Every directly loaded image no inspected file accounts for: hashed, kept once, read.

    An image an inspected file accounts for (see the module docstring) is not kept; a
    line naming it and its holder is added to ``accounted``.
    """
    known = {a.sha256: a.name for a in artifacts}
    held = held or Held.of((a.name, a.listing) for a in artifacts)
    # Every load of each image, by its digest, before any is judged: a module refused on
    # one path and loaded on the other is one module, judged per path. Only the first
    # file of each image is remembered, and read again below (torch's run holds many).
    images: dict[str, tuple[Path, str]] = {}  # digest -> (its first file, origin)
    loads: dict[str, list[Load]] = {}
    for run in runs:
        where = f"{run.entry_point.name} [{run.path.value}]"
        for record in run.launches:
            for file, origin, answer in _images(evidence, run, record):
                data = _read(file)
                if data is None:
                    continue
                digest = hashlib.sha256(data).hexdigest()
                images.setdefault(digest, (file, origin))
                loads.setdefault(digest, []).append(Load(where, run.path, *answer))
    found: list[RuntimeModule] = []
    for digest, (file, origin) in images.items():
        data = _read(file)
        if data is None:
            continue
        kind, listing = read_image(data, digest)
        holders = (known[digest],) if digest in known else held.holders(listing)
        if holders and not any(load.refused for load in loads[digest]):
            if accounted is not None:
                accounted.append(
                    f"accounted for by {', '.join(holders)}: {kind} {digest[:16]} "
                    f"from {origin}: {_shown(listing)}"
                )
            continue
        kept = f"{RUNTIME_MODULES}/{digest[:16]}.{_SUFFIX[kind]}"
        evidence.write_bytes(kept, data)
        found.append(RuntimeModule(digest, kind, kept, origin, listing, tuple(loads[digest])))
    for run in runs:  # the raw images are now kept by content; drop the per-process copies
        if run.launch_folder is not None:
            for image in evidence.path(run.launch_folder).glob("image-*.bin"):
                image.unlink(missing_ok=True)
    return found


_SUFFIX = {"cubin": "cubin", "fatbin": "fatbin", "PTX": "ptx", "unknown": "bin"}


def _shown(listing: Listing) -> str:
    shown = [f"{e.target} {e.kind.value}" for e in listing.entries if not e.is_stub]
    return ", ".join(dict.fromkeys(shown)) or "no kernels"


def _images(
    evidence: EvidenceDir, run: RecordedRun, record: ProcessRecord
) -> list[tuple[Path, str, tuple[int | None, str]]]:
    """(its file, origin, the driver's answer: its error and the error's name, None when
    it loaded) of each image one process handed the driver."""
    folder = evidence.path(run.launch_folder or ".")
    out: list[tuple[Path, str, tuple[int | None, str]]] = []
    for load in record.loads:
        answer = (load.result, load.error) if load.failed else (None, "")
        if load.image:
            out.append(
                (folder / load.image, f"{load.api} (an image in memory, {load.size} bytes)", answer)
            )
        elif load.file:
            out.append((_resolve(load.file, run), f"{load.api} of {load.file}", answer))
    for module in record.modules:  # loaded lazily, after its load call returned
        if module.origin == "driver" and module.image:
            during = f" during {module.during}" if module.during else ""
            out.append(
                (folder / module.image, f"a module loaded by the driver{during}", (None, ""))
            )
    return out


def _resolve(name: str, run: RecordedRun) -> Path:
    path = Path(name)
    return path if path.is_absolute() else Path(run.entry_point.cwd or ".") / path


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def read_image(data: bytes, digest: str) -> tuple[str, Listing]:
    """What a module image is (cubin, fatbin or PTX text) and what it carries."""
    display = f"runtime module {digest[:16]}"
    if data[:4] == b"\x7fELF" or data[:4] == b"\x50\xed\x55\xba":
        try:
            report = read_buffer(data, 0, len(data), display)
        except (BadInputError, ValueError):
            return "unknown", Listing(())
        return ("fatbin" if report.format == "fatbin" else "cubin"), report.listing
    if b".target" in data[: 1 << 16]:
        info = read_ptx(data, 0, len(data.rstrip(b"\0")), display)
        if info.target is not None:
            target = Target.parse(info.target).as_ptx()  # .target sm_80: compute_80 PTX
            return "PTX", Listing((DeviceEntry(Kind.PTX, target, info.kernels),))
    return "unknown", Listing(())


def module_checks(module: RuntimeModule, cap: Capability) -> list[Check]:
    """A runtime module judged on each path that loaded it, from that path's loads alone
    (gate.rules.clauses): refused there, it fails with its origin, targets and the error of
    each refusal; else it passes with what it carries."""
    return [module_check(module, cap, path) for path in ExecPath if loads_on(module.loads, path)[0]]


def module_check(module: RuntimeModule, cap: Capability, path: ExecPath) -> Check:
    """A runtime module judged on one path (:func:`module_checks`)."""
    name = f"runtime module {module.kept.rsplit('/', 1)[-1]} [{path.value}]"
    route = module.listing.target_route(cap) if module.listing.entries else None
    runs, refused = loads_on(module.loads, path)
    where = f"from {module.origin}, in {', '.join(runs)}"
    if refused:
        nothing = (
            f"nothing for {cap}"
            if route is None or route.path in (RoutePath.NONE, RoutePath.OTHER_DEVICES)
            else f"on {cap}: {route.describe()}"
        )
        error = next(load.error for load in module.loads if load.path is path and load.error)
        return Check(
            name,
            "gate.launches.modules",
            CheckState.FAILED,
            f"the driver refused this {module.kind} on the {path.title} path "
            f"({'; '.join(refused)}): {module.targets()}, {nothing}; loaded {where}",
            cause=Cause.WRONG_TARGET,
            path=path,
            error=error,
        )
    kernels = module.listing.kernels()
    said = readable(kernels[:5])
    shown = ", ".join(said[k] for k in kernels[:5]) + (" ..." if len(kernels) > 5 else "")
    on = f"on {cap}: {route.describe()}" if route is not None else "not readable"
    return Check(
        name,
        "gate.launches.modules",
        CheckState.PASSED,
        f"{module.kind} {where}: {module.targets()}; kernels {shown or 'none'}; {on}",
        path=path,
    )
