"""What inspection predicts for each entry point's two runs, checked against what happened.

An entry point's device code comes from its *sources*: the project's artifacts it
ran or loaded (judged per kernel) and the vendor libraries it loaded (judged as a
whole, see gate.stages.libraries). For each path the prediction is "can run",
"cannot run" (naming what stops it) or unknown (no inspected code stands behind the
entry point: its kernels are generated at run time, or it launches none).

A prediction is contradicted when a run passed where inspection said nothing could
run (something else supplied code: a JIT cache, a library loaded some other way,
code generated at run time), or when a run failed for want of code (no kernel image,
JIT disabled, unsupported PTX) where inspection said it could run.

Every rule it applies is the decision core's (gate.rules): the route of each kernel, a
kernel built only for other devices not being expected here, whether the driver can
JIT a PTX ISA. This module imports the stages below it (inspect, libraries, runs) and
none that imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gate.reader.listing import Kind, Listing
from gate.reader.stubs import stubs_of
from gate.record import LOADED_LIST
from gate.render.text import count
from gate.rules.causes import Cause, ExecPath
from gate.rules.clauses import PathRun, path_clause
from gate.rules.kernels import readable_name
from gate.rules.prediction import Diagnosis, Reading, diagnosis, excused, jit_gap, reading
from gate.rules.routes import Path as RoutePath
from gate.rules.routes import min_driver, ptx_route, sass_route
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import Check, CheckState, Clause, Diagnosed, pointer
from gate.stages.inspected import Inspected
from gate.stages.libraries import Judged, Library
from gate.stages.runs import Run


@dataclass(frozen=True)
class Source:
    """One body of device code an entry point runs: its name, listing, whose it is."""

    name: str
    listing: Listing
    own: bool
    linked: bool = False  # a library the project's own code names in DT_NEEDED
    where: str = ""  # its record in result.json: /artifacts/0, /loaded_libraries/3


@dataclass(frozen=True)
class Expectation:
    """Whether one path can run, and why; ``blocker`` names what stops it.

    "Cannot run" is firm when the project's own code lacks it; when a vendor library
    lacks it, the run fails only if it launches that library's kernels (lazy module
    loading), so a pass then is no contradiction.
    """

    can_run: bool | None
    basis: str
    blocker: Source | None = None

    @property
    def firm(self) -> bool:
        """Whether a passing run would contradict "cannot run"."""
        return self.blocker is None or self.blocker.own


@dataclass(frozen=True)
class Prediction:
    """An entry point's sources and the expectation for each path."""

    entry: str
    capability: Capability
    sources: tuple[Source, ...]
    native: Expectation
    jit: Expectation
    compilers: tuple[str, ...]

    @property
    def jit_blocked_by_library(self) -> bool:
        """Whole-program forced JIT is impossible because of a library outside the project."""
        return (
            self.jit.can_run is False and self.jit.blocker is not None and not self.jit.blocker.own
        )

    def expected(self, path: ExecPath) -> Expectation:
        """The expectation for one path."""
        return self.native if path is ExecPath.NATIVE else self.jit

    def check(self, runs: Sequence[Run]) -> Check:
        """Prediction against the runs: a failing ``gate.predict`` check with both sides."""
        name = f"{self.entry}: runs match inspection on {self.capability}"
        mine = [r for r in runs if r.entry_point.name == self.entry]
        if not self.sources or not mine:
            return Check(
                name,
                "gate.predict",
                CheckState.WARNED,
                "no inspected device code stands behind this entry point: only its runs do",
            )
        parts, mismatches = [], []
        for done in mine:
            want = self.expected(done.path)
            said = "runs" if want.can_run else "cannot run" if want.firm else "at risk"
            got = "passed" if done.passed else f"failed ({done.reason()})"
            line = f"{done.path.value}: predicted {said} ({want.basis}), {got}"
            found = reading(
                can_run=want.can_run,
                firm=want.firm,
                passed=done.passed,
                code_failure=_code_failure(done),
                compilers=bool(self.compilers),
            )
            if found is Reading.NOT_NEEDED:
                parts.append(f"{line}: the kernels it launched did not need the missing code")
            elif found is Reading.RAN_ANYWAY:
                extra = (
                    "; something let code other than the inspected SASS run: a JIT cache, a "
                    "library loaded some other way, or code generated at run time"
                    if done.path is ExecPath.NATIVE
                    else "; the kernels it launched did not need the missing PTX"
                )
                mismatches.append(line + extra)
            elif found is Reading.UNEXPECTED_FAILURE:
                mismatches.append(line)
            else:
                parts.append(line)
        if mismatches:
            return Check(
                name,
                "gate.predict",
                CheckState.FAILED,
                "; ".join(mismatches + parts),
                cause=Cause.PREDICTION,
            )
        return Check(name, "gate.predict", CheckState.PASSED, "; ".join(parts))


