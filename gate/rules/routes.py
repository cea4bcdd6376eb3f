"""How a kernel gets code on a device, and whether a driver can JIT a PTX ISA: the routes.

One answer per question, asked by the reader's listings, ``inspect``, the run's
libraries and predictions, and the reports:

* :func:`sass_route`: the best SASS among a kernel's targets that runs on the device
  (exact before compatible; family builds where they serve it);
* :func:`ptx_route`: the newest PTX that JIT-compiles for it, with the oldest driver
  that can JIT its ISA;
* :func:`route`: SASS first, else PTX, else nothing, or *only for other devices* when
  every target the kernel has is an ``a``/``f`` build that excludes this device (a
  kernel that exists only in ``sm_90a`` builds is not expected on 12.1);
* :func:`tile_route`: Tile IR the driver compiles at load time (not the PTX JIT: forced
  JIT never uses it), with the oldest driver that compiles its bytecode version;
* :func:`tile_support`: whether a driver compiles a Tile IR bytecode version: True or
  False where ``compat.json``'s table decides, else None (unknown, never "runs");
* :func:`jit_support`: whether a driver of a CUDA version can JIT PTX of an ISA
  (``compat.json``'s table and series; an ISA newer than every rule is beyond every
  driver the rules know);
* :func:`judge`: whether an artifact runs on a device: per kernel (the project's own
  code, ``strict_libraries``) or as a whole (any other library: something must run);
* :func:`best_route`: the best of a library's routes on a device (:func:`rank`: usable
  first, then the better path, then the newer target).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from gate.rules.compat import ptx_jits_for, rules, sass_runs_on
from gate.rules.targets import Capability, Target, Variant, Version


class Path(enum.Enum):
    """How a kernel will get code on a device, best first."""

    EXACT_SASS = "exact SASS"
    COMPATIBLE_SASS = "compatible SASS"
    FAMILY_SASS = "family SASS"
    PTX_JIT = "PTX JIT"
    # Tile IR bytecode, compiled by the driver when the module loads.
    TILE_IR = "Tile IR"
    NONE = "nothing"
    # Every target it has is an a/f build for other devices: not expected on this one.
    OTHER_DEVICES = "only for other devices"

    @property
    def is_native(self) -> bool:
        """Whether the path runs SASS from the artifact, with no JIT involved."""
        return native(self)


def native(path: Path) -> bool:
    """Whether ``path`` runs SASS from the artifact, with no JIT involved."""
    return path in (Path.EXACT_SASS, Path.COMPATIBLE_SASS, Path.FAMILY_SASS)


def min_driver(isa: Version) -> Version | None:
    """The oldest driver CUDA version that can JIT PTX of ISA ``isa``; None if no rule says."""
    return rules().min_driver(isa)


def jit_support(isa: Version | None, driver: Version | None) -> bool | None:
    """Whether a driver of CUDA version ``driver`` can JIT PTX of ISA ``isa``.

    True or False where the rules decide; None where they cannot (no ISA or no driver
    known, or both newer than the rules). An ISA newer than every ISA the rules know
    needs a driver newer than every driver they know: a driver they know cannot JIT it.
    """
    if isa is None or driver is None:
        return None
    need = min_driver(isa)
    if need is not None:
        return driver >= need
    known = rules()
    if isa > known.max_known_isa() and driver <= known.max_known_driver():
        return False
    return None


def tile_support(version: Version | None, driver: Version | None) -> bool | None:
    """Whether a driver of CUDA version ``driver`` compiles Tile IR bytecode ``version``.

    True or False where the table decides; False for a driver older than the first with
    any Tile IR support; None otherwise (no version or driver known, a version the table
    does not hold): unknown, which no prediction reads as "runs".
    """
    if version is None or driver is None:
        return None
    known = rules()
    need = known.tile_min_driver(version)
    if need is not None:
        return driver >= need
    first = known.first_tile_driver()
    if first is not None and driver < first:
        return False
    return None


@dataclass(frozen=True)
class Route:
    """The path a kernel takes on one device, with the target that serves it."""

    path: Path
    target: Target | None = None
    ptx_isa: Version | None = None
    min_driver: Version | None = None

    def usable(self, driver: Version | None) -> bool:
        """Code runs this way: a route that exists, whose PTX (if any) a known driver can JIT."""
        if self.path in (Path.NONE, Path.OTHER_DEVICES):
            return False
        if self.path is Path.PTX_JIT:
            return jit_support(self.ptx_isa, driver) is not False
        if self.path is Path.TILE_IR:
            return tile_support(self.ptx_isa, driver) is True
        return True

    def undecided(self, driver: Version | None) -> bool:
        """Whether the rules cannot say if this route runs: Tile IR whose bytecode version
        the driver's support is unknown for (no driver known, or a version the table does
        not hold). Such a route is not usable (never "runs"), yet nothing says it fails."""
        return self.path is Path.TILE_IR and tile_support(self.ptx_isa, driver) is None

    def expected(self) -> bool:
        """Whether the device is one this code was built for (not only for other devices)."""
        return self.path is not Path.OTHER_DEVICES

    def describe(self) -> str:
        """Human text: ``exact SASS (sm_90)``, ``PTX JIT (compute_90, ISA 9.0, driver >= 13.0)``."""
        if self.path is Path.TILE_IR:
            need = f"driver >= {self.min_driver}" if self.min_driver else "driver support unknown"
            return f"{self.path.value} (bytecode {self.ptx_isa or 'version unknown'}, {need})"
        if self.target is None:
            return str(self.path.value)
        if self.path is Path.PTX_JIT:
            extra = f", ISA {self.ptx_isa}" if self.ptx_isa else ""
            extra += f", driver >= {self.min_driver}" if self.min_driver else ""
            return f"{self.path.value} ({self.target}{extra})"
        return f"{self.path.value} ({self.target})"


Ptx = tuple[tuple[Target, Version | None], ...]  # (target, ISA) of each distinct PTX
Tile = tuple[Version | None, ...]  # the bytecode version of each distinct Tile IR


def sass_route(sass_targets: tuple[Target, ...], cap: Capability) -> Route | None:
    """The best SASS among ``sass_targets`` for ``cap``, or None when none runs there."""
    usable = [t for t in sass_targets if sass_runs_on(t, cap)]
    if not usable:
        return None
    exact = [t for t in usable if t.number == cap.number]
    if exact:
        return Route(Path.EXACT_SASS, _prefer_plain(exact))
    # Ties (sm_100 and sm_100f on 10.3) go to the plain target, as exact matches do, so
    # the answer never depends on the order the entries came in.
    best = max(usable, key=lambda t: (t.minor, t.variant is Variant.NONE))
    path = Path.FAMILY_SASS if best.variant is Variant.FAMILY else Path.COMPATIBLE_SASS
    return Route(path, best)


def ptx_route(ptx: Ptx, cap: Capability) -> Route | None:
    """The PTX a driver would JIT for ``cap``, with its minimum driver, or None when none can.

    The newest target; for one SM number an ``a``/``f`` build before the plain one; then
    the oldest known ISA (it needs the oldest driver): the answer never depends on the
    order the entries came in.
    """
    usable = [(t, isa) for t, isa in ptx if ptx_jits_for(t, cap)]
    if not usable:
        return None
    newest = max(t.number for t, _ in usable)
    best = [(t, isa) for t, isa in usable if t.number == newest]
    best = [(t, isa) for t, isa in best if t.variant is not Variant.NONE] or best
    known = [(isa, t) for t, isa in best if isa is not None]
    if not known:
        return Route(Path.PTX_JIT, min((t for t, _ in best), key=str))
    isa, target = min(known, key=lambda x: (x[0], str(x[1])))
    return Route(Path.PTX_JIT, target, isa, min_driver(isa))


def tile_route(tile: Tile) -> Route | None:
    """The Tile IR the driver would compile, or None without any: the oldest known bytecode
    version (it needs the oldest driver), with that driver where the table knows it.

    Tile IR is architecture-independent: no device is excluded by it here; whether a
    driver compiles it for a device is :func:`tile_support`'s (unknown where no rule says).
    """
    if not tile:
        return None
    known = sorted(v for v in tile if v is not None)
    if not known:
        return Route(Path.TILE_IR)
    return Route(Path.TILE_IR, None, known[0], rules().tile_min_driver(known[0]))


def route(sass_targets: tuple[Target, ...], ptx: Ptx, cap: Capability, tile: Tile = ()) -> Route:
    """The path a kernel takes on ``cap``: compatible SASS first, else PTX JIT, else Tile IR,
    else nothing (or only for other devices, when every target it has is an a/f build
    excluding ``cap``)."""
    found = sass_route(sass_targets, cap) or ptx_route(ptx, cap) or tile_route(tile)
    if found is not None:
        return found
    targets = (*sass_targets, *(t for t, _ in ptx))
    if targets and not any(general(t) for t in targets):
        return Route(Path.OTHER_DEVICES)
    return Route(Path.NONE)


def general(target: Target) -> bool:
    """A build every kernel is expected in: a plain target. ``a``/``f`` builds are for
    their own devices; a kernel found only there is expected nowhere else."""
    return target.variant is Variant.NONE


def _prefer_plain(targets: list[Target]) -> Target:
    plain = [t for t in targets if t.variant is Variant.NONE]
    return (plain or targets)[0]


def judge(routes: Iterable[Route], driver: Version | None, *, per_kernel: bool) -> bool:
    """Whether an artifact runs on a device, from the routes of its kernels (or targets).

    ``per_kernel`` (the project's own code, ``strict_libraries``): every kernel expected
    on the device has a usable route, and at least one is expected. Otherwise (any other
    library, judged as a whole): some route is usable.
    """
    found = [r for r in routes if r.expected()]
    if not per_kernel:
        return any(r.usable(driver) for r in found)
    return bool(found) and all(r.usable(driver) for r in found)


# Each path's place in the ranking: Path lists them best first.
_PATH_ORDER = {path: i for i, path in enumerate(Path)}


def rank(r: Route, driver: Version | None) -> tuple[int, int, int]:
    """Sort key of a route on a device, the best least: usable with ``driver`` first, then
    by path (best first), then the newest target (a route without one counts as 0)."""
    number = r.target.number if r.target else 0
    return (0 if r.usable(driver) else 1, _PATH_ORDER[r.path], -number)


def best_route(routes: Iterable[Route], driver: Version | None) -> Route:
    """The best of ``routes`` by :func:`rank`, the first of equals; ValueError when empty."""
    return min(routes, key=lambda r: rank(r, driver))
