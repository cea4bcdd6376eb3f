"""Loaded libraries judged the way they work.

Every shared library an entry point really loaded (gate.stages.loaded) that carries
device code is hashed and inspected. How it is judged depends on whose it is:

* the project's own artifacts (matched by SHA-256, wherever they were loaded from)
  and libraries named by ``strict_libraries`` keep the strict per-kernel rule:
  every kernel needs a route on the device;
* any other (vendor) library fails only when nothing in it can run on the device:
  cuBLAS ships arch-specific kernels for devices it never runs them on, and that is
  information, not a defect. One short line says how the device runs it: exact SASS,
  family SASS, compatible SASS, PTX JIT, or nothing.

A library with the same file name as an artifact but different bytes is a finding:
the entry point ran another build than the one inspected. Runtime compilers (NVRTC,
nvJitLink, the PTX compiler library, NVVM, Triton) are named: the kernels they make
are invisible to inspection, and only the entry point's runs stand behind them.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gate import jsonutil
from gate.audit.artifact import phrase
from gate.config import Config
from gate.errors import BadInputError
from gate.evidence import EvidenceDir, unique_name
from gate.reader import read as reader
from gate.reader.distributions import installed
from gate.reader.listing import Kind, Listing
from gate.record import LOADED_LIST, LoadedLibrary
from gate.render import inspect as summary
from gate.render.wording import library_on
from gate.rules.causes import Cause
from gate.rules.remedies import Situation, remedy
from gate.rules.routes import Path as RoutePath
from gate.rules.routes import Route
from gate.rules.targets import Capability, Version
from gate.rules.verdict import Check, CheckState
from gate.scan.cache import loaded_library
from gate.scan.files import read_artifact
from gate.stages.inspected import Inspected
from gate.stages.runs import Run
from gate.system import machine

# The driver's own libraries: their device code is CUDA's, not the application's.
_DRIVER_PARTS = re.compile(r"^lib(cuda|nvidia-|cudadebugger)")
# Libraries that compile device code at run time.
_RUNTIME_COMPILERS = (
    (re.compile(r"^libnvrtc"), "NVRTC"),
    (re.compile(r"^libnvJitLink"), "nvJitLink"),
    (re.compile(r"^libnvptxcompiler"), "the PTX compiler library"),
    (re.compile(r"^libnvvm"), "NVVM"),
    (re.compile(r"^libtriton"), "Triton"),
)


@dataclass(frozen=True)
class Library:
    """One loaded library with device code, judged."""

    path: Path
    sha256: str
    listing: Listing
    entry_points: tuple[str, ...]
    artifact: Inspected | None  # the project's artifact it is (same bytes), if any
    strict: bool
    route: Route
    runs: bool
    prefix: str

    @property
    def own(self) -> bool:
        """Part of the project: an artifact, or named strict."""
        return self.artifact is not None or self.strict

    def record(self) -> LoadedLibrary:
        """As the run record keeps it."""
        return LoadedLibrary(
            path=str(self.path),
            sha256=self.sha256,
            declared=self.artifact is not None,
            entry_points=self.entry_points,
            evidence=self.prefix,
            listing=self.listing,
            route=self.route.describe(),
            runs=self.runs,
            strict=self.strict,
        )


@dataclass(frozen=True)
class View:
    """A vendor library's own evidence files, rendered: device-code.txt and .json."""

    text: str
    json: str


def render_view(report: reader.ArtifactReport, cap: Capability) -> View:
    """The library's entries and its routes on ``cap``, as its two evidence files say them.

    For torch's libraries this is tens of thousands of entries: :class:`Prefetch` renders
    each while the next entry point runs.
    """
    view = summary.artifact_json(report, (cap,))
    return View(
        summary.console(view),
        jsonutil.dumps({"version": 1, "artifact": view}),
    )


@dataclass(frozen=True)
class Judged:
    """The loaded libraries, per entry point what it loaded, the checks on them."""

    libraries: tuple[Library, ...]
    by_entry: dict[str, tuple[Library, ...]]
    compilers: dict[str, tuple[str, ...]]  # entry point -> runtime compilers it loaded
    checks: tuple[Check, ...]
    views: tuple[tuple[str, View], ...] = ()  # evidence still to write: prefix, its files

    @property
    def records(self) -> tuple[LoadedLibrary, ...]:
        """Every library as the run record keeps it."""
        return tuple(lib.record() for lib in self.libraries)


def library_route(listing: Listing, cap: Capability, driver: Version | None) -> tuple[Route, bool]:
    """How ``cap`` runs a library: its best route over every target, and whether anything
    runs (gate.rules.routes: the rule for a library judged as a whole).

    Per target, not per kernel: linear in the entries, for libraries of thousands.
    """
    best = listing.target_route(cap)
    return best, best.usable(driver)