def sources_of(
    entry: str, argv0: str, cwd: str | None, artifacts: Sequence[Inspected], judged: Judged
) -> tuple[Source, ...]:
    """The device code behind one entry point: the program itself if inspected, what it loaded."""
    resolved = (Path(cwd or ".") / argv0).resolve()  # an absolute argv0 stands on its own
    found: list[Source] = []
    seen: set[str] = set()
    for i, artifact in enumerate(artifacts):
        if artifact.path == resolved and artifact.listing.kernels():
            found.append(
                Source(artifact.name, artifact.listing, own=True, where=pointer("artifacts", i))
            )
            seen.add(artifact.sha256)
    needed = {d.name for a in artifacts for d in a.dependencies}
    index = {id(lib): i for i, lib in enumerate(judged.libraries)}
    for library in judged.by_entry.get(entry, ()):
        if library.sha256 not in seen:
            where = pointer("loaded_libraries", index[id(library)])
            found.append(_library_source(library, where, linked=library.path.name in needed))
            seen.add(library.sha256)
    return tuple(found)


def _library_source(library: Library, where: str, *, linked: bool) -> Source:
    name = library.artifact.name if library.artifact else library.path.name
    return Source(name, library.listing, own=library.own, linked=linked, where=where)


def expect_native(sources: Sequence[Source], cap: Capability) -> Expectation:
    """Native: every kernel of the project's code built for ``cap`` has SASS that runs there
    (a kernel only in a/f builds for other devices is not expected); each vendor library
    some SASS that runs there."""
    if not sources:
        return Expectation(None, "no inspected device code")
    vendors: list[Source] = []
    for source in sources:
        if source.own:
            why = _own_native(source, cap)
            if why is not None:
                return Expectation(False, f"{source.name}: {why}", source)
        elif sass_route(source.listing.targets(Kind.SASS), cap) is None:
            vendors.append(source)
    if vendors:
        return _blocked(vendors, f"has no SASS for {cap}", f"have no SASS for {cap}")
    return Expectation(True, f"SASS for {cap} in {_names(sources)}")


def _own_native(source: Source, cap: Capability) -> str | None:
    """Why the project's code cannot run natively on ``cap``, or None when it can."""
    kernels = source.listing.predict(cap).kernels
    if not kernels:
        return None
    expected = [k for k in kernels if k.route.expected()]
    if not expected:
        return f"every kernel is built only for other devices (a/f builds); none for {cap}"
    missing = [k for k in expected if not k.route.path.is_native]
    if not missing:
        return None
    sass = " ".join(str(t) for t in source.listing.targets(Kind.SASS)) or "none"
    return f"{count(len(missing), 'kernel')} without SASS for {cap} (SASS: {sass})"


def expect_jit(sources: Sequence[Source], cap: Capability, driver: Version | None) -> Expectation:
    """Forced JIT: every kernel of the project's code built for ``cap`` has PTX that this
    driver can JIT for it; each vendor library some."""
    if not sources:
        return Expectation(None, "no inspected device code")
    no_ptx: list[Source] = []
    old_driver: list[tuple[Source, Version | None]] = []  # and the driver its PTX needs
    for source in sources:
        if source.own:  # the project's own code decides first, wherever it is listed
            why = _own_jit(source, cap, driver)
            if why is not None:
                return Expectation(False, f"{source.name}: {why}", source)
            continue
        ptx = tuple(dict.fromkeys((e.target, e.ptx_isa) for e in source.listing.of_kind(Kind.PTX)))
        route = ptx_route(ptx, cap)
        if route is None:
            no_ptx.append(source)
        elif not route.usable(driver):
            old_driver.append((source, route.min_driver))
    if no_ptx:
        return _blocked(no_ptx, f"ships no PTX for {cap}", f"ship no PTX for {cap}")
    if old_driver:
        wanted = [v for _, v in old_driver]  # None: an ISA newer than the rules know
        need = None if None in wanted else max(v for v in wanted if v is not None)
        needs = f"driver CUDA >= {need}" if need else "a newer driver"
        return _blocked(
            [s for s, _ in old_driver],
            f"needs {needs} for its PTX (this driver is CUDA {driver})",
            f"need {needs} for their PTX (this driver is CUDA {driver})",
        )
    return Expectation(True, f"PTX for {cap} in {_names(sources)}")


