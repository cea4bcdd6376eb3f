"""Which host an artifact must run on: the device's own host class, the config's, or this one.

A device that ships with one host architecture only fixes it (``compat.json``
``devices``: 12.1, GB10, and 11.0, Jetson Thor, ship on aarch64 hosts): an x86-64
artifact checked for 12.1 on an x86-64 build machine cannot run on a DGX Spark. A
``host`` key in the project configuration names it where the device does not (9.0 is
H100 on x86-64 and GH200 on aarch64); else the machine in front is the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.rules.compat import rules
from gate.rules.targets import Capability


@dataclass(frozen=True)
class HostRule:
    """The host architecture (``uname -m`` name) an artifact must run on, and why."""

    host: str
    reason: str
    conflict: str | None = None  # the config names a host the device never ships with


def host_for(device: Capability, *, configured: str | None, here: str) -> HostRule:
    """The configured host, else the device's only host class, else ``here``."""
    known = rules().device_class(device)
    single = next(iter(known.hosts)) if known is not None and len(known.hosts) == 1 else None
    if configured is not None:
        conflict = None
        if single not in (None, configured):
            conflict = (
                f"the config says host {configured}, but {device} devices ship on {single} only"
            )
        return HostRule(configured, "the config's host", conflict)
    if known is not None and single is not None:
        return HostRule(single, f"{device} devices ship on {single} hosts only ({known.products})")
    return HostRule(here, "this host")