def runtime_compiler(path: Path) -> str | None:
    """The runtime compiler a library is, if it is one."""
    return next((name for pattern, name in _RUNTIME_COMPILERS if pattern.match(path.name)), None)


def judge(
    evidence: EvidenceDir,
    *,
    runs: Sequence[Run],
    artifacts: Sequence[Inspected],
    cap: Capability,
    driver: Version | None,
    config: Config,
    use_cache: bool = True,
    prefetch: Prefetch | None = None,
) -> Judged:
    """Inspect and judge every library the runs loaded; write loaded-libraries.txt.

    Each vendor library's own evidence files are left to :func:`write_views`. With
    ``prefetch``, the libraries it already read (while later entry points ran) are not
    read again.
    """
    users, compilers = _loaded_by(runs)
    with_code, listed = _with_code(users, use_cache=use_cache, prefetch=prefetch)
    by_digest = {a.sha256: a for a in artifacts}
    by_name = {a.path.name: a for a in artifacts}
    prefixes: set[str] = set()
    libraries: list[Library] = []
    checks: list[Check] = []
    views: list[tuple[str, View]] = []
    for digest, (path, report, entry_names) in with_code.items():
        library = _library(
            path,
            digest,
            report,
            tuple(entry_names),
            artifact=by_digest.get(digest),
            config=config,
            cap=cap,
            driver=driver,
            prefixes=prefixes,
        )
        libraries.append(library)
        if library.artifact is not None:
            continue  # an artifact was judged by the inspect stage already
        view = prefetch.view(digest, report, cap) if prefetch else render_view(report, cap)
        views.append((library.prefix, view))
        checks.append(_check(library, cap))
        twin = by_name.get(path.name)
        if twin is not None:
            checks.append(_not_the_artifact(library, twin))
    checks += _compiler_checks(compilers)
    evidence.write_text(LOADED_LIST, _listing_text(listed, libraries, cap))
    by_entry = {
        name: tuple(lib for lib in libraries if name in lib.entry_points)
        for name in dict.fromkeys(d.entry_point.name for d in runs)
    }
    return Judged(
        tuple(libraries),
        by_entry,
        {k: tuple(v) for k, v in compilers.items()},
        tuple(checks),
        tuple(views),
    )


def _loaded_by(runs: Sequence[Run]) -> tuple[dict[Path, list[str]], dict[str, list[str]]]:
    """Per loaded library the entry points that loaded it; per entry point the runtime
    compilers it loaded."""
    users: dict[Path, list[str]] = {}
    compilers: dict[str, list[str]] = {}
    for done in runs:
        for path in done.loaded:
            _add(users.setdefault(path, []), done.entry_point.name)
            found = runtime_compiler(path)
            if found:
                _add(compilers.setdefault(done.entry_point.name, []), found)
    return users, compilers


def _library(
    path: Path,
    digest: str,
    report: reader.ArtifactReport,
    entry_names: tuple[str, ...],
    *,
    artifact: Inspected | None,
    config: Config,
    cap: Capability,
    driver: Version | None,
    prefixes: set[str],
) -> Library:
    """One loaded library with device code, judged: the project's own code (an artifact or
    named strict) per kernel, any other per target (headers are enough). A library not an
    artifact gets its evidence folder's name here, unique among ``prefixes``."""
    strict = artifact is None and config.is_strict(path)
    listing = (
        artifact.listing
        if artifact
        else read_artifact(path, names=True).listing
        if strict
        else report.listing
    )
    prefix = artifact.prefix if artifact else f"loaded/{unique_name(path.name, prefixes)}/"
    route, runs_here = library_route(listing, cap, driver)
    if artifact is not None or strict:
        runs_here = listing.predict(cap, driver).runnable
    return Library(path, digest, listing, entry_names, artifact, strict, route, runs_here, prefix)


def _compiler_checks(compilers: dict[str, list[str]]) -> list[Check]:
    """Per entry point that loaded runtime compilers: a warning that what they compile is
    invisible to inspection."""
    return [
        Check(
            f"{entry}: code generated at run time",
            "gate.loaded",
            CheckState.WARNED,
            f"loads {', '.join(names)}: kernels it compiles at run time are invisible to "
            "inspection; only this entry point's runs stand behind them",
        )
        for entry, names in compilers.items()
    ]


def write_views(evidence: EvidenceDir, judged: Judged) -> None:
    """Each vendor library's device-code.txt and .json (its entries, its routes on the
    device), as :func:`render_view` rendered them; apart from :func:`judge`, so that they
    are written while the PTX proofs wait on the driver."""
    for prefix, view in judged.views:
        evidence.write_text(f"{prefix}device-code.txt", view.text)
        evidence.write_text(f"{prefix}device-code.json", view.json)


