"""What an artifact carries: its device-code entries, and per-device predictions.

Both inspectors (our fatbin reader and the cuobjdump backend) produce these records,
so the checks, the reports and the manifest never depend on which one ran. The entries
themselves, and the columns our reader keeps them in, are :mod:`gate.reader.entries`'s
(named here too, as they always were); a :class:`Listing` answers the queries over them.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from gate.reader.entries import DeviceEntry, EntryPacker, Kind, PackedEntries, Totals, totals
from gate.rules.routes import Path, Route, best_route, general, judge, ptx_route, route
from gate.rules.targets import Capability, Target, Version

__all__ = [
    "DeviceEntry",
    "DevicePrediction",
    "EntryPacker",
    "KernelPrediction",
    "Kind",
    "LibraryRoutes",
    "Listing",
    "PackedEntries",
    "Totals",
    "clear_cache",
    "missing_by_target",
    "totals",
]

# Libraries repeat a few target sets thousands of times (flashinfer-cubin: 15,970 cubins
# over a dozen targets; every kernel group of a large library): each set is routed once
# per device. The rule is pure and its arguments are immutable.
_route = lru_cache(maxsize=1 << 12)(route)


def clear_cache() -> None:
    """Forget the routes worked out so far (the tests' isolation: each test reaches the rule)."""
    _route.cache_clear()


@dataclass(frozen=True)
class KernelPrediction:
    """Where one kernel's code comes from on one device."""

    kernel: str
    route: Route


@dataclass(frozen=True)
class DevicePrediction:
    """Per-kernel routes of one artifact on one device capability (its verdict phrase is
    :func:`gate.audit.artifact.phrase`)."""

    capability: Capability
    kernels: tuple[KernelPrediction, ...]
    driver: Version | None = None

    @property
    def runnable(self) -> bool:
        """Every kernel built for this device has code it can use, and one is
        (:func:`gate.rules.routes.judge`, per kernel)."""
        return judge((k.route for k in self.kernels), self.driver, per_kernel=True)

    @property
    def native(self) -> bool:
        """Every kernel built for this device runs from SASS, with no JIT, and one does."""
        expected = [k for k in self.kernels if k.route.expected()]
        return bool(expected) and all(k.route.path.is_native for k in expected)

    @property
    def elsewhere(self) -> int:
        """Kernels built only for other devices (a/f builds that exclude this one)."""
        return sum(1 for k in self.kernels if not k.route.expected())

    @cached_property
    def by_route(self) -> tuple[tuple[Route, tuple[str, ...]], ...]:
        """Kernels grouped by route, routes in first-seen order, in one pass.

        Grouped by the route object's identity first (predict shares one Route per
        group of kernels, so this is an int lookup per kernel), then merged by equality.
        """
        by_id: dict[int, tuple[Route, list[str]]] = {}
        for k in self.kernels:
            group = by_id.get(id(k.route))
            if group is None:
                group = by_id[id(k.route)] = (k.route, [])
            group[1].append(k.kernel)
        merged: dict[Route, list[str]] = {}
        for r, names in by_id.values():
            merged.setdefault(r, []).extend(names)
        return tuple((r, tuple(names)) for r, names in merged.items())


def missing_by_target(
    groups: Mapping[tuple[Kind, Target], Collection[str]],
) -> dict[str, list[str]]:
    """The coverage rule: per plain SASS target, then per plain PTX target, the kernels of
    the plain builds that it lacks, sorted.

    A kernel found only in ``a``/``f`` builds is expected nowhere else
    (:func:`gate.rules.routes.general`). Every kernel is sorted once and each target's
    missing ones picked from that order (libcublasLt: 18,000 kernels missing from 14
    targets; sorting each list separately was half of the time spent here).
    """
    plain = {
        # Sets are looked into as they are (libcufft.so.11: copying its 22 sets of up to
        # 9,155 names was 1 MB).
        key: names if isinstance(names, set | frozenset) else frozenset(names)
        for key, names in groups.items()
        if key[0] in (Kind.SASS, Kind.PTX) and general(key[1])
    }
    everything = frozenset().union(*plain.values())
    ordered = sorted(everything)
    out: dict[str, list[str]] = {}
    for kind in (Kind.SASS, Kind.PTX):
        for (k, target), present in plain.items():
            if k is kind and len(present) < len(everything):
                out[str(target)] = [name for name in ordered if name not in present]
    return out


@dataclass(frozen=True)
class LibraryRoutes:
    """How one library's kernels reach one device: counts per path and the best route.

    Built for large vendor libraries (tens of thousands of kernels) in time linear in
    entries plus kernels. ``per_kernel`` is False when kernel names were not read: the
    counts are then empty and ``best`` is the route of the library's best target,
    standing for every kernel.
    """

    capability: Capability
    driver: Version | None
    counts: tuple[tuple[Path, int], ...]  # kernels per path, best path first; none at 0
    best: Route
    kernels: int
    unusable: int  # kernels built for this device with no code, or PTX the driver cannot JIT
    per_kernel: bool
    routes: tuple[Route, ...] = ()  # one per group of kernels found in the same places

    def count(self, path: Path) -> int:
        """Kernels that take ``path`` (0 when names were not read)."""
        return dict(self.counts).get(path, 0)

    @property
    def any_runs(self) -> bool:
        """Some kernel (or, without names, some target) has code for the device."""
        return judge(self.routes or (self.best,), self.driver, per_kernel=False)

    @property
    def all_run(self) -> bool:
        """Every kernel built for the device has code for it (without names: ``any_runs``)."""
        return judge(self.routes or (self.best,), self.driver, per_kernel=self.per_kernel)


_Key = tuple[Kind, Target]


@dataclass(frozen=True)
class _Index:
    """Everything prediction needs from a listing, built in one pass over its entries."""

    # One group per (kind, target), first-seen order, with the union of its kernels.
    groups: dict[_Key, frozenset[str]]
    # Distinct (target, ISA) of the PTX entries, first-seen order.
    ptx: tuple[tuple[Target, Version | None], ...]
    # Distinct bytecode versions of the Tile IR entries, first-seen order.
    tile: tuple[Version | None, ...]
    # Kernels grouped by where they are: a bitmask over _Index.places -> kernel names.
    by_mask: dict[int, list[str]]
    places: tuple[tuple[Kind, Target, Version | None], ...]
    kernels: tuple[str, ...]  # sorted


def _index(entries: Sequence[DeviceEntry]) -> _Index:
    members: dict[_Key, list[tuple[str, ...]]] = {}
    place_bits: dict[tuple[Kind, Target, Version | None], int] = {}
    masks: dict[str, int] = {}
    ptx: dict[tuple[Target, Version | None], None] = {}
    tile: dict[Version | None, None] = {}
    for e in entries:
        if e.kind is Kind.PTX:
            ptx[e.target, e.ptx_isa] = None
        elif e.kind is Kind.TILEIR:
            tile[e.ptx_isa] = None
        members.setdefault((e.kind, e.target), []).append(e.kernels)
        if not e.kind.routed or not e.kernels:
            continue
        place = (e.kind, e.target, e.ptx_isa if e.kind is not Kind.SASS else None)
        bit = place_bits.get(place)
        if bit is None:
            bit = place_bits[place] = 1 << len(place_bits)
        get = masks.get
        for k in e.kernels:
            masks[k] = get(k, 0) | bit
    by_mask: dict[int, list[str]] = {}
    for k, mask in masks.items():
        by_mask.setdefault(mask, []).append(k)
    groups = {key: frozenset().union(*lists) for key, lists in members.items()}
    return _Index(
        groups,
        tuple(ptx),
        tuple(tile),
        by_mask,
        tuple(place_bits),
        tuple(sorted(masks)),
    )


@dataclass(frozen=True)
class Listing:
    """The device code of one artifact, in the order the inspector found it.

    Every query runs in time linear in entries plus kernels: an index is built once,
    in one pass, on first use (large vendor libraries hold thousands of entries and tens
    of thousands of kernels; a per-kernel scan of the entries was quadratic).
    """

    # A tuple, or PackedEntries from the reader (equal to the tuple of its entries).
    entries: Sequence[DeviceEntry] = ()

    @cached_property
    def _index(self) -> _Index:
        return _index(self.entries)

    @cached_property
    def _by_kind(self) -> dict[Kind, array[int]]:
        """Where each kind's entries are, in order: indices, not entries (a packed
        listing's entries are made when asked for, not held), apart from the index
        (which a listing asked for its stubs alone need not build)."""
        entries = self.entries
        kinds = entries.kinds() if isinstance(entries, PackedEntries) else (e.kind for e in entries)
        by_kind = {kind: array("I") for kind in Kind}
        for i, kind in enumerate(kinds):
            by_kind[kind].append(i)
        return by_kind

    def of_kind(self, kind: Kind) -> tuple[DeviceEntry, ...]:
        """Entries of one kind, in order."""
        return tuple(self.each(kind))

    def each(self, kind: Kind) -> Iterator[DeviceEntry]:
        """Entries of one kind, in order, one at a time (none held)."""
        entries = self.entries
        return (entries[i] for i in self._by_kind[kind])

    def distinct(self, kind: Kind) -> Iterator[DeviceEntry]:
        """Entries of one kind, in order, less those repeating an earlier one's target and
        decoded part (copies of one payload: libcublasLt.so.13 holds 5,666 SASS entries and
        1,261 distinct ones). What is asked of each is its target and what it decodes to."""
        entries = self.entries
        if isinstance(entries, PackedEntries):
            return entries.distinct(kind)
        return _distinct(self.each(kind))

    def targets(self, kind: Kind) -> tuple[Target, ...]:
        """Distinct targets of one kind, in first-seen order."""
        return tuple(t for k, t in self._index.groups if k is kind)

    def kernels(self) -> tuple[str, ...]:
        """Every kernel name found in any SASS, PTX or Tile IR entry, sorted."""
        return self._index.kernels

    def kernels_for(self, kind: Kind, target: Target) -> frozenset[str]:
        """Kernel names present in entries of ``kind`` for ``target``."""
        return self._index.groups.get((kind, target), frozenset())

    @property
    def has_ptx(self) -> bool:
        """Whether the artifact carries any PTX at all."""
        return bool(self._index.ptx)

    @property
    def has_tile(self) -> bool:
        """Whether the artifact carries any Tile IR."""
        return bool(self._index.tile)

    def unknown(self) -> tuple[DeviceEntry, ...]:
        """Entries of kinds this reader does not know, in order."""
        return self.of_kind(Kind.UNKNOWN)

    def ptx_route(self, cap: Capability) -> Route | None:
        """The newest PTX that JIT-compiles for ``cap`` (with its minimum driver), or None."""
        return ptx_route(self._index.ptx, cap)

    def target_route(self, cap: Capability) -> Route:
        """The best route any target of the artifact gives ``cap`` (no kernel names needed)."""
        return _route(self.targets(Kind.SASS), self._index.ptx, cap, self._index.tile)

    def missing_kernels(self) -> dict[str, list[str]]:
        """For each plain SASS, then PTX target, the kernels of the plain builds it lacks
        (:func:`missing_by_target`)."""
        return missing_by_target(self._index.groups)

    @cached_property
    def _group_routes(self) -> dict[Capability, list[tuple[Route, list[str]]]]:
        return {}

    @cached_property
    def _kernel_routes(self) -> dict[Capability, tuple[Route, ...]]:
        return {}

    def kernel_routes(self, cap: Capability) -> tuple[Route, ...]:
        """The routes the kernels take on ``cap``, one per group of kernels found in the
        same places, in the order of each group's first kernel by name (so the first of
        equals is the one the sorted per-kernel prediction meets first); empty without
        kernel names. What a rule over routes needs, without a prediction per kernel
        (flashinfer-cubin's 15,970 cubins: 526,000 kernel routes on two devices); worked
        out once per device (a verdict and its rule both ask)."""
        known = self._kernel_routes.get(cap)
        if known is None:
            groups = self._mask_routes(cap)
            ordered = sorted(groups, key=lambda g: min(g[1]))
            known = self._kernel_routes[cap] = tuple(r for r, _ in ordered)
        return known

    def kernel_groups(self, cap: Capability) -> tuple[tuple[Route, tuple[str, ...]], ...]:
        """The kernels by the route they take on ``cap``: one group per set of places the
        kernels are found in (equal routes of two groups both appear), each kernel once;
        empty without kernel names. What the shares per route need (:func:`gate.rules.
        shares.tally`), without a prediction per kernel."""
        return tuple((r, tuple(names)) for r, names in self._mask_routes(cap))

    def _mask_routes(self, cap: Capability) -> list[tuple[Route, list[str]]]:
        """One route per group of kernels found in the same places, computed once per group
        and device."""
        known = self._group_routes.get(cap)
        if known is None:
            known = self._group_routes[cap] = self._masked(cap)
        return known

    def _masked(self, cap: Capability) -> list[tuple[Route, list[str]]]:
        places = self._index.places
        out = []
        for mask, names in self._index.by_mask.items():
            sass: list[Target] = []
            ptx: list[tuple[Target, Version | None]] = []
            tile: list[Version | None] = []
            for i, (kind, target, isa) in enumerate(places):
                if mask >> i & 1:
                    if kind is Kind.SASS:
                        sass.append(target)
                    elif kind is Kind.PTX:
                        ptx.append((target, isa))
                    else:
                        tile.append(isa)
            out.append((_route(tuple(sass), tuple(ptx), cap, tuple(tile)), names))
        return out

    @cached_property
    def _predictions(self) -> dict[tuple[Capability, Version | None], DevicePrediction]:
        return {}

    def predict(self, cap: Capability, driver: Version | None = None) -> DevicePrediction:
        """The route each kernel takes on ``cap`` (SASS first, then PTX JIT, then Tile IR),
        kernels sorted;
        computed once per device and driver (a verdict and its rule both ask)."""
        known = self._predictions.get((cap, driver))
        if known is None:
            known = self._predictions[cap, driver] = self._predict(cap, driver)
        return known

    def _predict(self, cap: Capability, driver: Version | None) -> DevicePrediction:
        of: dict[str, Route] = {}
        for r, names in self._mask_routes(cap):
            of.update(dict.fromkeys(names, r))
        return DevicePrediction(
            cap, tuple(KernelPrediction(k, of[k]) for k in self.kernels()), driver
        )

    def routes(self, cap: Capability, driver: Version | None = None) -> LibraryRoutes:
        """How the kernels reach ``cap``: counts per path and the best route, in one pass.

        Without kernel names (a headers-only read) the library's best target stands for
        every kernel and ``per_kernel`` is False.
        """
        if not self._index.by_mask:
            best = self.target_route(cap)
            return LibraryRoutes(cap, driver, (), best, 0, 0, per_kernel=False, routes=(best,))
        counts = dict.fromkeys(Path, 0)
        unusable = 0
        groups = self._mask_routes(cap)
        for r, names in groups:
            counts[r.path] += len(names)
            unusable += 0 if r.usable(driver) or not r.expected() else len(names)
        best = best_route((r for r, _ in groups), driver)
        kept = tuple((path, n) for path, n in counts.items() if n)
        total = sum(counts.values())
        routes = tuple(r for r, _ in groups)
        return LibraryRoutes(cap, driver, kept, best, total, unusable, True, routes)


def _distinct(entries: Iterable[DeviceEntry]) -> Iterator[DeviceEntry]:
    seen: set[tuple[Target, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = set()
    for e in entries:
        key = (e.target, e.kernels, e.traps, e.empty)
        if key not in seen:
            seen.add(key)
            yield e
