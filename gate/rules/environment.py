"""Per device: what answers for an artifact, a set of alternative builds and a distribution.

The environment audit's decisions (``inspect`` on an environment) and the rule
``inspect --require-device`` judges every artifact by, over routes (:mod:`gate.rules.routes`)
and plain facts; the audit (:mod:`gate.audit`) reads the artifacts and asks these.

1. An artifact's route on a device (:func:`answer`): where some kernel has usable code
   there (SASS, PTX its driver can JIT, or Tile IR it is known to compile), the best of
   those, as :func:`route` ranks their targets: a library that picks its kernels per
   device (cuBLAS carries kernels built only for sm_75 beside its sm_90 and sm_121 ones)
   runs that way. Otherwise, and
   with ``strict`` (every kernel built for the device needs code there), the worst route
   its kernels expected there take (all only for other devices: that).
2. Whether it fails a required device (:func:`unmet`): an unreadable artifact is not
   judged (its error is said); nothing to route fails; else how far it runs there
   (:func:`gate.rules.shares.reach_of`) meets the device or not
   (:func:`gate.rules.shares.meets`): something in it must run, and with ``strict`` (where
   kernel names were read) every kernel built for the device. A file alone and a library
   of a distribution are judged by this one rule.
3. Which artifacts are parts of a distribution's answer (:func:`needs_device`): a library
   whose cubins hold no kernel (read with names: nvcc's per-target cubins of a host-only
   library) needs no device.
4. A set of runtime-selected builds (:func:`set_part`) is answered by the best build that
   may be loaded (:meth:`gate.rules.variants.VariantSet.loaded`): a passing one first,
   then the best category; none loadable with device code fails.
5. A distribution on a device (:func:`overall`): where its kernels were counted
   (:mod:`gate.rules.shares`), the category of the route most of them take; else one
   category when every part agrees, else mixed; no part is *no device code* (or
   *unreadable* when a file could not be read). It passes when every part does (step 2).
6. What fails ``--require-device`` (:func:`shortfalls`): each required device a
   distribution does not pass, with the parts that do not run there and their kernels.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cached_property

from gate.rules.routes import Path, Route, route
from gate.rules.shares import Shares, combine, meets, reach_of
from gate.rules.targets import Capability, Version
from gate.rules.variants import VariantSet


class Category(enum.Enum):
    """A distribution's (or a part's) answer on one device, best first."""

    NATIVE = "native"  # exact SASS
    FAMILY = "family SASS"
    COMPATIBLE = "compatible SASS"
    PTX_JIT = "PTX JIT"
    # Compiled by the driver's Tile IR compiler when the module loads (not the PTX JIT).
    TILE_IR = "Tile IR"
    OTHER_DEVICES = "only for other devices"
    NOTHING = "nothing"
    MIXED = "mixed"
    NO_DEVICE_CODE = "no device code"
    UNREADABLE = "unreadable"


_OF_PATH = {
    Path.EXACT_SASS: Category.NATIVE,
    Path.FAMILY_SASS: Category.FAMILY,
    Path.COMPATIBLE_SASS: Category.COMPATIBLE,
    Path.PTX_JIT: Category.PTX_JIT,
    Path.TILE_IR: Category.TILE_IR,
    Path.OTHER_DEVICES: Category.OTHER_DEVICES,
    Path.NONE: Category.NOTHING,
}
_RANK = {c: i for i, c in enumerate(Category)}


def category(path: Path) -> Category:
    """The category a route's path answers with: exact SASS is *native*."""
    return _OF_PATH[path]


def rank(found: Category) -> int:
    """Where a category stands, best first (0: native)."""
    return _RANK[found]


@dataclass(frozen=True, eq=False)
class Outcome:
    """One artifact on one device: its category, the route behind it, pass or why not."""

    category: Category
    route: Route | None  # None when there is no kernel to route (LTO IR only)
    # Why it fails a required device, or what says it when called (worded only when
    # shown: see gate.audit.artifact.failure); None when it passes.
    why: str | Callable[[], str] | None

    @property
    def passes(self) -> bool:
        """Whether it runs there: nothing says why not."""
        return self.why is None

    @cached_property
    def reason(self) -> str | None:
        """Why it fails a required device; None when it passes."""
        return self.why() if callable(self.why) else self.why

    def _key(self) -> tuple[Category, Route | None, str | None]:
        return (self.category, self.route, self.reason)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Outcome) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True)