_Listed = tuple[Path, str, list[str], str | None]  # path, mark, loaded by, digest if code


def _with_code(
    users: dict[Path, list[str]],
    *,
    use_cache: bool = True,
    prefetch: Prefetch | None = None,
) -> tuple[dict[str, tuple[Path, reader.ArtifactReport, list[str]]], list[_Listed]]:
    """Per SHA-256, the libraries with device code; and every loaded path with its mark,
    for loaded-libraries.txt.

    The same bytes loaded through two paths (a symlink, a copy) are one library.
    """
    with contextlib.ExitStack() as own:
        if prefetch is None:  # nothing read ahead: the same reads, started here
            prefetch = own.enter_context(Prefetch(use_cache=use_cache))
        prefetch.add(users)
        reads = [prefetch.get(path) for path in users]
    listed: list[_Listed] = []
    found: dict[str, tuple[Path, reader.ArtifactReport, list[str]]] = {}
    for (path, entry_names), (mark, read) in zip(users.items(), reads, strict=True):
        listed.append((path, mark, entry_names, read[1] if read else None))
        if read is None:
            continue
        report, digest = read
        if digest in found:
            for name in entry_names:
                _add(found[digest][2], name)
        else:
            found[digest] = (path, report, list(entry_names))
    return found, listed


def _listing_text(listed: Sequence[_Listed], judged: Sequence[Library], cap: Capability) -> str:
    """loaded-libraries.txt: every object the runs loaded, one a line, and for each with
    device code how it runs on ``cap`` (the full list the summary counts)."""
    by_digest = {lib.sha256: lib for lib in judged}
    lines = []
    for path, mark, entry_names, digest in listed:
        lib = by_digest.get(digest) if digest else None
        if lib is not None:
            has_ptx = lib.listing.ptx_route(cap) is not None
            how = library_on(lib.route, cap, runs=lib.runs, has_ptx=has_ptx)
            said = f"{mark}{' (project)' if lib.own else ''}: {how}"
        else:
            said = mark
        lines.append(f"{path}  [{said}]  loaded by {', '.join(entry_names)}\n")
    return "".join(lines) or "nothing recorded\n"


def _not_the_artifact(library: Library, twin: Inspected) -> Check:
    """The entry point loaded a library named like an artifact, with other bytes."""
    return Check(
        f"loaded {library.path.name}: the inspected artifact",
        "gate.loaded",
        CheckState.FAILED,
        f"{', '.join(library.entry_points)} loaded {library.path} "
        f"(sha256 {library.sha256[:16]}…), not the artifact inspected as {twin.path} "
        f"(sha256 {twin.sha256[:16]}…)",
        cause=Cause.LOADED_LIBRARY,
    )


def _add(names: list[str], name: str) -> None:
    if name not in names:
        names.append(name)


_Read = tuple[str, tuple[reader.ArtifactReport, str] | None]


class Prefetch:
    """Loaded libraries read while the next entry points run.

    The gate mostly waits on the entry point's process then; reading what the earlier
    runs loaded (a warm run: the cached scans of torch's libraries, a few tenths of a
    second; a cold one: hashing them) costs the run nothing. :meth:`close` cancels what
    was not asked for.
    """

    def __init__(self, *, use_cache: bool = True, cap: Capability | None = None) -> None:
        self._use_cache = use_cache
        self._cap = cap
        # The project's entry point runs meanwhile: leave it most of the machine.
        workers = machine.background_threads()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="loaded-read")
        self._reads: dict[Path, Future[_Read]] = {}
        self._views: dict[str, View | None] = {}  # by SHA-256; None: being rendered
        self._lock = threading.Lock()

    def add(self, paths: Iterable[Path]) -> None:
        """Start reading each of ``paths`` not asked for before (and, given the device,
        rendering its evidence files: :func:`render_view`)."""
        for path in paths:
            if path not in self._reads:
                self._reads[path] = self._pool.submit(self._fetch, path)

    def get(self, path: Path) -> _Read:
        """What :func:`_read` says of ``path`` (waiting for it, or reading it now)."""
        future = self._reads.get(path)
        return future.result() if future is not None else _read(path, use_cache=self._use_cache)

    def view(self, digest: str, report: reader.ArtifactReport, cap: Capability) -> View:
        """The library's rendered evidence files: rendered while the entry points ran, or now."""
        with self._lock:
            done = self._views.get(digest)
        return done if done is not None and self._cap == cap else render_view(report, cap)

    def _fetch(self, path: Path) -> _Read:
        read = _read(path, use_cache=self._use_cache)
        if read[1] is None or self._cap is None:
            return read
        report, digest = read[1]
        with self._lock:
            if digest in self._views:
                return read  # the same bytes through another path: rendered once
            self._views[digest] = None
        rendered = render_view(report, self._cap)
        with self._lock:
            self._views[digest] = rendered
        return read

    def close(self) -> None:
        """Stop: nothing more is read."""
        self._pool.shutdown(cancel_futures=True)

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _read(path: Path, *, use_cache: bool = True) -> _Read:
    """The loaded-libraries.txt mark of one library, and its report and digest if it has code.

    Headers only (a vendor library is judged per target, not per kernel: reading every
    kernel name of libtorch_cuda.so would cost seconds for nothing), and only a library
    with device code is hashed.
    """
    if _DRIVER_PARTS.match(path.name):
        return "CUDA driver component (not inspected)", None
    try:
        report, digest = loaded_library(path, use_cache=use_cache)
        if digest is None:
            return "no device code", None
    except BadInputError as e:
        return f"not readable: {e.one_line()}", None
    except OSError as e:
        return f"not readable: {e.strerror or e}", None
    return "device code", (report, digest)


