"""The inspect stage's check for kernels that are present but do nothing on a device.

Our reader judges each kernel's SASS per target (gate.rules.stubs, read by
gate.reader.sass): a trap stub, an empty body, or code. Per artifact one check names,
per kernel, the targets whose SASS is a stub and the checked devices that would run it
("present but traps on 12.1", by the same routes every other prediction uses):

how much each matters is gate.rules.stubs.severity: a trap stub (or an empty body an
architecture guard left) that a checked device runs fails the project's own artifact,
one no checked device runs warns, an empty kernel with no code anywhere is only named
(a warm-up kernel), and a library outside the project only ever warns.

SASS older than sm_70 is not read (gate.reader.sass): the check says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.reader.listing import Kind, Listing
from gate.reader.stubs import stubs_of, unread_targets
from gate.render.text import count, stub_line
from gate.rules.causes import Cause, ExecPath
from gate.rules.kernels import readable_name
from gate.rules.policy import Action, stub_severity
from gate.rules.stubs import Severity
from gate.rules.targets import Capability
from gate.rules.verdict import Check, CheckState

_SHOWN = 5  # kernels named in one check's message


def stub_check(
    name: str,
    listing: Listing,
    devices: Sequence[Capability],
    *,
    own: bool = True,
    trap_stubs: Action = Action.FAIL,
) -> Check | None:
    """The one check on ``name``'s kernels that do nothing (None without kernels in SASS);
    ``trap_stubs`` (``[policy]``): ``warn`` makes what would fail a warning."""
    if not any(e.kernels for e in listing.of_kind(Kind.SASS)):
        return None
    title = f"{name}: no kernel is a trap stub or empty"
    found = stubs_of(listing, devices)
    unread = unread_targets(listing)
    note = ""
    if unread:
        note = f"; not checked: SASS of {', '.join(unread)} (before sm_70) is not read"
    if not found:
        kernels = count(len(listing.kernels()), "kernel")
        said = f"{kernels}: code in every SASS target read{note}"
        return Check(title, "gate.inspect", CheckState.PASSED, said)
    ranked = sorted(found, key=lambda s: _ORDER[s.severity(own=True)])
    message = "; ".join(stub_line(s, readable_name) for s in ranked[:_SHOWN])
    if len(found) > _SHOWN:
        message += f"; and {count(len(found) - _SHOWN, 'more kernel')}"
    worst = min((s.severity(own=own) for s in found), key=_ORDER.__getitem__)
    if not own and ranked[0].severity(own=True) is Severity.FAIL:
        message += " (a library outside the project: a warning, never a failure)"
    if stub_severity(worst, trap_stubs) is not worst:
        worst = stub_severity(worst, trap_stubs)
        message += f' (policy.trap_stubs = "{trap_stubs.value}")'
    state = _STATES[worst]
    return Check(
        title,
        "gate.inspect",
        state,
        message + note,
        cause=Cause.TRAP_STUB if state is CheckState.FAILED else None,
        path=ExecPath.NATIVE,
    )


_ORDER = {Severity.FAIL: 0, Severity.WARN: 1, Severity.NOTE: 2}
_STATES = {Severity.FAIL: CheckState.FAILED, Severity.WARN: CheckState.WARNED,
           Severity.NOTE: CheckState.PASSED}  # fmt: skip
