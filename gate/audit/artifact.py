"""One artifact on one device: its routes, its prediction, the verdict phrase, and why it
fails a required device.

Per kernel when names were read; without them one route per target stands for every
kernel (:data:`ALL_KERNELS`), and the phrases never count kernels they did not see. The
decisions are the core's (:func:`gate.rules.environment.unmet`, :func:`gate.rules.routes.judge`);
this module reads the report for them and words their answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gate.reader.listing import DevicePrediction, KernelPrediction, Kind, Listing
from gate.reader.read import ArtifactReport
from gate.render.wording import no_code_for, plural
from gate.rules import environment
from gate.rules.environment import Unmet
from gate.rules.routes import Path, Route, tile_support
from gate.rules.targets import Capability, Target, Version

ALL_KERNELS = "(every kernel)"


def target_text(kind: Kind, target: Target) -> str:
    """``sm_90``, ``compute_90`` or ``lto_90`` (LTO IR is neither SASS nor PTX)."""
    if kind is Kind.LTOIR:
        return f"lto_{target.number}{target.variant.value}"
    return str(target)


def targets_text(report: ArtifactReport) -> str:
    """``SASS sm_75..sm_121 (11), PTX compute_90, Tile IR 13.4``: an artifact's targets on
    one line (Tile IR is architecture-independent: its bytecode versions)."""
    listing = report.listing
    parts = []
    for kind, label in ((Kind.SASS, "SASS"), (Kind.PTX, "PTX"), (Kind.LTOIR, "LTO IR")):
        found = sorted(listing.targets(kind), key=lambda t: (t.number, t.variant.value))
        if not found:
            continue
        names = [target_text(kind, t) for t in found]
        shown = names[0] if len(names) == 1 else f"{names[0]}..{names[-1]} ({len(names)})"
        parts.append(f"{label} {shown}")
    if listing.has_tile:
        parts.append(f"Tile IR {tile_versions(listing)}")
    return ", ".join(parts) or "no device code"


def tile_versions(listing: Listing) -> str:
    """The bytecode versions of a listing's Tile IR entries, oldest first: ``13.4``,
    ``13.1, 13.4``; ``version unknown`` for an entry whose version was not read."""
    found = {e.ptx_isa for e in listing.each(Kind.TILEIR)}
    known = sorted(v for v in found if v is not None)
    said = [str(v) for v in known] + (["version unknown"] if None in found else [])
    return ", ".join(said)


def _routed(listing: Listing) -> bool:
    """Whether a listing has code a route can come from: SASS, PTX or Tile IR (LTO IR
    must be device-linked first; an unknown kind is never routed)."""
    return bool(listing.targets(Kind.SASS)) or listing.has_ptx or listing.has_tile


def has_code(report: ArtifactReport) -> bool:
    """Whether a readable artifact carries any device-code entry."""
    return report.error is None and bool(report.listing.entries)


def needs_device(report: ArtifactReport) -> bool:
    """Whether an artifact has code a device must run
    (:func:`gate.rules.environment.needs_device`)."""
    listing = report.listing
    return environment.needs_device(
        has_code=has_code(report),
        names=report.names,
        kernels=bool(listing.kernels()),
        lto=bool(listing.targets(Kind.LTOIR)),
    )


def predict(
    report: ArtifactReport, cap: Capability, driver: Version | None = None
) -> DevicePrediction:
    """Per-kernel routes when names were read, else one route standing for every kernel."""
    listing = report.listing
    if report.names:
        return listing.predict(cap, driver)
    if not _routed(listing):
        return DevicePrediction(cap, (), driver)
    route = listing.target_route(cap)
    return DevicePrediction(cap, (KernelPrediction(ALL_KERNELS, route),), driver)


def routes(report: ArtifactReport, cap: Capability) -> tuple[Route, ...]:
    """The routes of the report's kernels on ``cap``, one per group of kernels found in
    the same places (with names; equal routes of two groups both appear), or the one
    route standing for every kernel (without); empty when there is no kernel to route.
    Every route :func:`predict` gives, in the order it first gives them: what the rules
    over routes need, without building a prediction per kernel."""
    listing = report.listing
    if report.names:
        return listing.kernel_routes(cap)
    if not _routed(listing):
        return ()
    return (listing.target_route(cap),)


def verdict(report: ArtifactReport, prediction: DevicePrediction) -> str:
    """The device's verdict; every count in it true (per target, none is given)."""
    if not prediction.kernels:
        return _no_kernels(report.listing)
    if not report.names:
        # One route stands for every kernel: "no code for 1 of 1 kernels" would be false.
        path = prediction.kernels[0].route.path
        if path is Path.NONE:
            return "no code for any kernel"
        if path is Path.OTHER_DEVICES:
            return "nothing built for this device (only a/f builds for other devices)"
    return phrase(prediction)


def phrase(prediction: DevicePrediction) -> str:
    """One phrase: native, JIT only, JIT needs a newer driver, through Tile IR (or its
    driver support unknown), or no code; and how many kernels were built only for other
    devices."""
    if not prediction.kernels:
        return "no kernels"
    elsewhere = prediction.elsewhere
    note = f"; {plural(elsewhere, 'kernel')} only for other devices" if elsewhere else ""
    expected = len(prediction.kernels) - elsewhere
    if not expected:
        return f"nothing built for this device ({plural(elsewhere, 'kernel')} only for others)"
    if prediction.native:
        return "native" + note
    missing = [k for r, ks in prediction.by_route if r.path is Path.NONE for k in ks]
    if missing:
        return no_code_for(missing, expected) + note
    return _compiled(prediction) + note