def _own_jit(source: Source, cap: Capability, driver: Version | None) -> str | None:
    """Why the project's code cannot run under forced JIT on ``cap``, or None when it can:
    no PTX that JIT-compiles for it, or PTX whose ISA this driver cannot JIT (the numbers)."""
    expected = [k.kernel for k in source.listing.predict(cap).kernels if k.route.expected()]
    if not expected:
        return None if not source.listing.kernels() else f"no kernel is built for {cap}"
    ptx = ((e.target, e.ptx_isa, e.kernels) for e in source.listing.of_kind(Kind.PTX))
    gap = jit_gap(expected, ptx, cap, driver)
    if gap is None:
        return None
    if not gap.too_new:
        return f"{count(len(gap.missing), 'kernel')} without PTX that JIT-compiles for {cap}"
    needs = f"driver CUDA >= {gap.need}" if gap.need else "a driver newer than the rules know"
    others = len(gap.missing) - len(gap.too_new)
    rest = f"; {count(others, 'more kernel')} without PTX for {cap}" if others else ""
    return (
        f"the PTX of {count(len(gap.too_new), 'kernel')} (ISA {gap.isa}) needs {needs}; this "
        f"driver is CUDA {driver}{rest}"
    )


def _blocked(libraries: Sequence[Source], one: str, many: str) -> Expectation:
    """Cannot run because of vendor libraries, ranked: first those the project links
    against, then the largest (most kernels, else most bytes of device code: a vendor
    library is read headers-only, without kernel names). The first is the ``blocker``; the
    sentence names at most three."""

    def rank(source: Source) -> tuple[bool, int, int, str]:
        size = sum(e.size for e in source.listing.entries)
        return (not source.linked, -len(_kernels(source.listing)), -size, source.name)

    ranked = sorted(libraries, key=rank)
    shown = ", ".join(s.name for s in ranked[:3])
    if len(ranked) > 3:
        shown += f" and {len(ranked) - 3} more"
    text = f"{shown} {one if len(ranked) == 1 else many}"
    return Expectation(False, text, ranked[0])


def _kernels(listing: Listing) -> frozenset[str]:
    return frozenset(k for e in listing.entries if e.kind is not Kind.LTOIR for k in e.kernels)


def _names(sources: Sequence[Source]) -> str:
    return ", ".join(s.name for s in sources)


def predict_all(
    runs: Sequence[Run],
    artifacts: Sequence[Inspected],
    judged: Judged,
    cap: Capability,
    driver: Version | None,
) -> tuple[Prediction, ...]:
    """One prediction per entry point that ran."""
    out = []
    for entry in dict.fromkeys(r.entry_point for r in runs):
        sources = sources_of(entry.name, entry.argv[0], entry.cwd, artifacts, judged)
        out.append(
            Prediction(
                entry.name,
                cap,
                sources,
                expect_native(sources, cap),
                expect_jit(sources, cap, driver),
                judged.compilers.get(entry.name, ()),
            )
        )
    return tuple(out)


def excuse(done: Run, predictions: Sequence[Prediction], proved: frozenset[str]) -> str | None:
    """Why a failed whole-program JIT run does not count against the project, or None.

    Only when inspection predicted it (a library outside the project ships no PTX), the
    run failed for want of code, and the project's own PTX loaded under forced JIT
    (``proved``: the artifacts whose every PTX load passed, gate.stages.jitproof).
    """
    prediction = next((p for p in predictions if p.entry == done.entry_point.name), None)
    if prediction is None:
        return None
    own = [s.name for s in prediction.sources if s.own]
    if not excused(
        jit=done.path is ExecPath.JIT,
        passed=done.passed,
        code_failure=_code_failure(done),
        blocked_by_library=prediction.jit_blocked_by_library,
        own_proved=_all_proved(own, proved),
    ):
        return None
    shown = (
        f"the project's own PTX ({', '.join(own)}) loads under forced JIT"
        if own
        else ("the project has no device code of its own here")
    )
    return f"as predicted: {prediction.jit.basis}, so the whole program cannot run; {shown}"


