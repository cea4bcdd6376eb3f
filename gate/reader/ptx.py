"""The PTX texts an artifact embeds, decompressed, for handing to the driver's JIT.

Only the containers the CUDA runtime registers are read: ``.nv_fatbin`` (else
``__nv_relfatbin``), or a raw ``.fatbin`` file. Each text is bounded by the fatbin
reader's own limits (gate.reader.payloads.payload).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

from gate.errors import BadInputError
from gate.reader import fatbin, payloads
from gate.reader.cubin import read_ptx
from gate.reader.elffile import ElfFile
from gate.rules.targets import Target, Variant, Version

_PRIMARY = (".nv_fatbin", "__nv_relfatbin")


@dataclass(frozen=True)
class PtxModule:
    """One embedded PTX text: its target, ISA version, ``.entry`` names and bytes."""

    target: Target
    isa: Version | None
    kernels: tuple[str, ...]
    text: bytes


def ptx_modules(path: Path) -> tuple[PtxModule, ...]:
    """Every PTX entry of the ELF file or raw fatbin at ``path``; BadInputError if unreadable."""
    try:
        with (
            path.open("rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf,
        ):
            return _modules(buf, str(path))
    except (OSError, ValueError) as e:
        raise BadInputError(f"{path}: cannot read: {e}") from e


def _modules(buf: mmap.mmap, name: str) -> tuple[PtxModule, ...]:
    if buf[:8].startswith(fatbin.CONTAINER_PREFIX):
        spans = [(0, len(buf))]
    else:
        elf = ElfFile(buf, name)
        primary = next((s for n in _PRIMARY for s in elf.sections if s.name == n), None)
        spans = [elf.span(primary)] if primary is not None else []
    out = []
    for start, end in spans:
        for container in fatbin.parse_containers(buf, start, end, name):
            for entry in container.entries:
                if entry.kind != fatbin.KIND_PTX:
                    continue
                data, lo, size = payloads.payload(buf, entry, name)
                text = bytes(data[lo : lo + size]).rstrip(b"\0")
                info = read_ptx(text, 0, len(text))
                variant = (
                    Variant.ARCH
                    if entry.flags & fatbin.FLAG_ARCH_SPECIFIC
                    else Variant.FAMILY
                    if entry.flags & fatbin.FLAG_FAMILY_SPECIFIC
                    else Variant.NONE
                )
                out.append(
                    PtxModule(
                        Target.from_number(entry.arch, variant, virtual=True),
                        Version(*info.isa) if info.isa else None,
                        info.kernels,
                        text,
                    )
                )
    return tuple(out)
