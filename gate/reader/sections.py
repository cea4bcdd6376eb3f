"""Where a host ELF file keeps its fatbin containers: the sections parsed and scanned.

``.nv_fatbin`` if present, else ``__nv_relfatbin`` (as cuobjdump does: ``__nv_relfatbin``
in an executable is input for a later device link, not loaded at run time) is parsed
whole; the other sections the runtime could load a container from (allocated, non-code,
non-TLS PROGBITS, less toolchain-owned tables and ranges already read) are scanned for
containers, such as the 24,453 that libcufft keeps in ``.ldata``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from gate.reader import fatbin
from gate.reader.elffile import SHF_EXECINSTR, Buffer, ElfFile, Section
from gate.reader.pages import releaser

PRIMARY_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_SHT_PROGBITS = 1
_SHF_ALLOC = 0x2
_SHF_TLS = 0x400
# PROGBITS sections whose layout is the toolchain's (unwind data, exception tables,
# pointer tables, 24-byte fatbin wrappers, module id strings): never a container.
_STRUCTURED = frozenset(
    (
        ".eh_frame", ".eh_frame_hdr", ".gcc_except_table", ".got", ".got.plt",
        ".ctors", ".dtors", ".jcr", ".nvFatBinSegment", "__nv_module_id", ".interp",
    )
)  # fmt: skip


# Where containers start in each range to scan, searched elsewhere and started at once
# (gate.reader.found.Found.search); None: none is, each range is scanned when its turn comes.
Search = Callable[[Sequence[tuple[int, int]]], list[Iterator[int]] | None]


def host_containers(
    buf: Buffer, elf: ElfFile, display: str, *, scan: bool, search: Search | None = None
) -> Iterator[tuple[str, Iterator[fatbin.Container]]]:
    """The containers of each section of ``elf``, as (section name, its containers), in
    the order the listing keeps them: the primary section's, then (with ``scan``) those
    found in each other section that may hold one, less the ranges already read. The
    ranges to scan are handed to ``search`` before the primary section is read, where it
    is given. Each section's pages are dropped as its containers are read
    (:mod:`gate.reader.pages`)."""
    sections = elf.sections
    primary = next((s for name in PRIMARY_SECTIONS for s in sections if s.name == name), None)
    parsed = [elf.span(primary)] if primary is not None else []
    pieces = []
    for section in sections if scan else ():
        if not _may_hold_containers(section):
            continue
        start, end = elf.span(section)
        pieces += [(section.name, lo, hi) for lo, hi in _outside(start, end, parsed)]
        parsed.append((start, end))
    starts = search([(lo, hi) for _, lo, hi in pieces]) if search and pieces else None
    if primary is not None:
        start, end = elf.span(primary)
        yield primary.name, fatbin.parse_containers(buf, start, end, display, done=releaser(buf))
    for k, (name, lo, hi) in enumerate(pieces):
        if starts is None:
            yield name, fatbin.scan_containers(buf, lo, hi, display, done=releaser(buf))
        else:
            yield name, fatbin.containers_at(buf, starts[k], hi, display, done=releaser(buf))


def _may_hold_containers(section: Section) -> bool:
    """Whether a container the runtime could load may sit in ``section``.

    Only bytes loaded at run time (SHF_ALLOC, PROGBITS), not code, not TLS templates,
    not the primary section (parsed, not scanned), and not the sections whose format
    the toolchain owns (unwind tables, GOT, the fatbin wrappers and module ids).
    """
    return (
        section.type == _SHT_PROGBITS
        and bool(section.flags & _SHF_ALLOC)
        and not section.flags & (SHF_EXECINSTR | _SHF_TLS)
        and section.name not in PRIMARY_SECTIONS
        and section.name not in _STRUCTURED
        and section.size >= 80
    )


def _outside(start: int, end: int, parsed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``[start, end)`` less the ranges already parsed or scanned (sections can overlap)."""
    pieces = [(start, end)]
    for lo, hi in parsed:
        pieces = [
            part
            for a, b in pieces
            for part in ((a, min(b, lo)), (max(a, hi), b))
            if part[1] - part[0] > 0
        ]
    return pieces
