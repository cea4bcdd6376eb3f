"""Per distribution, per device: does it run there, and how (the environment audit's answer).

Each library of a distribution that carries device code is one *part*; a set of
runtime-selected builds (:mod:`gate.reader.variants`) is one part too, answered by the
builds that may be loaded (all of them, or the one a given CUDA runtime loads), best
first: old builds are alternatives, never missing code. A part's route on a device is
the best route among its kernels (its best target's without ``--names``; with
``--strict`` the worst among the kernels built for the device), from the decision core
(:mod:`gate.rules.routes`); whether it passes is the rule ``inspect --require-device``
judges every artifact by (:func:`gate.reader.summary.unmet`).

A distribution passes a device when every part does; one with no device code needs no
device and passes (it is said, not failed: ``no device code``). A library whose cubins
hold no kernel (read with names: nvcc's per-target cubins of a host-only library) is no
part either (:func:`needs_device`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from gate.reader.distributions import Group
from gate.reader.listing import Kind
from gate.reader.read import ArtifactReport
from gate.reader.summary import failure, routes, target_text
from gate.reader.variants import Selector, VariantSet, find_sets
from gate.rules.routes import Path, Route, route
from gate.rules.targets import Capability, Version


class Category(enum.Enum):
    """A distribution's (or a part's) answer on one device, best first."""

    NATIVE = "native"  # exact SASS
    FAMILY = "family SASS"
    COMPATIBLE = "compatible SASS"
    PTX_JIT = "PTX JIT"
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
    Path.OTHER_DEVICES: Category.OTHER_DEVICES,
    Path.NONE: Category.NOTHING,
}
_RANK = {c: i for i, c in enumerate(Category)}


@dataclass(frozen=True, eq=False)
class Outcome:
    """One artifact on one device: its category, the route behind it, pass or why not."""

    category: Category
    route: Route | None  # None when there is no kernel to route (LTO IR only)
    # Why it fails a required device, or what says it when called (worded only when
    # shown: see gate.reader.summary.failure); None when it passes.
    why: str | Callable[[], str] | None

    @property
    def passes(self) -> bool:
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

    def detail(self) -> str:
        """``exact SASS (sm_121)``, ``PTX JIT (compute_90, ISA 9.0, driver >= 13.0)``."""
        if self.route is None:
            return self.category.value
        return self.route.describe()


@dataclass(frozen=True)
class Part:
    """One library, or one set of alternative builds, of a distribution on one device."""

    name: str  # the member path, or the set's family (lib/libx_cuda*.so)
    outcome: Outcome
    targets: str = ""  # what the library carries (targets_text); empty for a set
    variants: VariantSet | None = None
    builds: tuple[tuple[str, Outcome | None], ...] = ()  # label -> outcome (None: no code)
    chosen: tuple[str, ...] = ()  # the labels that give ``outcome``


@dataclass(frozen=True)
class DeviceVerdict:
    """A distribution on one device."""

    capability: Capability
    category: Category
    parts: tuple[Part, ...]

    @property
    def passes(self) -> bool:
        return all(p.outcome.passes for p in self.parts)

    def counts(self) -> dict[Category, int]:
        """Parts per category, best first."""
        found: dict[Category, int] = {}
        for p in sorted(self.parts, key=lambda p: _RANK[p.outcome.category]):
            found[p.outcome.category] = found.get(p.outcome.category, 0) + 1
        return found


@dataclass(frozen=True)
class DistributionVerdict:
    """A group (distribution or folder), its variant sets and its answer per device."""

    group: Group
    sets: tuple[VariantSet, ...]
    devices: tuple[DeviceVerdict, ...]
    errors: tuple[str, ...]

    @property
    def has_device_code(self) -> bool:
        return any(has_code(r) for r in self.group.reports)


def targets_text(report: ArtifactReport) -> str:
    """``SASS sm_75..sm_121 (11), PTX compute_90``: an artifact's targets on one line."""
    listing = report.listing
    parts = []
    for kind, label in ((Kind.SASS, "SASS"), (Kind.PTX, "PTX"), (Kind.LTOIR, "LTO IR")):
        found = sorted(listing.targets(kind), key=lambda t: (t.number, t.variant.value))
        if not found:
            continue
        names = [target_text(kind, t) for t in found]
        shown = names[0] if len(names) == 1 else f"{names[0]}..{names[-1]} ({len(names)})"
        parts.append(f"{label} {shown}")
    return ", ".join(parts) or "no device code"


def has_code(report: ArtifactReport) -> bool:
    """Whether a readable artifact carries any device-code entry."""
    return report.error is None and bool(report.listing.entries)


def needs_device(report: ArtifactReport) -> bool:
    """Whether an artifact has code a device must run: any device-code entry, but where
    kernel names were read, only when some SASS or PTX entry holds a kernel, or there is
    LTO IR. A library nvcc built from host code alone carries one kernel-less cubin per
    target (libcufftw.so: one for sm_52): nothing in it is ever launched, and like a
    library with no device code at all it needs no device. Without names a cubin's
    kernels are unknown, and its targets are judged."""
    if not has_code(report):
        return False
    listing = report.listing
    return not report.names or bool(listing.kernels() or listing.targets(Kind.LTOIR))


