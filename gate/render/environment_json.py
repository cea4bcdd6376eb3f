"""The JSON document of an environment audit (``inspect --json`` on an environment, a wheel
or an image): schema ``gate/schemas/environment.schema.json``, per distribution its
artifacts, sets of alternative builds, groups of identical artifacts and, per device, the
verdict the console says (:mod:`gate.render.environment`), whether it passes, its kernels
by route and each part's route.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gate import __version__
from gate.audit.artifact import has_code
from gate.audit.verdicts import DistributionVerdict
from gate.render.environment import by_target_note, identical, summary_counts, verdict_text
from gate.render.inspect import route_json
from gate.rules.environment import DeviceVerdict, Outcome, Part
from gate.rules.shares import reach
from gate.rules.targets import Capability, Version
from gate.rules.variants import VariantSet

if TYPE_CHECKING:
    from gate.reader.locks import Evaluated

SCHEMA_VERSION = 5  # 3: the Tile IR category; 4: locks (the environment evaluated), warnings;
# 5: reach "unknown" (Tile IR of unknown driver support), a device's "undecided"
DOCUMENT = "cuda-gate-environment"


def _outcome_json(o: Outcome | None) -> dict[str, Any] | None:
    if o is None:
        return None
    route = route_json(o.route) if o.route is not None else None
    return {"category": o.category.value, "route": route, "reason": o.reason}


def _part_json(p: Part) -> dict[str, Any]:
    return {
        "name": p.name,
        **(_outcome_json(p.outcome) or {}),
        "passes": p.outcome.passes,
        "alternatives": p.variants.family if p.variants else None,
        "chosen": list(p.chosen),
        "builds": [{"label": label, "outcome": _outcome_json(o)} for label, o in p.builds],
    }


def _kernels_json(dev: DeviceVerdict) -> dict[str, Any] | None:
    """The kernels by route (names only for those with no usable code); None by targets."""
    shares = dev.kernels
    if shares is None:
        return None
    missing = shares.missing
    return {
        "total": shares.total,
        "reach": reach(shares, passes=dev.passes).value,
        "shares": [
            {
                "route": route_json(s.route),
                "kernels": s.count,
                "usable": s.route.usable(shares.driver),
                "kernel_names": list(s.kernels) if s in missing else None,
            }
            for s in shares.shares
        ],
    }


def _set_json(s: VariantSet) -> dict[str, Any]:
    return {
        "family": s.family,
        "rule": s.rule.name,
        "selector": s.rule.selector.value,
        "says": s.rule.says,
        "source": s.rule.source,
        "builds": [
            {
                "label": b.label,
                "path": b.path,
                "other_backend": b.other_backend,
                "runtime": str(b.runtime) if b.runtime else None,
            }
            for b in s.variants
        ],
    }


def distribution_json(v: DistributionVerdict) -> dict[str, Any]:
    """One distribution of the document."""
    dist = v.group.distribution
    return {
        "name": dist.name,
        "version": dist.version,
        "owner": dist.owner.value,
        "source": dist.source,
        "artifacts": len(v.group.reports),
        "with_device_code": sum(1 for r in v.group.reports if has_code(r)),
        "errors": list(v.errors),
        "variant_sets": [_set_json(s) for s in v.sets],
        "groups": [
            {"count": len(names), "targets": targets, "routes": list(routes), "members": names}
            for targets, routes, names in identical(v)
        ],
        "devices": [
            {
                "capability": str(dev.capability),
                "category": dev.category.value,
                "verdict": verdict_text(dev) + by_target_note(v, dev),
                "passes": dev.passes,
                "undecided": dev.undecided,
                "per_kernel": dev.kernels is not None,
                "kernels": _kernels_json(dev),
                "parts": [_part_json(p) for p in dev.parts],
            }
            for dev in v.devices
        ],
    }


def document(
    verdicts: Sequence[DistributionVerdict],
    caps: Sequence[Capability],
    errors: Sequence[str],
    *,
    names: bool,
    scan: bool,
    runtime: Version | None,
    locks: Sequence[Evaluated] = (),
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The whole environment document (``inspect --json`` on an environment): with each
    lock read, the environment its markers were evaluated for (as the console's note says)
    and the warnings (a chosen wheel whose tags do not install there)."""
    return {
        "version": SCHEMA_VERSION,
        "document": DOCUMENT,
        "tool": {"name": "cuda-gate", "version": __version__},
        "names": names,
        "scan": scan,
        "cuda_runtime": str(runtime) if runtime else None,
        "devices": [str(c) for c in caps],
        "distributions": [distribution_json(v) for v in verdicts],
        "summary": summary_counts(verdicts, caps),
        "locks": [lock.to_json() for lock in locks],
        "errors": list(errors),
        "warnings": list(warnings),
    }