class Part:
    """One library, or one set of alternative builds, of a distribution on one device."""

    name: str  # the member path, or the set's family (lib/libx_cuda*.so)
    outcome: Outcome
    targets: str = ""  # what the library carries (worded once); empty for a set
    variants: VariantSet | None = None
    builds: tuple[tuple[str, Outcome | None], ...] = ()  # label -> outcome (None: no code)
    chosen: tuple[str, ...] = ()  # the labels that give ``outcome``
    # Its kernels by route (a set's: the build that answers for it), where its kernel
    # names were read; None: judged by targets alone.
    kernels: Shares | None = None


@dataclass(frozen=True)
class DeviceVerdict:
    """A distribution on one device."""

    capability: Capability
    category: Category
    parts: tuple[Part, ...]
    # Its kernels by route, where every part's kernel names were read; None: judged by
    # targets alone.
    kernels: Shares | None = None
    driver: Version | None = None  # the driver the routes were judged for; None: unknown

    @property
    def passes(self) -> bool:
        """Whether every part runs there (a distribution of no part passes)."""
        return all(p.outcome.passes for p in self.parts)

    @property
    def undecided_parts(self) -> tuple[str, ...]:
        """The parts that fail only because their route may yet run: Tile IR the driver's
        support is unknown for (:meth:`gate.rules.routes.Route.undecided`)."""
        return tuple(
            p.name
            for p in self.parts
            if not p.outcome.passes
            and p.outcome.route is not None
            and p.outcome.route.undecided(self.driver)
        )

    @property
    def undecided(self) -> bool:
        """It fails by :attr:`undecided_parts`, beside none that fails but by being built
        only for other devices (as its kernels' shares count them: not expected there).
        Such a distribution is not said to run, nor to not run: *unknown*."""
        failing = [p.outcome for p in self.parts if not p.outcome.passes]
        undecided = len(self.undecided_parts)
        elsewhere = [o for o in failing if o.category is Category.OTHER_DEVICES]
        return bool(undecided) and undecided + len(elsewhere) == len(failing)

    def counts(self) -> dict[Category, int]:
        """Parts per category, best first."""
        found: dict[Category, int] = {}
        for p in sorted(self.parts, key=lambda p: rank(p.outcome.category)):
            found[p.outcome.category] = found.get(p.outcome.category, 0) + 1
        return found


def answer(
    routes: Sequence[Route], cap: Capability, *, strict: bool, driver: Version | None
) -> Route | None:
    """The route that answers for an artifact whose kernels (or targets) take ``routes``
    on ``cap`` (step 1); None when there is no kernel to route."""
    if not routes:
        return None
    usable = [r for r in routes if r.usable(driver)]
    if usable and not strict:
        return _best(usable, cap)
    expected = [r for r in routes if r.expected()] or list(routes)
    return max(expected, key=lambda r: rank(category(r.path)))


def _best(usable: Sequence[Route], cap: Capability) -> Route:
    """The best of routes that run on ``cap``, by :func:`route` applied to their targets
    (the SASS it prefers, else the PTX it JITs, else the Tile IR the driver compiles): what
    a headers-only read answers when the best target holds a kernel."""
    sass = tuple(r.target for r in usable if r.path.is_native and r.target is not None)
    ptx = tuple(
        (r.target, r.ptx_isa) for r in usable if r.path is Path.PTX_JIT and r.target is not None
    )
    tile = tuple(r.ptx_isa for r in usable if r.path is Path.TILE_IR)
    return route(sass, ptx, cap, tile)


def outcome(
    routes: Sequence[Route],
    cap: Capability,
    *,
    strict: bool,
    driver: Version | None,
    why: str | Callable[[], str] | None,
) -> Outcome:
    """An artifact's outcome on ``cap``: the category of its :func:`answer` (*nothing* with
    no route), and ``why`` it fails a required device (None: it passes)."""
    chosen = answer(routes, cap, strict=strict, driver=driver)
    if chosen is None:
        return Outcome(Category.NOTHING, None, why)
    return Outcome(category(chosen.path), chosen, why)


class Unmet(enum.Enum):
    """Why an artifact fails a required device (step 2)."""

    NOTHING_TO_ROUTE = "no kernel to route"  # no device code, LTO IR only, no kernels
    NOTHING_RUNS = "nothing in it runs"  # judged as a whole
    KERNEL_WITHOUT_CODE = "a kernel built for it has no code"  # judged per kernel


