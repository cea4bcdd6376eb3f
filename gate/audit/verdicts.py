"""Per distribution, per device: does it run there, and how (the environment audit's answer).

Each library of a distribution that carries device code is one *part*; a set of
runtime-selected builds (:mod:`gate.rules.variants`) is one part too, answered by the
builds that may be loaded (all of them, or the one a given CUDA runtime loads), best
first: old builds are alternatives, never missing code. What answers for a part, whether
it passes, and a distribution's category are the decision core's
(:mod:`gate.rules.environment`); this module reads each group's reports for it.

A part passes a device by the rule a file alone is judged by (``inspect --require-device``,
:func:`gate.audit.artifact.failure`): something in it runs there, and with ``strict`` every
kernel built for the device (where its names were read). Where a part was read with
names, its kernels are counted per route on each device (:mod:`gate.rules.shares`); where
every part's were, the distribution's verdict is the route most of them take, with the
shares (``partly`` where some have no code, which fails only with ``strict``).

A distribution passes a device when every part does; one with no device code needs no
device and passes (it is said, not failed: ``no device code``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gate.audit.artifact import failure, has_code, needs_device, routes, targets_text
from gate.reader.distributions import Group
from gate.reader.read import ArtifactReport
from gate.rules import environment
from gate.rules.environment import DeviceVerdict, Outcome, Part, kernels_of
from gate.rules.shares import Shares, tally
from gate.rules.targets import Capability, Version
from gate.rules.variants import VariantSet, find_sets


@dataclass(frozen=True)
class DistributionVerdict:
    """A group (distribution or folder), its variant sets and its answer per device."""

    group: Group
    sets: tuple[VariantSet, ...]
    devices: tuple[DeviceVerdict, ...]
    errors: tuple[str, ...]

    @property
    def has_device_code(self) -> bool:
        """Whether any of its artifacts carries device code."""
        return any(has_code(r) for r in self.group.reports)

    @property
    def unnamed(self) -> frozenset[str]:
        """Its members read without kernel names (their kernels are unknown)."""
        group = self.group
        return frozenset(
            m for m, r in zip(group.members, group.reports, strict=True) if not r.names
        )


def outcome(
    report: ArtifactReport, cap: Capability, *, strict: bool = False, driver: Version | None = None
) -> Outcome:
    """One artifact with device code on ``cap``: its route there
    (:func:`gate.rules.environment.answer`; with ``strict`` the worst), and why it fails:
    the rule a file alone is judged by (something in it runs; with ``strict``, every
    kernel built for ``cap`` where its names were read)."""
    found = routes(report, cap)
    why = failure(report, cap, strict=strict, driver=driver, found=found)
    return environment.outcome(found, cap, strict=strict, driver=driver, why=why)


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
        parts = []
        for member, report, carried in alone:
            found = outcome(report, cap, strict=strict, driver=driver)
            parts.append(Part(member, found, carried, kernels=_kernels(found, report, cap, driver)))
        for s in sets:
            builds = tuple(
                (v.label, _build(by_member[v.path], cap, strict=strict, driver=driver))
                for v in s.variants
            )
            part = environment.set_part(s, builds, runtime)
            if part is not None:
                chosen = {v.label: v.path for v in s.variants}
                answers = [by_member[chosen[label]] for label in part.chosen[:1]]
                counted = _kernels(part.outcome, answers[0], cap, driver) if answers else None
                parts.append(replace(part, kernels=counted))
        kernels = kernels_of(parts)
        category = environment.overall(parts, errors=bool(errors), kernels=kernels)
        devices.append(DeviceVerdict(cap, category, tuple(parts), kernels, driver))
    return DistributionVerdict(group, sets, tuple(devices), errors)


def _kernels(
    found: Outcome, report: ArtifactReport, cap: Capability, driver: Version | None
) -> Shares | None:
    """A part's kernels by route on ``cap`` (``report``: the library, or the build that
    answers for a set); None where they are unknown (read without names) or there is
    nothing to route."""
    if not report.names or found.route is None:
        return None
    return tally(report.listing.kernel_groups(cap), driver)


def _build(
    report: ArtifactReport, cap: Capability, *, strict: bool, driver: Version | None
) -> Outcome | None:
    """One build of a set on ``cap``; None when it has no code a device must run."""
    return outcome(report, cap, strict=strict, driver=driver) if needs_device(report) else None


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
