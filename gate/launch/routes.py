"""Which code ran a launched kernel: the driver's word, else the cubin its module loaded.

A driver launch (``cuLaunchKernel``) lets the recorder ask the driver about the function
(``CU_FUNC_ATTRIBUTE_BINARY_VERSION``/``PTX_VERSION``). A runtime launch
(``cudaLaunchKernel``) shows CUPTI no driver launch, so the route is read from the module
of the process that holds the kernel: the cubin the driver loaded for the device, its SM
from the ELF header, and its SHA-256, compared with the entries of the inspected files
(gate.reader.listing.DeviceEntry.sha256) to tell embedded SASS from JIT output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gate.launch.log import LaunchedKernel
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.causes import ExecPath


@dataclass(frozen=True)
class Held:
    """The device-code entries of the inspected files, by SHA-256: who holds which code."""

    by_digest: Mapping[str, tuple[str, DeviceEntry]]  # digest -> (file name, entry)

    @classmethod
    def of(cls, files: Iterable[tuple[str, Listing]]) -> Held:
        """Every decoded entry of ``files`` (name, listing); entries read headers-only have none."""
        found: dict[str, tuple[str, DeviceEntry]] = {}
        for name, listing in files:
            for entry in listing.entries:
                if entry.sha256:
                    found.setdefault(entry.sha256, (name, entry))
        return cls(found)

    def sass(self, digest: str) -> bool:
        """Whether ``digest`` is an embedded SASS cubin of an inspected file."""
        held = self.by_digest.get(digest) if digest else None
        return held is not None and held[1].kind is Kind.SASS

    def holders(self, listing: Listing) -> tuple[str, ...]:
        """The files holding every entry of ``listing`` (LTO IR aside); () when some is not."""
        names: dict[str, None] = {}
        for entry in listing.entries:
            if entry.kind is Kind.LTOIR:
                continue  # opaque to the reader, and never what the driver runs
            held = self.by_digest.get(entry.sha256) if entry.sha256 else None
            if held is None:
                return ()
            names[held[0]] = None
        return tuple(names)


UNNAMED = "code the driver did not name"


def route_text(k: LaunchedKernel, path: ExecPath, held: Held) -> str:
    """Which code ran ``k`` on ``path``: as the driver said, else as its loaded module shows.

    1. The driver's attributes (a driver launch): ``sm_90 SASS``, or on the forced-JIT
       path ``sm_90 JIT-compiled from compute_90 PTX``.
    2. Its module's cubin (a runtime launch): an inspected file's embedded SASS cubin
       (same SHA-256), or any cubin on the native path (PTX JIT is off there), is
       ``sm_90 SASS``; on the forced-JIT path any other cubin is the JIT's output,
       ``JIT-compiled (sm_90) from PTX``.
    """
    if k.sass is not None:
        if path is ExecPath.JIT and jit_compiled(k, held):
            return f"{k.sass} JIT-compiled from {k.ptx} PTX"
        return f"{k.sass} SASS"
    if k.module_sass is None:
        return UNNAMED
    if path is ExecPath.JIT and jit_compiled(k, held):
        return f"JIT-compiled ({k.module_sass}) from PTX"
    return f"{k.module_sass} SASS"


def jit_compiled(k: LaunchedKernel, held: Held) -> bool:
    """Whether ``k``, launched on the forced-JIT path, ran from the JIT's output: the driver
    said its code came from PTX, or the cubin holding it is no embedded SASS cubin of an
    inspected file (:func:`route_text`'s rule)."""
    if k.sass is not None:
        return k.ptx is not None
    return k.module_sass is not None and not held.sass(k.module_sha256)
