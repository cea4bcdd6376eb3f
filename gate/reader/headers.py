"""Fatbin entry headers kept packed until they are decoded, and the fields copies share.

A names read keeps every entry header of an artifact until all are decoded (copies are
found across the whole artifact): as :class:`Headers`, their integers in one array.
"""

from __future__ import annotations

import operator
import struct
from array import array
from collections.abc import Iterable, Iterator

from gate.reader import fatbin


class Headers:
    """Entry headers kept packed until they are decoded: their integers in one array,
    the few non-empty idents aside. As tuples (with their integers) libcufft.so.11's
    24,454 headers held 6 MB of its names read; packed, 2.2 MB in one block, which the
    allocator gives back whole."""

    def __init__(self) -> None:
        self._ints = array("Q")
        self._idents: dict[int, str] = {}
        self._count = 0

    def extend(self, entries: Iterable[fatbin.Entry]) -> None:
        ints, idents = self._ints, self._idents
        for e in entries:
            if e.ident:
                idents[self._count] = e.ident
            ints.extend(_integers(e))
            self._count += 1

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> fatbin.Entry:
        if not 0 <= i < self._count:
            raise IndexError(i)
        return _unpacked(_PACKED.unpack_from(self._ints, i * _PACKED.size), self._idents.get(i, ""))

    def __iter__(self) -> Iterator[fatbin.Entry]:
        get = self._idents.get
        for i, v in enumerate(_PACKED.iter_unpack(self._ints)):
            yield _unpacked(v, get(i, ""))

    def packed(self) -> Iterator[tuple[int, ...]]:
        """Each header's integers (Entry's fields but its ident), with no Entry built."""
        return _PACKED.iter_unpack(self._ints)


# A packed header: Entry's fields but its ident, in order (every one read unsigned).
_IDENT = fatbin.Entry._fields.index("ident")
_PACKED_FIELDS = [name for name in fatbin.Entry._fields if name != "ident"]
_PACKED = struct.Struct(f"={len(_PACKED_FIELDS)}Q")
_integers = operator.itemgetter(
    *(i for i, name in enumerate(fatbin.Entry._fields) if name != "ident")
)


def _unpacked(integers: tuple[int, ...], ident: str) -> fatbin.Entry:
    """The header whose integers (as :data:`_PACKED` holds them) and ident these are."""
    return fatbin.Entry._make((*integers[:_IDENT], ident, *integers[_IDENT:]))


_SIGNATURE = ("kind", "flags", "arch", "major", "minor", "payload_size", "compressed_size",
              "uncompressed_size")  # fmt: skip
# The header fields two copies of an entry share, from an Entry or from its packed form.
signature = operator.itemgetter(*(fatbin.Entry._fields.index(name) for name in _SIGNATURE))
packed_signature = operator.itemgetter(*(_PACKED_FIELDS.index(name) for name in _SIGNATURE))
PACKED_KIND = _PACKED_FIELDS.index("kind")
packed_sizes = operator.itemgetter(
    _PACKED_FIELDS.index("payload_size"), _PACKED_FIELDS.index("uncompressed_size")
)
