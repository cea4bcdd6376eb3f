"""What an artifact carries: device-code entries as records, and per-device predictions.

Both inspectors (our fatbin reader and the cuobjdump backend) produce these records,
so the checks, the reports and the manifest never depend on which one ran.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gate.reader.targets import Capability, Path, Route, Target, Version, route


class Kind(enum.Enum):
    """The kind of an embedded device-code entry."""

    SASS = "SASS"
    PTX = "PTX"
    LTOIR = "LTO IR"


@dataclass(frozen=True)
class DeviceEntry:
    """One embedded device-code entry (a cubin, a PTX text or an LTO IR blob)."""

    kind: Kind
    target: Target
    kernels: tuple[str, ...] = ()
    ptx_isa: Version | None = None
    section: str = ".nv_fatbin"
    compression: str = "none"
    stored_size: int = 0
    size: int = 0
    producer: str | None = None
    debug: bool = False
    # Device functions, globals and other non-entry names; informative only.
    name: str | None = None

    @property
    def is_stub(self) -> bool:
        """A kernel-less cubin, such as the device-link stub nvcc 13 adds per arch."""
        return self.kind is Kind.SASS and not self.kernels


@dataclass(frozen=True)
class KernelPrediction:
    """Where one kernel's code comes from on one device."""

    kernel: str
    route: Route


@dataclass(frozen=True)
class DevicePrediction:
    """Per-kernel routes of one artifact on one device capability, with a verdict."""

    capability: Capability
    kernels: tuple[KernelPrediction, ...]
    driver: Version | None = None

    @property
    def runnable(self) -> bool:
        """Every kernel has some path (and, when the driver is known, it can JIT the PTX)."""
        return bool(self.kernels) and all(self._usable(k.route) for k in self.kernels)

    @property
    def native(self) -> bool:
        """Every kernel runs from SASS, with no JIT."""
        return bool(self.kernels) and all(k.route.path.is_native for k in self.kernels)

    def _usable(self, r: Route) -> bool:
        if r.path is Path.NONE:
            return False
        if r.path is Path.PTX_JIT and self.driver and r.min_driver:
            return self.driver >= r.min_driver
        return True

    def verdict(self) -> str:
        """One phrase: native, JIT only, JIT needs a newer driver, or no code."""
        if not self.kernels:
            return "no kernels"
        if self.native:
            return "native"
        missing = [k for k in self.kernels if k.route.path is Path.NONE]
        if missing:
            return f"no code for {len(missing)} of {len(self.kernels)} kernels"
        if not self.runnable:
            return "PTX JIT needs a newer driver"
        return (
            "runs only through PTX JIT"
            if all(k.route.path is Path.PTX_JIT for k in self.kernels)
            else "partly through PTX JIT"
        )


@dataclass(frozen=True)
class Listing:
    """The device code of one artifact, in the order the inspector found it."""

    entries: tuple[DeviceEntry, ...] = field(default_factory=tuple)

    def of_kind(self, kind: Kind) -> tuple[DeviceEntry, ...]:
        """Entries of one kind, in order."""
        return tuple(e for e in self.entries if e.kind is kind)

    def targets(self, kind: Kind) -> tuple[Target, ...]:
        """Distinct targets of one kind, in first-seen order."""
        return tuple(dict.fromkeys(e.target for e in self.of_kind(kind)))

    def kernels(self) -> tuple[str, ...]:
        """Every kernel name found in any entry, sorted."""
        return tuple(sorted({k for e in self.entries for k in e.kernels}))

    def kernels_for(self, kind: Kind, target: Target) -> frozenset[str]:
        """Kernel names present in entries of ``kind`` for ``target``."""
        return frozenset(k for e in self.of_kind(kind) if e.target == target for k in e.kernels)

    def missing_kernels(self) -> dict[str, tuple[str, ...]]:
        """For each SASS or PTX target, the kernels found elsewhere but absent there."""
        everything = set(self.kernels())
        out: dict[str, tuple[str, ...]] = {}
        for kind in (Kind.SASS, Kind.PTX):
            for target in self.targets(kind):
                absent = everything - self.kernels_for(kind, target)
                if absent:
                    out[str(target)] = tuple(sorted(absent))
        return out

    def predict(self, cap: Capability, driver: Version | None = None) -> DevicePrediction:
        """The route each kernel takes on ``cap`` (SASS first, then PTX JIT)."""
        predictions = []
        for kernel in self.kernels():
            sass = tuple(e.target for e in self.of_kind(Kind.SASS) if kernel in e.kernels)
            ptx = tuple(
                (e.target, e.ptx_isa) for e in self.of_kind(Kind.PTX) if kernel in e.kernels
            )
            predictions.append(KernelPrediction(kernel, route(sass, ptx, cap)))
        return DevicePrediction(cap, tuple(predictions), driver)