def _code_failure(done: Run) -> bool:
    """The run failed for want of code (gate.rules.causes)."""
    return done.failure is not None and done.failure.is_code_failure()


def _all_proved(names: Sequence[str], proved: frozenset[str]) -> bool:
    """Every artifact named had its PTX loaded by the driver's JIT."""
    return all(name in proved for name in names)


def diagnose(runs: Sequence[Run], predictions: Sequence[Prediction]) -> list[str]:
    """The diagnoses' words (:func:`diagnosed`)."""
    return [d.text for d in diagnosed(runs, predictions)]


def diagnosed(runs: Sequence[Run], predictions: Sequence[Prediction]) -> list[Diagnosed]:
    """The seed's diagnosis for each failure combination, with the evidence behind it, each
    clause naming its record: ``runs`` are the run record's executions, in its order.

    Entry points diagnosed alike (four checks of one torch extension) are named together,
    so a diagnosis is said once (with each one's clauses).
    """
    found: list[tuple[str, str, tuple[Clause, ...]]] = []
    for prediction in predictions:
        pair = {
            r.path: (i, r) for i, r in enumerate(runs) if r.entry_point.name == prediction.entry
        }
        if ExecPath.NATIVE not in pair or ExecPath.JIT not in pair:
            continue
        native, jit = pair[ExecPath.NATIVE][1], pair[ExecPath.JIT][1]
        kind = diagnosis(
            native_passed=native.passed,
            jit_passed=jit.passed,
            jit_blocked_by_library=prediction.jit_blocked_by_library,
            native_want_of_code=_want_of_code(prediction, native),
            jit_want_of_code=_want_of_code(prediction, jit),
        )
        if kind is not None:
            said = [path_clause(kind, _path_run(prediction, *pair[p])) for p in ExecPath]
            text, clauses = _diagnosis(prediction, kind, said, (native, jit))
            found.append((prediction.entry, text, clauses))
    return _merged(found)


def _path_run(prediction: Prediction, index: int, run: Run) -> PathRun:
    """One path's run as its diagnosis clause says it (gate.rules.clauses.path_clause)."""
    error = run.failure.code if run.failure is not None and not run.passed else None
    basis = prediction.expected(run.path).basis
    return PathRun(pointer("executions", index), run.path, run.passed, run.reason(), error, basis)


def _diagnosis(
    prediction: Prediction, kind: Diagnosis, said: Sequence[Clause], runs: Sequence[Run]
) -> tuple[str, tuple[Clause, ...]]:
    """One entry point's diagnosis, without its name, and its clauses; a kernel that died
    on the device ("unspecified launch failure") names the trap stubs it runs there
    (:func:`_traps`)."""
    text, clauses = _paths_diagnosis(prediction, kind, said, runs[1])
    traps, named = _traps(prediction, runs)
    return text + traps, (*clauses, *named)


def _traps(prediction: Prediction, runs: Sequence[Run]) -> tuple[str, tuple[Clause, ...]]:
    """`` Trap stubs this device runs: k(float*) in app (sm_90 SASS).`` when a run died as a
    trap makes it die and the project's code has trap stubs for this device, each named
    from its listing entry; else ``""``."""
    if not any(r.failure is not None and r.failure.is_trap() for r in runs if not r.passed):
        return "", ()
    cap = prediction.capability
    named = [
        Clause(
            f"{readable_name(stub.kernel)} in {source.name} ({_sass(stub.targets)} SASS)",
            _entry_of(source, stub.kernel, stub.targets),
            kernel=stub.kernel,
        )
        for source in prediction.sources
        if source.own
        for stub in stubs_of(source.listing, (cap,))
        if stub.trap and stub.devices
    ]
    if not named:
        return "", ()
    more = f" and {count(len(named) - _NAMED, 'more')}" if len(named) > _NAMED else ""
    text = (
        f" The kernel died on the device; trap stubs {cap} runs (an architecture guard that "
        f"excludes it): {', '.join(c.text for c in named[:_NAMED])}{more}."
    )
    return text, tuple(named[:_NAMED])


def _sass(targets: Sequence[Target]) -> str:
    return " ".join(map(str, targets))


