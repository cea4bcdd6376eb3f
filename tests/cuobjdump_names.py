"""The arch in a file name cuobjdump lists, for the tests that compare the reader with it.

The gate reads device code itself; only the differential tests read cuobjdump's
``--list-elf`` / ``--list-ptx`` names (``check.2.sm_90.cubin``) for their arch.
"""

from __future__ import annotations

from gate.rules.targets import Target


def arch_of_listed_name(name: str) -> Target:
    """``sm_90`` from a listed file name such as ``check.2.sm_90.cubin``."""
    for part in reversed(name.split(".")):
        if part.startswith(("sm_", "compute_")):
            return Target.parse(part)
    raise AssertionError(f"cuobjdump listed an entry with no arch in its name: {name}")