def outcome(
    report: ArtifactReport, cap: Capability, *, strict: bool = False, driver: Version | None = None
) -> Outcome:
    """One artifact with device code on ``cap``: its route there, and the require-device
    rule's reason.

    Where some kernel has usable code there (SASS, or PTX its driver can JIT), the route
    is the best of those, as the decision core ranks their targets: the rule judges the
    artifact as a whole, and a library that picks its kernels per device (cuBLAS carries
    kernels built only for sm_75 beside its sm_90 and sm_121 ones) runs that way; without
    kernel names it is the route of its best target. Otherwise, and with ``strict``
    (every kernel built for the device needs code there), it is the worst route its
    kernels expected there take (all only for other devices: that).
    """
    reason = failure(report, cap, per_kernel=strict, driver=driver)
    found = routes(report, cap)
    if not found:
        return Outcome(Category.NOTHING, None, reason)
    usable = [r for r in found if r.usable(driver)]
    if usable and not strict:
        chosen = _best(usable, cap)
    else:
        expected = [r for r in found if r.expected()] or list(found)
        chosen = max(expected, key=lambda r: _RANK[_OF_PATH[r.path]])
    return Outcome(_OF_PATH[chosen.path], chosen, reason)


def _best(usable: Sequence[Route], cap: Capability) -> Route:
    """The best of routes that run on ``cap``, by the decision core's own rule applied to
    their targets (the SASS it prefers, else the PTX it JITs): what a headers-only read
    answers when the best target holds a kernel."""
    sass = tuple(r.target for r in usable if r.path.is_native and r.target is not None)
    ptx = tuple(
        (r.target, r.ptx_isa) for r in usable if r.path is Path.PTX_JIT and r.target is not None
    )
    return route(sass, ptx, cap)


def judge_group(
    group: Group,
    caps: Sequence[Capability],
    *,
    runtime: Version | None = None,
    strict: bool = False,
    driver: Version | None = None,
) -> DistributionVerdict:
    """The answer for one group on every device in ``caps``."""
    errors = tuple(r.error for r in group.reports if r.error)
    sets = find_sets(group.members)
    in_set = {v.path for s in sets for v in s.variants}
    by_member = dict(zip(group.members, group.reports, strict=True))
    # What each library carries is the same on every device: worded once (and only when
    # there is a device to answer for).
    alone = [
        (member, report, targets_text(report))
        for member, report in zip(group.members, group.reports, strict=True)
        if caps and member not in in_set and needs_device(report)
    ]
    devices = []
    for cap in caps:
        parts = [
            Part(member, outcome(report, cap, strict=strict, driver=driver), carried)
            for member, report, carried in alone
        ]
        for s in sets:
            part = _set_part(s, by_member, cap, runtime=runtime, strict=strict, driver=driver)
            if part is not None:
                parts.append(part)
        devices.append(DeviceVerdict(cap, _overall(parts, errors), tuple(parts)))
    return DistributionVerdict(group, sets, tuple(devices), errors)


def _overall(parts: Sequence[Part], errors: tuple[str, ...]) -> Category:
    categories = {p.outcome.category for p in parts}
    if not categories:
        return Category.UNREADABLE if errors else Category.NO_DEVICE_CODE
    return categories.pop() if len(categories) == 1 else Category.MIXED


def _set_part(
    s: VariantSet,
    by_member: dict[str, ArtifactReport],
    cap: Capability,
    *,
    runtime: Version | None,
    strict: bool,
    driver: Version | None,
) -> Part | None:
    """The set answered by its best loadable build; None when no build has device code."""
    builds: list[tuple[str, Outcome | None]] = []
    for v in s.variants:
        report = by_member[v.path]
        found = outcome(report, cap, strict=strict, driver=driver) if needs_device(report) else None
        builds.append((v.label, found))
    if all(o is None for _, o in builds):
        return None
    loadable = {v.label for v in s.loaded(runtime)}
    candidates = [(label, o) for label, o in builds if label in loadable and o is not None]
    if not candidates:
        wanted = f"CUDA runtime {runtime}" if runtime is not None else "this device"
        why = f"{s.family}: no build for {wanted} among {', '.join(sorted(loadable)) or 'none'}"
        return Part(s.family, Outcome(Category.NOTHING, None, why), "", s, tuple(builds), ())
    best = min(candidates, key=lambda c: (not c[1].passes, _RANK[c[1].category]))[1]
    chosen = tuple(label for label, o in candidates if o == best)
    return Part(s.family, best, "", s, tuple(builds), chosen)


def selection_text(part: Part) -> str:
    """How a set's answer depends on what loads it: ``by CUDA runtime 12.8, 13.0``."""
    if part.variants is None or len(part.chosen) == len(part.variants.selectable):
        return ""  # every build gives the same answer: nothing depends on the selection
    if part.variants.rule.selector is Selector.CUDA_RUNTIME:
        runtimes = [
            str(v.runtime) for v in part.variants.selectable if v.label in part.chosen and v.runtime
        ]
        return f"with CUDA runtime {', '.join(runtimes)}" if runtimes else ""
    return f"with {', '.join(f'{c}/' for c in part.chosen)}" if part.chosen else ""


def judge_all(
    groups: Sequence[Group],
    caps: Sequence[Capability],
    *,
    runtime: Version | None = None,
    strict: bool = False,
    driver: Version | None = None,
) -> tuple[DistributionVerdict, ...]:
    """Every group's answer, in the order given."""
    return tuple(
        judge_group(g, caps, runtime=runtime, strict=strict, driver=driver) for g in groups
    )