def _compiled(prediction: DevicePrediction) -> str:
    """Where some kernel's code is compiled when it loads: through Tile IR (or its driver
    support unknown), through the PTX JIT, or the PTX JIT needs a newer driver."""
    tile = _tile_phrase(prediction)
    if tile is not None:
        return tile
    if not prediction.runnable:
        return "PTX JIT needs a newer driver"
    jit_only = all(k.route.path is Path.PTX_JIT for k in prediction.kernels if k.route.expected())
    return "runs only through PTX JIT" if jit_only else "partly through PTX JIT"


def tile_blocked(prediction: DevicePrediction) -> str | None:
    """Why some Tile IR route keeps the device from being known to run: the driver is known
    not to compile its bytecode version, or the rules do not say that it does
    (:func:`gate.rules.routes.tile_support`; ``unknown``, never "runs"); else None (no
    Tile IR route, or every one runs). The short form: ``inspect``'s file line follows it
    with the routes."""
    support = [
        tile_support(r.ptx_isa, prediction.driver)
        for r, _ in prediction.by_route
        if r.path is Path.TILE_IR
    ]
    if False in support:
        return "Tile IR needs a newer driver"
    if None in support:
        return "unknown: Tile IR runs only where the driver compiles its bytecode version"
    return None


def _tile_phrase(prediction: DevicePrediction) -> str | None:
    """Where some expected kernel's route is Tile IR (every one has code): the driver's
    Tile IR compiler at load time, not the PTX JIT; :func:`tile_blocked` where it is not
    known to run, naming the routes; else None (no Tile IR route)."""
    tile = [r for r, _ in prediction.by_route if r.path is Path.TILE_IR]
    if not tile:
        return None
    said = "; ".join(dict.fromkeys(r.describe() for r in tile))
    blocked = tile_blocked(prediction)
    if blocked is not None:
        return f"{blocked}: {said}"
    if not prediction.runnable:
        return "PTX JIT needs a newer driver"
    others = [
        k for k in prediction.kernels if k.route.expected() and k.route.path is not Path.TILE_IR
    ]
    if not others:
        return f"runs only through Tile IR: {said}"
    jit = any(k.route.path is Path.PTX_JIT for k in others)
    return f"partly through Tile IR{' and PTX JIT' if jit else ''}: {said}"


def _no_kernels(listing: Listing) -> str:
    """Why an artifact has no kernel to route: no device code, LTO IR only, an entry of a
    kind this reader does not know only, or stubs."""
    if not listing.entries:
        return "no device code"
    if not _routed(listing) and not listing.targets(Kind.LTOIR):
        return "only entries of a kind this version of cuda-gate does not understand"
    if not _routed(listing):
        lto = ", ".join(target_text(Kind.LTOIR, t) for t in listing.targets(Kind.LTOIR))
        return (
            f"LTO IR only ({lto}): it runs nowhere until it is device-linked; device-link it first"
        )
    return "no kernels"


def unmet(
    report: ArtifactReport,
    cap: Capability,
    *,
    strict: bool = False,
    driver: Version | None = None,
) -> str | None:
    """Why ``report`` fails a required device, or None (:func:`gate.rules.environment.unmet`).

    As a whole by default (something in it runs on ``cap``: a library that runs partly
    passes); with ``strict`` (the project's own code; needs names) every kernel built for
    ``cap`` needs code there. A file with nothing to judge (no device code, LTO IR only,
    no kernels) fails too. A file alone and a distribution's library
    (:func:`gate.audit.verdicts.outcome`) are judged by this one rule.
    """
    why = failure(report, cap, strict=strict, driver=driver)
    return None if why is None else why()


def failure(
    report: ArtifactReport,
    cap: Capability,
    *,
    strict: bool = False,
    driver: Version | None = None,
    found: Sequence[Route] | None = None,
) -> Callable[[], str] | None:
    """:func:`unmet`'s rule, its words put off: None when ``report`` passes, else what
    says why when called. An environment audit judges every file on every device and
    prints few of the reasons (flashinfer-cubin: 15,970 cubins that run on neither 12.1
    nor 9.0, each reason a prediction per kernel). ``found``: the report's
    :func:`routes` on ``cap``, where the caller has them."""
    readable = report.error is None
    if found is None:
        found = routes(report, cap) if readable else ()
    why = environment.unmet(found, driver, readable=readable, names=report.names, strict=strict)
    if why is None:
        return None
    if why is Unmet.NOTHING_TO_ROUTE:
        return lambda: f"{report.path}: {_no_kernels(report.listing)}: nothing in it runs on {cap}"

    def words() -> str:
        prediction = predict(report, cap, driver)  # to say why, kernel by kernel
        if why is Unmet.NOTHING_RUNS:
            return f"{report.path}: nothing in it runs on {cap}: {verdict(report, prediction)}"
        return f"{report.path}: on {cap}: {phrase(prediction)}"

    return words
