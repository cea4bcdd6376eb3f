"""What the inspect stage learned about one final artifact, as the later stages read it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate.reader.hostelf import Dependency, HostFormat
from gate.reader.listing import Listing
from gate.record import Artifact, CrossCheck
from gate.tools import cuobjdump

INSPECTOR = "cuda-gate reader"


@dataclass(frozen=True)
class Inspected:
    """Everything the gate learned about one final artifact."""

    name: str
    path: Path
    sha256: str
    size: int
    host: HostFormat
    dependencies: tuple[Dependency, ...]
    listing: Listing
    kernels: tuple[str, ...]  # the kernels it must carry
    smoke: bool
    prefix: str  # its evidence files' folder ("" for the smoke program)
    ptx_modules: tuple[cuobjdump.PtxText, ...] = ()
    cross_check: CrossCheck | None = None
    cross_check_note: str = ""
    in_wheel: bool = False  # a shared library unpacked from a configured wheel
    shown: str | None = None  # its name in the evidence when not its path here (IMAGE!/path)

    def record(self) -> Artifact:
        """The artifact as the run record keeps it."""
        return Artifact(
            name=self.name,
            path=self.shown or str(self.path),
            sha256=self.sha256,
            size=self.size,
            host_format=self.host.description,
            elf_machine=self.host.machine_text,
            dependencies=self.dependencies,
            listing=self.listing,
            inspector=INSPECTOR,
            cross_check=self.cross_check,
        )
