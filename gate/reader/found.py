"""One artifact's containers gathered, section by section, into its Listing.

Headers only, each entry is added as its container is read. With names, the headers
are kept packed (:class:`~gate.reader.headers.Headers`) until the artifact is read,
then decoded (:mod:`gate.reader.decoding`), copies once; what an entry's header decides
(kind, target, PTX ISA, compression) is worked out once per header signature.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable, Iterator, Sequence
from functools import cache

from gate.errors import BadInputError
from gate.reader import cubin, fatbin
from gate.reader.decoding import Copies, Decoded, Decoding, Threads, with_copies
from gate.reader.elffile import Buffer
from gate.reader.entries import EntryPacker, Kind
from gate.reader.headers import Headers
from gate.reader.limits import Budget
from gate.reader.listing import Listing
from gate.rules.targets import Target, Variant, Version

_KINDS = {
    fatbin.KIND_PTX: Kind.PTX,
    fatbin.KIND_ELF: Kind.SASS,
    fatbin.KIND_NVVM: Kind.LTOIR,
    fatbin.KIND_TILEIR: Kind.TILEIR,
}


class Found:
    """The entries of one artifact's containers, gathered section by section into its
    Listing (kept as columns: :class:`~gate.reader.entries.EntryPacker`). Headers only:
    each entry is added as its container is read, and the header is let go
    (libcufft.so.11 holds 24,453 containers in .ldata). With names, the headers are kept,
    packed, until all are decoded (copies are found across the whole artifact), and each
    entry that is no copy is handed to be decoded as soon as it is read: a large artifact's
    entries are decoded on threads while the reader reads on. :meth:`close` (or
    :meth:`listing`) must end a names read: it stops those threads."""

    def __init__(
        self,
        buf: Buffer,
        display: str,
        names: bool,
        budget: Budget,
        digests: bool,
        *,
        threads: Threads | None,
    ) -> None:
        self.buf, self.display, self.names = buf, display, names
        self.budget, self.digests, self.threads = budget, digests, threads
        # With names: the headers waiting to be decoded, and their sections as runs of
        # (section, count) (a pair per header was 1.5 MB of cuFFT's 24,454); the first of
        # each one's copies; and the entries that are no copy, being decoded.
        self.pending = Headers()
        self.sections: list[tuple[str, int]] = []
        self.first = array("q")
        self.copies = Copies(buf, self.pending)
        self.decoding = Decoding(
            buf, display=display, budget=budget, digests=digests, threads=threads
        )
        self.entries = EntryPacker()
        # Entries sharing a header signature share kind, target, ISA and compression:
        # those are worked out, and given their packer index, once per signature and
        # section, not once per entry (libcublasLt: 5,666 entries, ~60 signatures; enum
        # and Target hashing made the per-entry cost add up). Value: (index, stored raw).
        self.memo: dict[tuple[str, int, int, int, int, int, int], tuple[int, bool]] = {}

    def add(self, section: str, containers: Iterable[fatbin.Container]) -> None:
        if self.names:
            before = len(self.pending)
            pending, first, copies, decoding = self.pending, self.first, self.copies, self.decoding
            for c in containers:
                start = len(pending)
                pending.extend(c.entries)
                # Decoding starts while the next containers are read (and scanned for).
                for i, e in enumerate(c.entries, start):
                    f = copies.first_of(i, e)
                    first.append(f)
                    if f == i:
                        decoding.put(e)
            if len(self.pending) > before:
                self.sections.append((section, len(self.pending) - before))
            return
        add = self._add
        for c in containers:
            for e in c.entries:
                add(section, e, None)

    def search(self, ranges: Sequence[tuple[int, int]]) -> list[Iterator[int]] | None:
        """Where containers start in each range to scan, searched on the decoding pool
        (:meth:`gate.reader.decoding.Decoding.search`); None: the caller scans them."""
        return self.decoding.search(ranges)

    def listing(self) -> Listing:
        headers, self.pending = self.pending, Headers()
        if headers:
            results = self.decoding.results()
            each = with_copies(headers, self.first, lambda _e: next(results))
            add = self._add
            try:
                for section, count in self.sections:
                    for e, d in itertools.islice(each, count):
                        add(section, e, d)
                if next(each, None) is not None or next(results, None) is not None:
                    raise RuntimeError(f"{self.display}: more entries decoded than were read")
            finally:
                self.decoding.close()
        return Listing(self.entries.entries())

    def close(self) -> None:
        """Stop decoding (a read that failed before :meth:`listing`): no thread is left
        reading the buffer once this returns."""
        self.decoding.close()

    def _add(self, section: str, e: fatbin.Entry, d: Decoded | None) -> None:
        decoded = d.variant if d else self._header_variant(e)
        key = (section, e.kind, e.flags, e.arch, e.major, e.minor, _VARIANT_KEYS[decoded])
        known = self.memo.get(key)
        if known is None:
            kind, target, isa, compression, raw, debug = _shared(e, decoded)
            number = e.kind if kind is Kind.UNKNOWN else 0
            shape = self.entries.shape(kind, target, isa, section, compression, debug, number)
            known = self.memo[key] = (shape, raw)
        shape, raw = known
        code = EntryPacker.NO_CODE
        if d is not None:
            if d.code is None:  # decoded once, whoever copies it: kept once
                d.code = self.entries.code(d.kernels, d.producer, d.traps, d.empty, d.sha256)
            code = d.code
        if raw:
            self.entries.add(shape, e.payload_size, e.payload_size, e.ident or None, code)
        else:
            self.entries.add(shape, e.compressed_size, e.uncompressed_size, e.ident or None, code)

    def _header_variant(self, e: fatbin.Entry) -> Variant:
        """Without names, a cubin entry's 'a' where its flags say neither 'a' nor 'f', as
        cuobjdump names it: nvFatbin (cuTile's fatbins) writes no flag for an sm_90a cubin.
        Read from what costs least: the header's copy of ``.nv.compat`` (sm_100+), else a
        cubin stored raw (its ELF header and ``.nv.compat``); a compressed one without the
        copy is left to a names read (decompressing is what headers-only avoids). nvcc
        flags its 'a' and 'f' builds: a large library's entries are mostly flagged or
        carry the copy (libcublasLt 13: 1,271 compressed, 1,584 with the copy, none raw
        without it). A part that does not read as a cubin says nothing here; a names read
        reports it."""
        if e.kind != fatbin.KIND_ELF or e.flags & _VARIANT_FLAGS:
            return Variant.NONE
        try:
            if e.options_offset:
                _, compat = fatbin.options(self.buf, e, self.display)
                specific = cubin.compat_arch_specific(compat, default=False)
            elif e.compressed_size == 0:
                at, size = e.payload_offset, e.payload_size
                specific = cubin.arch_specific(self.buf, at, size, self.display)
            else:
                return Variant.NONE
        except BadInputError:
            return Variant.NONE
        return Variant.ARCH if specific else Variant.NONE


_VARIANT_FLAGS = fatbin.FLAG_ARCH_SPECIFIC | fatbin.FLAG_FAMILY_SPECIFIC
_Shared = tuple[Kind, Target, Version | None, str, bool, bool]
_VARIANT_KEYS = {Variant.NONE: 0, Variant.ARCH: 1, Variant.FAMILY: 2}


def _shared(e: fatbin.Entry, decoded_variant: Variant) -> _Shared:
    """Kind, target, PTX ISA (Tile IR: bytecode version), compression, stored raw?, debug:
    what the header decides. A Tile IR entry's target is the header's arch field as a
    virtual target (nvFatbin 13.4 writes 80); its version is in the major field, 0x0D04
    for 13.4. An unknown kind's target is its arch field as it stands."""
    kind = _KINDS.get(e.kind, Kind.UNKNOWN)
    if e.flags & fatbin.FLAG_FAMILY_SPECIFIC:
        variant = Variant.FAMILY
    elif e.flags & fatbin.FLAG_ARCH_SPECIFIC:
        variant = Variant.ARCH
    else:
        variant = decoded_variant
    compression = e.compression
    if kind is Kind.PTX:
        isa: Version | None = _version(e.major, e.minor)
    elif kind is Kind.TILEIR:
        isa = _version(e.major >> 8, e.major & 0xFF)
    else:
        isa = None
    return (
        kind,
        _target(e.arch, variant, kind in (Kind.PTX, Kind.TILEIR)),
        isa,
        compression,
        compression == "none",
        bool(e.flags & fatbin.FLAG_DEBUG),
    )


@cache
def _target(arch: int, variant: Variant, virtual: bool) -> Target:
    return Target.from_number(arch, variant, virtual=virtual)


@cache
def _version(major: int, minor: int) -> Version:
    return Version(major, minor)