def unmet(
    routes: Sequence[Route],
    driver: Version | None,
    *,
    readable: bool,
    names: bool,
    strict: bool,
) -> Unmet | None:
    """Why an artifact whose kernels (or targets) take ``routes`` fails a required device,
    or None when it passes (step 2): the rule the run judges loaded libraries by.

    As a whole by default: something in it runs (a library that runs partly passes);
    with ``strict`` (the project's own code), where kernel names were read, every kernel
    built for the device needs code there. A file with nothing to route fails too; an
    unreadable one is not judged.
    """
    if not readable:
        return None
    if not routes:
        return Unmet.NOTHING_TO_ROUTE
    per_kernel = strict and names
    how = reach_of(routes, driver)
    if meets(how, strict=per_kernel):
        return None
    return Unmet.KERNEL_WITHOUT_CODE if per_kernel else Unmet.NOTHING_RUNS


def needs_device(*, has_code: bool, names: bool, kernels: bool, lto: bool) -> bool:
    """Whether an artifact has code a device must run (step 3): any device-code entry
    (``has_code``), but where kernel names were read, only when some SASS or PTX entry
    holds a kernel, or there is LTO IR. A library nvcc built from host code alone carries
    one kernel-less cubin per target (libcufftw.so: one for sm_52): nothing in it is ever
    launched. Without names a cubin's kernels are unknown, and its targets are judged."""
    return has_code and (not names or kernels or lto)


def set_part(
    s: VariantSet,
    builds: tuple[tuple[str, Outcome | None], ...],
    runtime: Version | None,
) -> Part | None:
    """The set answered by its best loadable build (step 4), from each build's outcome
    (``label -> outcome``, None for a build with no device code); None when no build has
    device code."""
    if all(o is None for _, o in builds):
        return None
    loadable = {v.label for v in s.loaded(runtime)}
    candidates = [(label, o) for label, o in builds if label in loadable and o is not None]
    if not candidates:
        wanted = f"CUDA runtime {runtime}" if runtime is not None else "this device"
        why = f"{s.family}: no build for {wanted} among {', '.join(sorted(loadable)) or 'none'}"
        return Part(s.family, Outcome(Category.NOTHING, None, why), "", s, builds)
    best = min(candidates, key=lambda c: (not c[1].passes, rank(c[1].category)))[1]
    chosen = tuple(label for label, o in candidates if o == best)
    return Part(s.family, best, "", s, builds, chosen)


def overall(parts: Sequence[Part], *, errors: bool, kernels: Shares | None = None) -> Category:
    """A distribution's category on one device from its parts (step 5), or from the route
    most of its ``kernels`` take where they were counted; with no part, no device code, or
    *unreadable* where some file had ``errors``."""
    categories = {p.outcome.category for p in parts}
    if not categories:
        return Category.UNREADABLE if errors else Category.NO_DEVICE_CODE
    majority = kernels.majority if kernels is not None else None
    if majority is not None:
        return category(majority.route.path)
    return categories.pop() if len(categories) == 1 else Category.MIXED


@dataclass(frozen=True)
class Shortfall:
    """A required device a distribution does not run on (step 6)."""

    capability: Capability
    failing: tuple[str, ...]  # the parts that do not run there, in order
    by_targets: bool  # some of them judged by targets alone: its kernel names were not read
    # The kernels of the failing parts by route, where every one's were counted.
    kernels: Shares | None = None
    undecided: bool = False  # it fails only by Tile IR of unknown driver support


def shortfalls(
    devices: Sequence[DeviceVerdict],
    required: Collection[Capability],
    unnamed: Collection[str],
) -> tuple[Shortfall, ...]:
    """Each required device in ``devices`` that a distribution does not pass, in order
    (step 6). ``unnamed``: its members read without kernel names, whose kernels are
    unknown (a cubin nvcc built for host code holds none, yet fails by its target)."""
    out = []
    for dev in devices:
        if dev.capability not in required or dev.passes:
            continue
        failing = [p for p in dev.parts if not p.outcome.passes]
        names = tuple(p.name for p in failing)
        by_targets = any(n in unnamed for n in names)
        out.append(Shortfall(dev.capability, names, by_targets, kernels_of(failing), dev.undecided))
    return tuple(out)


def kernels_of(parts: Sequence[Part]) -> Shares | None:
    """The kernels of ``parts`` by route, as one; None where some part's were not counted
    (or there is no part)."""
    counted = [p.kernels for p in parts if p.kernels is not None]
    if not parts or len(counted) < len(parts):
        return None
    return combine(counted, counted[0].driver)
