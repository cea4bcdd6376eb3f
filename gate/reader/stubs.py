"""Kernels present in some target's SASS that do nothing there, per kernel and target.

Our reader judges each kernel's body per cubin (gate.rules.stubs, read by
gate.reader.sass); this gathers those judgements per kernel, with the devices that
would run the stub by the routes every other prediction uses ("present but traps on
12.1"). The run's check (gate.stages.stubcheck), its diagnosis and `cuda-gate inspect`
all read it from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gate.reader.listing import Kind, Listing
from gate.reader.sass import readable
from gate.rules.stubs import Body, Severity, severity
from gate.rules.targets import Capability, Target


@dataclass(frozen=True)
class Stub:
    """One kernel that does nothing in some targets' SASS, and the devices that run those
    (said by :func:`gate.render.text.stub_line`)."""

    kernel: str
    trap: bool  # a trap stub; else an empty body
    targets: tuple[Target, ...]
    devices: tuple[Capability, ...]  # checked devices that would run one of ``targets``
    has_code: bool  # the kernel has code (neither stub nor empty) for another target

    def severity(self, *, own: bool) -> Severity:
        """How much it matters (gate.rules.stubs.severity)."""
        body = Body.TRAP if self.trap else Body.EMPTY
        return severity(body, runs_here=bool(self.devices), code_elsewhere=self.has_code, own=own)


def stubs_of(listing: Listing, devices: Sequence[Capability]) -> tuple[Stub, ...]:
    """Every kernel that is a trap stub or empty in some SASS target, trap stubs first."""
    traps: dict[str, list[Target]] = {}
    empty: dict[str, list[Target]] = {}
    coded: set[str] = set()
    for e in listing.distinct(Kind.SASS):
        for kernel in e.traps:
            _add(traps.setdefault(kernel, []), e.target)
        for kernel in e.empty:
            _add(empty.setdefault(kernel, []), e.target)
        if readable(e.target.number):
            coded.update(set(e.kernels).difference(e.traps, e.empty))
    if not traps and not empty:
        return ()
    routes = {cap: {k.kernel: k.route for k in listing.predict(cap).kernels} for cap in devices}
    out = []
    for trap, found in ((True, traps), (False, empty)):
        for kernel, targets in found.items():
            runs = tuple(
                cap
                for cap in devices
                if (route := routes[cap].get(kernel)) is not None
                and route.path.is_native
                and route.target in targets
            )
            out.append(Stub(kernel, trap, tuple(targets), runs, kernel in coded))
    return tuple(out)


def _add(targets: list[Target], target: Target) -> None:
    """``target`` added to a stub's targets unless already there (two cubins of one target)."""
    if target not in targets:
        targets.append(target)


def unread_targets(listing: Listing) -> tuple[str, ...]:
    """SASS targets with kernels whose bodies are not read (before sm_70)."""
    return tuple(sorted({str(e.target) for e in listing.distinct(Kind.SASS)
                         if e.kernels and not readable(e.target.number)}))  # fmt: skip
