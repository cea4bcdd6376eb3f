"""A listing's device-code entries: the record, and the packed columns a reader keeps them in.

:class:`DeviceEntry` is one entry as every reader of a listing sees it (both inspectors,
our fatbin reader and the cuobjdump backend, produce them). Our reader keeps a
listing's entries as columns (:class:`EntryPacker` builds :class:`PackedEntries`), each
DeviceEntry made when it is asked for; :func:`totals` sums entries per target either way.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from gate.rules.targets import Target, Version


class Kind(enum.Enum):
    """The kind of an embedded device-code entry."""

    SASS = "SASS"
    PTX = "PTX"
    LTOIR = "LTO IR"
    # cuTile's portable bytecode, compiled by the driver at load time (not by the PTX JIT).
    TILEIR = "TileIR"
    # A fatbin entry kind this version of cuda-gate does not know: listed, never decoded.
    UNKNOWN = "unknown"

    @property
    def routed(self) -> bool:
        """Whether this kind's kernels are code a device can be handed: SASS, PTX, Tile IR
        (LTO IR must be device-linked first; an unknown kind is not understood)."""
        return self in (Kind.SASS, Kind.PTX, Kind.TILEIR)


@dataclass(frozen=True, slots=True)
class DeviceEntry:
    """One embedded device-code entry (a cubin, a PTX text, an LTO IR blob, Tile IR
    bytecode, or an entry of a kind this reader does not know)."""

    kind: Kind
    target: Target
    kernels: tuple[str, ...] = ()
    # The PTX ISA of a PTX entry; the bytecode version of a Tile IR entry.
    ptx_isa: Version | None = None
    section: str = ".nv_fatbin"
    compression: str = "none"
    stored_size: int = 0
    size: int = 0
    producer: str | None = None
    debug: bool = False
    # Device functions, globals and other non-entry names; informative only.
    name: str | None = None
    # Kernels whose SASS here is a trap stub, or does nothing (gate.rules.stubs).
    traps: tuple[str, ...] = ()
    empty: tuple[str, ...] = ()
    # SHA-256 of the code as the driver is handed it (decompressed cubin, PTX text up to
    # its NUL); "" when not decoded (headers only, LTO IR, the cuobjdump backend).
    sha256: str = ""
    # The fatbin header's kind number of an entry of a kind this reader does not know
    # (Kind.UNKNOWN); 0 for every known kind.
    number: int = 0

    @property
    def is_stub(self) -> bool:
        """A kernel-less cubin, such as the device-link stub nvcc 13 adds per arch."""
        return self.kind is Kind.SASS and not self.kernels


# What entries share, kept once per distinct value in PackedEntries: the header's part
# (kind, target, PTX ISA, section, compression, debug) and the decoded part (kernels,
# producer, traps, empty, SHA-256).
_Shape = tuple[Kind, Target, Version | None, str, str, bool, int]
_Code = tuple[tuple[str, ...], str | None, tuple[str, ...], tuple[str, ...], str]
_NO_CODE: _Code = ((), None, (), (), "")


class PackedEntries(Sequence[DeviceEntry]):
    """A listing's entries kept as columns, each made a DeviceEntry when it is asked for.

    Entries repeat their kind, target, section and compression, and copies share their
    decoded names: each distinct value is kept once, and per entry two indices and two
    sizes (and, rarely, an ident). libcufft.so.11's 24,454 entries as objects held 4.7 MB
    of its names read. Built by :class:`EntryPacker`; equal to a tuple of the same
    entries.
    """

    __slots__ = ("_code", "_codes", "_names", "_shape", "_shapes", "_size", "_stored")

    def __init__(  # noqa: PLR0917  (EntryPacker's columns, handed over whole)
        self,
        shapes: list[_Shape],
        codes: list[_Code],
        shape: array[int],
        code: array[int],
        stored: array[int],
        size: array[int],
        names: dict[int, str],
    ) -> None:
        self._shapes, self._codes, self._names = shapes, codes, names
        self._shape, self._code, self._stored, self._size = shape, code, stored, size

    def __len__(self) -> int:
        return len(self._shape)

    @overload
    def __getitem__(self, i: int) -> DeviceEntry: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[DeviceEntry, ...]: ...
    def __getitem__(self, i: int | slice) -> DeviceEntry | tuple[DeviceEntry, ...]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("entry index out of range")
        return self._entry(i, self._shape[i], self._code[i], self._stored[i], self._size[i])

    def __iter__(self) -> Iterator[DeviceEntry]:
        make = self._entry
        columns = zip(self._shape, self._code, self._stored, self._size, strict=True)
        for i, (shape, code, stored, size) in enumerate(columns):
            yield make(i, shape, code, stored, size)

    def _entry(self, i: int, shape: int, code: int, stored: int, size: int) -> DeviceEntry:
        kind, target, isa, section, compression, debug, number = self._shapes[shape]
        kernels, producer, traps, empty, sha256 = self._codes[code]
        name = self._names.get(i)
        return DeviceEntry(kind, target, kernels, isa, section, compression, stored, size,
                           producer, debug, name, traps, empty, sha256, number)  # fmt: skip

    def distinct(self, kind: Kind) -> Iterator[DeviceEntry]:
        """Entries of ``kind``, the first of each distinct header part and decoded part
        (copies of one payload left out), in order, from the columns."""
        shapes, seen = self._shapes, set()
        for i, pair in enumerate(zip(self._shape, self._code, strict=True)):
            if shapes[pair[0]][0] is kind and pair not in seen:
                seen.add(pair)
                yield self[i]

    def kinds(self) -> Iterator[Kind]:
        """Each entry's kind, in order, with no entry made."""
        shapes = self._shapes
        return (shapes[shape][0] for shape in self._shape)

    def totals(self) -> list[Totals]:
        """The entries summed per distinct header part, from the columns (:func:`totals`
        merges equal ones)."""
        codes = self._codes
        out: dict[int, Totals] = {}
        for shape, code, stored, size in zip(
            self._shape, self._code, self._stored, self._size, strict=True
        ):
            found = out.get(shape)
            if found is None:
                kind, target, isa, section, compression, _, number = self._shapes[shape]
                found = out[shape] = Totals(kind, target, isa, section, compression, 0, 0, 0,
                                            set(), number)  # fmt: skip
            found.entries += 1
            found.stored_size += stored
            found.size += size
            found.kernels.update(codes[code][0])
        return list(out.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple | PackedEntries):  # a tuple's equals, as a tuple's
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"PackedEntries({tuple(self)!r})"

    def __reduce__(self) -> tuple[object, ...]:
        return (PackedEntries, (self._shapes, self._codes, self._shape, self._code,
                                self._stored, self._size, self._names))  # fmt: skip


