"""A distribution on a device, kernel by kernel: the share of its kernels each route takes.

A *kernel* here is a name in a cubin or PTX of one file: each file counts its distinct
kernel names (a name in its sm_80 and its sm_90 cubin is one kernel), and a
distribution's count is the sum over its files (one name in two libraries is two
kernels: each library launches its own). Which route each kernel takes is
:func:`gate.rules.routes.route`'s; here, what the kernels' routes add up to:

1. Shares (:func:`tally`): kernels grouped by route, equal routes merged; the largest
   share first (of equal shares, the better route), kernels built only for other devices
   (``a``/``f`` builds that exclude this one) last: they are not expected here.
2. The majority (:attr:`Shares.majority`): the route most kernels expected on the device
   take; where none is expected, the route of those built for other devices.
3. Whether it runs (:attr:`Shares.runs`): some kernel is expected on the device and every
   one expected there has usable code (SASS, or PTX its driver can JIT); *partly*
   (:attr:`Shares.partly`): some have usable code and some do not.
4. What a distribution's line says first (:func:`reach`): *runs* when it passes the
   device and every kernel built for it runs; *unknown* when every kernel built for it
   without usable code is Tile IR whose driver support the rules cannot judge
   (:meth:`gate.rules.routes.Route.undecided`: neither "runs" nor "does not run"); *does
   not run* when no kernel built for it has usable code, nor any such Tile IR; else
   *partly* (some kernels have no code, or some library has none built for this device).
5. How far one artifact runs (:func:`reach_of`), from the routes its kernels (or, read
   without names, its targets) take: every one expected there usable (and one is), some,
   or none.
6. Whether that meets ``--require-device`` (:func:`meets`), the one rule a file and a
   distribution's libraries are judged by: *runs* passes, *does not run* and *unknown*
   fail (what may not run is never read as running), and
   *partly* passes unless ``strict``. A vendor library picks its kernels per device
   (cuBLAS carries kernels built only for sm_75 beside its sm_90 and sm_121 ones): a
   binary cannot tell those from kernels a build forgot, so only ``--strict`` (the rule
   the run judges the project's own code by) fails them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gate.rules.routes import Route, rank
from gate.rules.targets import Version


@dataclass(frozen=True)
class Share:
    """The kernels that take one route, by name (one entry per kernel per file)."""

    route: Route
    kernels: tuple[str, ...]

    @property
    def count(self) -> int:
        """How many kernels take the route."""
        return len(self.kernels)


@dataclass(frozen=True)
class Shares:
    """The kernels of a distribution (or a library) on one device, by route."""

    shares: tuple[Share, ...]  # the majority first, those only for other devices last
    driver: Version | None = None

    @property
    def total(self) -> int:
        """Every kernel counted, those only for other devices too."""
        return sum(s.count for s in self.shares)

    @property
    def expected(self) -> tuple[Share, ...]:
        """The shares of kernels built for this device (not only for other devices)."""
        return tuple(s for s in self.shares if s.route.expected())

    @property
    def missing(self) -> tuple[Share, ...]:
        """The shares of kernels built for this device with no usable code there."""
        return tuple(s for s in self.expected if not s.route.usable(self.driver))

    @property
    def undecided(self) -> tuple[Share, ...]:
        """The shares without usable code whose route may yet run: Tile IR the driver's
        support is unknown for (:meth:`gate.rules.routes.Route.undecided`)."""
        return tuple(s for s in self.missing if s.route.undecided(self.driver))

    @property
    def majority(self) -> Share | None:
        """The route most kernels expected here take (step 2); None with no kernel."""
        return self.shares[0] if self.shares else None

    @property
    def runs(self) -> bool:
        """Every kernel built for this device has usable code there, and there is one."""
        return bool(self.expected) and not self.missing

    @property
    def partly(self) -> bool:
        """Some kernels built for this device have usable code there and some do not."""
        return bool(self.missing) and len(self.missing) < len(self.expected)


def tally(groups: Iterable[tuple[Route, Sequence[str]]], driver: Version | None = None) -> Shares:
    """The shares of kernels grouped by route (step 1): ``groups`` of equal routes are
    merged, each share's kernels sorted by name."""
    merged: dict[Route, list[str]] = {}
    for r, names in groups:
        merged.setdefault(r, []).extend(names)
    ordered = sorted(
        (Share(r, tuple(sorted(names))) for r, names in merged.items() if names),
        key=lambda s: (not s.route.expected(), -s.count, rank(s.route, driver)),
    )
    return Shares(tuple(ordered), driver)


class Reach(enum.Enum):
    """How far a distribution runs on a device, as its line says first (step 4)."""

    RUNS = "runs"
    UNKNOWN = "unknown"
    PARTLY = "partly"
    NONE = "does not run"


def reach(shares: Shares, *, passes: bool) -> Reach:
    """Step 4: ``passes`` is whether every part of the distribution passes the device."""
    if passes and shares.runs:
        return Reach.RUNS
    if shares.missing and len(shares.undecided) == len(shares.missing):
        return Reach.UNKNOWN
    if len(shares.missing) < len(shares.expected) or shares.undecided:
        return Reach.PARTLY
    return Reach.NONE


def reach_of(routes: Iterable[Route], driver: Version | None) -> Reach:
    """Step 5: how far an artifact whose kernels (or targets) take ``routes`` runs on a
    device; routes only for other devices are not expected there, and none expected
    does not run."""
    expected = [r for r in routes if r.expected()]
    usable = sum(1 for r in expected if r.usable(driver))
    if usable == len(expected) and expected:
        return Reach.RUNS
    return Reach.PARTLY if usable else Reach.NONE


def meets(how: Reach, *, strict: bool) -> bool:
    """Step 6: whether an artifact that runs ``how`` far passes a required device."""
    return how is Reach.RUNS or (how is Reach.PARTLY and not strict)


def combine(parts: Iterable[Shares], driver: Version | None = None) -> Shares:
    """The shares of several libraries as one (a distribution's, or its failing
    libraries'): :func:`tally` over every share of each."""
    return tally(((s.route, s.kernels) for p in parts for s in p.shares), driver)