def _entry_of(source: Source, kernel: str, targets: Sequence[Target]) -> str:
    """The pointer to the listing entry of ``source`` whose SASS for one of ``targets``
    makes ``kernel`` a trap stub (gate.reader.stubs.stubs_of found it there)."""
    at = next(
        i
        for i, e in enumerate(source.listing.entries)
        if e.kind is Kind.SASS and e.target in targets and kernel in e.traps
    )
    return f"{source.where}/listing/entries/{at}"


def _paths_diagnosis(
    prediction: Prediction, kind: Diagnosis, said: Sequence[Clause], jit: Run
) -> tuple[str, tuple[Clause, ...]]:
    """The diagnosis of the two paths' outcomes, in words (gate.rules.prediction.diagnosis),
    each path said by its own clause (gate.rules.clauses.path_clause), and its clauses."""
    native, forced = said
    code, shown = _code_summary(prediction)
    device = Clause(f"device {prediction.capability}", "/device/capability")
    clauses: tuple[Clause, ...] = (native, forced, *shown, device)
    if kind is Diagnosis.NATIVE_FAILS:
        advice = "revisit the native target and the final link step"
        return f"{native.text} but {forced.text}: {advice}. {code}; {device.text}.", clauses
    if kind is Diagnosis.JIT_BLOCKED:
        return f"{native.text}; {forced.text}. {code}.", clauses[:-1]
    if kind is Diagnosis.JIT_FAILS:
        note = ""
        if jit.failure is not None and jit.failure.cause() is Cause.UNSUPPORTED_PTX:
            note = " The driver is older than the PTX ISA needs."
        if prediction.jit.can_run is False:
            note += f" Inspection said so: {prediction.jit.basis}."
        advice = "check that PTX is present and that the driver supports its ISA version"
        return f"{native.text} but {forced.text}: {advice}. {code}.{note}", clauses[:-1]
    if kind is Diagnosis.BOTH_FOR_WANT_OF_CODE:
        head = "both paths fail, each for its own reason"
        return f"{head}: {native.text}; {forced.text}. {code}; {device.text}.", clauses
    advice = "investigate the toolchain, runtime libraries and device state using these errors"
    return f"both paths fail ({native.text}; {forced.text}): {advice}. {code}; {device.text}.", (
        clauses
    )


def _merged(said: Sequence[tuple[str, str, tuple[Clause, ...]]]) -> list[Diagnosed]:
    """``a, b: text`` for entry points whose text is the same, in first-seen order, with
    every one's clauses."""
    names: dict[str, list[str]] = {}
    clauses: dict[str, list[Clause]] = {}
    for entry, text, own in said:
        names.setdefault(text, []).append(entry)
        clauses.setdefault(text, []).extend(own)
    return [
        Diagnosed(f"{', '.join(entries)}: {text}", tuple(clauses[text]))
        for text, entries in names.items()
    ]


def _merged_text(said: Sequence[tuple[str, str]]) -> list[str]:
    """``a, b: text`` for entry points whose text is the same, in first-seen order."""
    return [d.text for d in _merged([(entry, text, ()) for entry, text in said])]


def _want_of_code(prediction: Prediction, run: Run) -> bool:
    """The run failed for want of code, as inspection predicted for its path."""
    return _code_failure(run) and prediction.expected(run.path).can_run is False


def _code_summary(prediction: Prediction) -> tuple[str, tuple[Clause, ...]]:
    """The code behind a verdict, compactly: the targets of the project's own code and of
    the libraries outside it that have nothing for the device (at most three named), the
    rest of them counted in one phrase; every one is in loaded-libraries.txt. Each part is
    a clause naming its listing (a count, the list it counts)."""
    cap = prediction.capability
    own = [s for s in prediction.sources if s.own]
    vendors = [s for s in prediction.sources if not s.own]
    bare = [s for s in vendors if _nothing_for(s.listing, cap)]
    parts = [Clause(_targets(s), f"{s.where}/listing") for s in own[:_NAMED]]
    if len(own) > _NAMED:
        more = f"{count(len(own) - _NAMED, 'more artifact')} of the project's"
        parts.append(Clause(more, "/artifacts"))
    parts += [Clause(_targets(s), f"{s.where}/listing") for s in bare[:_NAMED]]
    if len(bare) > _NAMED:
        more = f"{_libraries(len(bare) - _NAMED, 'more')} with nothing for {cap}"
        parts.append(Clause(more, "/loaded_libraries"))
    rest = [s for s in vendors if s not in bare]
    if rest:
        parts.append(Clause(_the_rest(rest, cap, other=bool(bare)), "/loaded_libraries"))
    if not parts:
        return "No inspected device code", (Clause("No inspected device code", "/artifacts"),)
    listed = f" ({LOADED_LIST} lists {'it' if len(vendors) == 1 else 'each'})" if vendors else ""
    return " | ".join(c.text for c in parts) + listed, tuple(parts)


