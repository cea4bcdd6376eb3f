"""The inspect stage's checks of the release policy's own rules (gate.rules.policy).

Per configured artifact with device code, each only where its key asks for it:

1. ``surplus_targets``: SASS for targets no requirement asked for;
2. ``ptx_for_highest``: the plain PTX of the highest required target, for devices newer
   than every one required (forward compatibility);
3. ``required_devices``: for the runner class in effect, every capability it lists is one
   the artifact runs on (gate.rules.routes.judge, per kernel).

``missing_sass``, ``missing_ptx`` and ``ptx_as_device_code`` change the target checks
themselves (gate.stages.artifactchecks.listing_checks, through :func:`stand_in_entries`);
``trap_stubs`` the stub check (gate.stages.stubcheck); ``launch_coverage`` the launch
checks (gate.launch.coverage). The smoke program never ships: no policy applies to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.causes import Cause, ExecPath
from gate.rules.policy import ReleasePolicy, highest_ptx, missing_highest, stand_ins, surplus
from gate.rules.require import Requirement
from gate.rules.routes import judge
from gate.rules.targets import Capability, Version
from gate.rules.verdict import Check, CheckState

CLASSNAME = "gate.policy"


def _code(listing: Listing, kind: Kind) -> tuple[DeviceEntry, ...]:
    """The entries of ``kind`` that hold kernels (all of them where the artifact has none):
    a kernel-less device-link stub is no kernel's code."""
    has_kernels = bool(listing.kernels())
    return tuple(e for e in listing.of_kind(kind) if e.kernels or not has_kernels)


def stand_in_entries(listing: Listing, requirement: Requirement) -> tuple[DeviceEntry, ...]:
    """The PTX entries that stand in for ``requirement``'s missing SASS (rule 1)."""
    entries = _code(listing, Kind.PTX)
    accepted = set(stand_ins(requirement, (e.target for e in entries)))
    return tuple(e for e in entries if e.target in accepted)


def sass_optional(listing: Listing, policy: ReleasePolicy) -> bool:
    """The artifact carries PTX and no SASS, and the policy accepts PTX as device code:
    an ELF listing without a cubin and a SASS dump without SASS are then what it holds,
    no failure (whether its PTX stands in for each required target is checked per target)."""
    return policy.ptx_as_device_code and listing.has_ptx and not listing.targets(Kind.SASS)


def policy_checks(
    name: str,
    listing: Listing,
    required: Sequence[Requirement],
    policy: ReleasePolicy,
    *,
    devices: Sequence[Capability] = (),
    runner_class: str | None = None,
    driver: Version | None = None,
) -> list[Check]:
    """The checks of rules 1-3 above on one artifact; none where the policy asks none."""
    checks = []
    if policy.surplus_targets.judged and required:
        checks.append(surplus_check(name, listing, required, policy))
    if policy.ptx_for_highest.judged and required:
        checks.append(highest_check(name, listing, required, policy))
    checks += [device_check(name, listing, cap, runner_class, driver) for cap in devices]
    return checks


def surplus_check(
    name: str, listing: Listing, required: Sequence[Requirement], policy: ReleasePolicy
) -> Check:
    """SASS that satisfies no required target: ``surplus_targets`` decides."""
    extra = surplus(required, (e.target for e in _code(listing, Kind.SASS)))
    asked = ", ".join(r.sass_label() for r in required)
    state = policy.surplus_targets.state(found=bool(extra))
    if extra:
        shown = " ".join(str(t) for t in extra)
        message = f"SASS for {shown}, which no required target ({asked}) asked for"
    else:
        message = f"every SASS target is one a required target ({asked}) asked for"
    return Check(
        f"{name}: no SASS beyond the required targets",
        CLASSNAME,
        state,
        message + _said("surplus_targets", policy.surplus_targets.value, state),
        cause=Cause.WRONG_TARGET if state is CheckState.FAILED else None,
        path=ExecPath.NATIVE,
    )


def highest_check(
    name: str, listing: Listing, required: Sequence[Requirement], policy: ReleasePolicy
) -> Check:
    """The highest required target's plain PTX is present: ``ptx_for_highest`` decides."""
    present = tuple(dict.fromkeys(e.target for e in _code(listing, Kind.PTX)))
    missing = missing_highest(required, present)
    state = policy.ptx_for_highest.state(found=missing is not None)
    listed = " ".join(str(t) for t in present) or "none"
    if missing is not None:
        message = (
            f"no {missing} PTX for the highest required target: devices newer than "
            f"{missing.capability} get no code from it; PTX targets: {listed}"
        )
    else:
        message = f"{highest_ptx(required)} PTX present for the highest required target"
    return Check(
        f"{name}: PTX for the highest required target",
        CLASSNAME,
        state,
        message + _said("ptx_for_highest", policy.ptx_for_highest.value, state),
        cause=Cause.MISSING_PTX if state is CheckState.FAILED else None,
        path=ExecPath.JIT,
    )


def device_check(
    name: str, listing: Listing, cap: Capability, runner_class: str | None, driver: Version | None
) -> Check:
    """The artifact runs on ``cap``, a device ``required_devices`` lists for the runner class."""
    prediction = listing.predict(cap, driver)
    if prediction.kernels:
        ok = prediction.runnable
        routes = "; ".join(
            f"{len(names)} by {r.describe()}" for r, names in prediction.by_route[:3]
        )
    else:
        best = listing.target_route(cap)
        ok = judge((best,), driver, per_kernel=False)
        routes = best.describe()
    said = f"required on runner class {runner_class} (policy.required_devices)"
    return Check(
        f"{name}: runs on {cap}",
        CLASSNAME,
        CheckState.of(ok),
        f"{'runs' if ok else 'does not run'} on {cap}, {said}: {routes}",
        cause=None if ok else Cause.WRONG_TARGET,
    )


def _said(key: str, value: str, state: CheckState) -> str:
    """`` (policy.surplus_targets = "warn")`` where the policy made the state."""
    return f' (policy.{key} = "{value}")' if state is not CheckState.PASSED else ""