def _check(library: Library, cap: Capability) -> Check:
    """Own libraries: every kernel needs a route; vendor libraries: something must run."""
    name = f"loaded {library.path.name}: device code for {cap}"
    users = ", ".join(library.entry_points)
    sass = " ".join(str(t) for t in library.listing.targets(Kind.SASS)) or "none"
    ptx = " ".join(str(t) for t in library.listing.targets(Kind.PTX)) or "none"
    where = f"SASS {sass}; PTX {ptx}; sha256 {library.sha256[:16]}…; loaded by {users}"
    if library.own:
        prediction = library.listing.predict(cap)
        # No kernel: nothing to launch, so nothing to judge.
        state = CheckState.of(library.runs) if prediction.kernels else CheckState.WARNED
        return Check(
            name,
            "gate.loaded",
            state,
            f"strict library: {phrase(prediction)} on {cap}: {where}",
            cause=Cause.LOADED_LIBRARY if state is CheckState.FAILED else None,
        )
    how = library.route.describe()
    if library.runs:
        only_jit = library.route.path is RoutePath.PTX_JIT
        note = " (runs only through PTX JIT: no SASS for this device)" if only_jit else ""
        return Check(name, "gate.loaded", CheckState.PASSED, f"{how} on {cap}{note}: {where}")
    why = "nothing in it runs on this device"
    if library.route.path is RoutePath.PTX_JIT:
        why = f"its PTX needs a newer driver ({how})"
    elif library.route.path is RoutePath.OTHER_DEVICES:
        why = "nothing in it runs on this device: only a/f builds for other devices"
    return Check(
        name,
        "gate.loaded",
        CheckState.FAILED,
        f"{why}: {where}",
        cause=Cause.LOADED_LIBRARY,
        remedy=remedy(
            Situation(
                Cause.LOADED_LIBRARY,
                device=cap,
                library=library.path.name,
                distribution=distribution_of(library.path),
            )
        ),
    )


def distribution_of(path: Path) -> str | None:
    """``nvidia-cublas 13.0.0``: the installed distribution whose RECORD lists ``path``, from
    the site-packages folder above it; None where no distribution ships it."""
    resolved = os.path.normpath(path)
    for folder in Path(resolved).parents:
        if folder.name not in ("site-packages", "dist-packages"):
            continue
        try:
            for dist, files in installed(folder):
                if resolved in files:
                    return f"{dist.name} {dist.version}"
        except OSError:
            return None
        return None
    return None


def codeless_checks(
    artifacts: Sequence[Inspected], runs: Sequence[Run], judged: Judged
) -> list[Check]:
    """An artifact with no device code of its own: say where its GPU code came from.

    Information, not a verdict: the runs of the entry points that use it pass or fail.
    """
    checks = []
    for artifact in artifacts:
        if artifact.smoke or artifact.listing.entries:
            continue
        users = {r.entry_point.name for r in runs if artifact.path in r.loaded}
        from_libs = [lib.path.name for lib in judged.libraries if users & set(lib.entry_points)]
        if from_libs:
            message = f"no device code of its own; its kernels come from {', '.join(from_libs)}"
            state = CheckState.PASSED
        elif users:
            message = "no device code of its own and none loaded: only its runs stand behind it"
            state = CheckState.WARNED
        else:
            message = "no device code of its own, and no entry point ran it"
            state = CheckState.WARNED
        checks.append(Check(f"{artifact.name}: device code", "gate.inspect", state, message))
    return checks
