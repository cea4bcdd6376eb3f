"""What a person reads first: one count line over the checks, what to do next, and how
each artifact reaches each device the configuration names.

The remedies are :func:`gate.rules.remedies.remedy`'s, one per cause (a cause that failed
six checks is said once, most fundamental first); the facts around each come from the run
record: the device or the named target, the driver, and the variable that carries the
build's architecture list (from the build commands as run). A check that knows more
than the run does (the host its artifact must run on, the kernel that is missing, the
library without code) carries its own remedy, and that one is said instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.config import SMOKE_NAME
from gate.record import RunRecord
from gate.render.wording import reached
from gate.rules.causes import Cause, rank
from gate.rules.remedies import ArchList, Situation, arch_list_of, remedy
from gate.rules.verdict import Check, CheckState

# The count line's words, in pytest's order: what failed first.
_COUNTED = (
    (CheckState.FAILED, "failed"),
    (CheckState.PASSED, "passed"),
    (CheckState.WARNED, "warned"),
    (CheckState.NOT_RUN, "skipped"),
)


def count_line(checks: Sequence[Check]) -> str:
    """``6 failed, 41 passed, 1 warned, 2 skipped``: the checks by state, none left out
    (``no checks`` for a run that made none)."""
    parts = []
    for state, word in _COUNTED:
        n = sum(1 for c in checks if c.state is state)
        if n:
            parts.append(f"{n:,} {word}")
    return ", ".join(parts) or "no checks"


def arch_list(record: RunRecord) -> ArchList:
    """Which variable carries the project's architecture list, from its build commands."""
    return arch_list_of([b.command for b in record.builds if b.name != SMOKE_NAME])


def next_steps(record: RunRecord) -> list[str]:
    """One line per cause of the failed checks, most fundamental first, each said once."""
    failed = sorted((c for c in record.checks if c.failed), key=lambda c: rank(c.cause))
    arch = arch_list(record)
    device = record.device.capability
    target = record.device.target if record.device.source == "--target" else None
    driver = record.environment.driver.cuda_version if record.environment.driver else None
    causes = {c.cause for c in failed}
    # Both forms missing: one line adds both (CMake's plain number, torch's +PTX).
    both = Cause.MISSING_SASS in causes and Cause.MISSING_PTX in causes
    lines: list[str] = []
    for check in failed:
        if check.cause is None or (both and check.cause is Cause.MISSING_PTX):
            continue
        said = check.remedy or remedy(
            Situation(
                check.cause,
                arch,
                device=device,
                target=target,
                driver=driver,
                ptx_too=both,
            )
        )
        if said is not None and said not in lines:
            lines.append(said)
    return lines


_NAMED = 3  # artifacts named per route on a device's line; more are counted


def device_lines(record: RunRecord) -> list[str]:
    """One line per device of the configuration's ``devices``: which artifacts reach it
    by which route (from the best route of their targets), those with no device code of
    their own left out: ``12.1: 2 from exact SASS (sm_121): ap, libk.so; 1 with no code:
    libold.so``."""
    shipped = [a for a in record.artifacts if a.listing.entries and a.name != SMOKE_NAME]
    lines = []
    for cap in record.devices:
        groups: dict[str, list[str]] = {}
        for artifact in shipped:
            route = artifact.listing.target_route(cap)
            groups.setdefault(reached(route.path, route.describe()), []).append(artifact.name)
        said = [
            f"{len(names):,} {how}: {', '.join(names[:_NAMED])}"
            + (f" and {len(names) - _NAMED:,} more" if len(names) > _NAMED else "")
            for how, names in groups.items()
        ]
        lines.append(f"{cap}: {'; '.join(said) or 'no artifact with device code'}")
    return lines