@dataclass
class Totals:
    """Entries that agree on kind, target, PTX ISA, section and compression, summed."""

    kind: Kind
    target: Target
    ptx_isa: Version | None
    section: str
    compression: str
    entries: int
    stored_size: int
    size: int
    kernels: set[str]
    number: int = 0  # the fatbin kind number (DeviceEntry.number)


def totals(entries: Sequence[DeviceEntry]) -> list[Totals]:
    """The entries summed per kind, target, PTX ISA, section and compression, in the
    order each first appears: counts, sizes and the union of their kernels. A packed
    listing sums its columns, without making an entry."""
    if isinstance(entries, PackedEntries):
        parts = entries.totals()
    else:
        # By the identity of each entry's objects first (the reader and the cache share
        # one Target per signature: an int lookup), then merged by equality.
        by_id: dict[tuple[int, int, int, str, str, int], Totals] = {}
        for e in entries:
            key = (id(e.kind), id(e.target), id(e.ptx_isa), e.section, e.compression, e.number)
            found = by_id.get(key)
            if found is None:
                found = by_id[key] = Totals(e.kind, e.target, e.ptx_isa, e.section,
                                            e.compression, 0, 0, 0, set(), e.number)  # fmt: skip
            found.entries += 1
            found.stored_size += e.stored_size
            found.size += e.size
            found.kernels.update(e.kernels)
        parts = list(by_id.values())
    merged: dict[tuple[Kind, Target, Version | None, str, str, int], Totals] = {}
    for t in parts:
        same = (t.kind, t.target, t.ptx_isa, t.section, t.compression, t.number)
        found = merged.get(same)
        if found is None:
            merged[same] = t
            continue
        found.entries += t.entries
        found.stored_size += t.stored_size
        found.size += t.size
        found.kernels |= t.kernels
    return list(merged.values())


class EntryPacker:
    """Gathers entries, one :meth:`add` each, into :class:`PackedEntries`.

    What entries share is added once and named by its index: a header's part
    (:meth:`shape`: the reader asks once per header signature and section) and what
    decoding found (:meth:`code`: once per decoded payload, named by each copy). Adding
    an entry then builds no key and hashes nothing (libcufft.so.11: 24,454 entries; a
    key per entry for the decoded part alone was 3.5 MB of its read).
    """

    NO_CODE = 0  # no kernels, producer, traps, empty kernels or SHA-256

    def __init__(self) -> None:
        self._shapes: list[_Shape] = []
        self._codes: list[_Code] = [_NO_CODE]
        self._shape_of: dict[_Shape, int] = {}
        self._shape, self._code = array("I"), array("I")
        self._stored, self._size = array("Q"), array("Q")
        self._names: dict[int, str] = {}
        self._handed = False  # entries() gave the columns away: nothing more is added

    def shape(  # noqa: PLR0917  (DeviceEntry's header fields, in its order)
        self,
        kind: Kind,
        target: Target,
        ptx_isa: Version | None,
        section: str,
        compression: str,
        debug: bool,
        number: int = 0,
    ) -> int:
        """The index :meth:`add` names a header's part by (equal parts share one)."""
        self._still_open()
        part = (kind, target, ptx_isa, section, compression, debug, number)
        found = self._shape_of.get(part)
        if found is None:
            found = self._shape_of[part] = len(self._shapes)
            self._shapes.append(part)
        return found

    def code(
        self,
        kernels: tuple[str, ...],
        producer: str | None,
        traps: tuple[str, ...],
        empty: tuple[str, ...],
        sha256: str,
    ) -> int:
        """Keep what one decoding found; the index entries name it by in :meth:`add`."""
        self._still_open()
        self._codes.append((kernels, producer, traps, empty, sha256))
        return len(self._codes) - 1

    def add(
        self, shape: int, stored_size: int, size: int, name: str | None, code: int = NO_CODE
    ) -> None:
        """One entry: its header part's index (:meth:`shape`), sizes, ident, and the index
        of what decoding it found (:meth:`code`)."""
        self._still_open()
        if not (0 <= shape < len(self._shapes) and 0 <= code < len(self._codes)):
            raise ValueError(f"no such shape or code: {shape}, {code}")
        if name is not None:
            self._names[len(self._shape)] = name
        self._shape.append(shape)
        self._code.append(code)
        self._stored.append(stored_size)
        self._size.append(size)

    def _still_open(self) -> None:
        if self._handed:
            raise ValueError("entries were already handed over: a packer packs one listing")

    def entries(self) -> Sequence[DeviceEntry]:
        """What was added, in order (``()`` when nothing was); the packer's last word."""
        self._handed = True
        if not self._shape:
            return ()
        return PackedEntries(self._shapes, self._codes, self._shape, self._code,
                             self._stored, self._size, self._names)  # fmt: skip