_NAMED = 3  # sources named with their targets in a code summary, per kind


def _targets(source: Source) -> str:
    """``app: SASS sm_80 sm_90; PTX compute_90 ISA 9.0 (driver >= 13.0)``."""
    sass = " ".join(str(t) for t in source.listing.targets(Kind.SASS)) or "none"
    ptx = []
    for e in source.listing.of_kind(Kind.PTX):
        need = min_driver(e.ptx_isa) if e.ptx_isa else None
        ptx.append(f"{e.target} ISA {e.ptx_isa or '?'}" + (f" (driver >= {need})" if need else ""))
    return f"{source.name}: SASS {sass}; PTX {', '.join(dict.fromkeys(ptx)) or 'none'}"


def _nothing_for(listing: Listing, cap: Capability) -> bool:
    """No SASS that runs on ``cap`` and no PTX that JIT-compiles for it (gate.rules.routes)."""
    return listing.target_route(cap).path in (RoutePath.NONE, RoutePath.OTHER_DEVICES)


def _the_rest(sources: Sequence[Source], cap: Capability, *, other: bool) -> str:
    """``37 libraries outside the project, all with SASS for 9.0 and none with PTX for it``."""
    n = len(sources)
    sass = sum(1 for s in sources if sass_route(s.listing.targets(Kind.SASS), cap) is not None)
    ptx = sum(1 for s in sources if s.listing.ptx_route(cap) is not None)
    return (
        f"{_libraries(n, 'other' if other else '')} outside the project, {_with(sass, n)} SASS "
        f"for {cap} and {_with(ptx, n)} PTX for it"
    )


def _libraries(n: int, adjective: str) -> str:
    """``1 library``, ``3 other libraries``."""
    word = f"{adjective} " if adjective else ""
    return count(n, f"{word}library", f"{word}libraries")


def _with(k: int, n: int) -> str:
    """How many of ``n`` have something: ``with``/``without`` (of one), ``all with``, ``none
    with``, ``3 with``."""
    if n == 1:
        return "with" if k else "without"
    return "all with" if k == n else "none with" if k == 0 else f"{k} with"


def paths_proved(
    runs: Sequence[Run],
    predictions: Sequence[Prediction],
    proved: frozenset[str],
    by_launches: frozenset[str] = frozenset(),
) -> list[str]:
    """Per entry point, which paths were proved for which code (the verdict's fine print);
    entry points proved alike are named together. ``by_launches``: the artifacts of
    ``proved`` whose PTX was proved by recorded forced-JIT launches, with no module load."""
    out: list[tuple[str, str]] = []
    for prediction in predictions:
        pair = {r.path: r for r in runs if r.entry_point.name == prediction.entry}
        native, jit = pair.get(ExecPath.NATIVE), pair.get(ExecPath.JIT)
        words = [f"native {'proved' if native and native.passed else 'NOT proved'}"]
        own = [s.name for s in prediction.sources if s.own]
        how = (
            "its kernels' recorded forced-JIT launches"
            if own and _all_proved(own, by_launches)
            else "driver module load"
        )
        proved_own = (
            f"the project's own PTX ({', '.join(own)}) proved by {how}"
            if own and _all_proved(own, proved)
            else "the project's PTX NOT proved by module load"
            if own
            else "no project device code to prove"
        )
        if jit is not None and jit.passed:
            words.append("forced JIT proved for the whole program")
            if prediction.jit_blocked_by_library:
                words.append(
                    f"it launched no kernel of the libraries that block it ({prediction.jit.basis})"
                )
                words.append(proved_own)
        elif prediction.jit_blocked_by_library:
            words.append(f"whole-program forced JIT cannot run ({prediction.jit.basis})")
            words.append(proved_own)
        else:
            words.append("forced JIT NOT proved")
        out.append((prediction.entry, "; ".join(words)))
    return _merged_text(out)
