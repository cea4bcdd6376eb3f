"""A listing's entries as the reader keeps them: columns, each entry made when asked for.

libcufft.so.11 holds 24,454 entries; one object each (and a tuple per header while its
names were decoded) was most of what a names read of it held. The packed form must be
indistinguishable from the tuple of the same entries for everything that reads a
listing: equality, order, indexing, pickling (the read pool), the per-target totals the
inspect table sums, and every prediction.
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.reader import fatbin
from gate.reader.headers import Headers
from gate.reader.listing import (
    DeviceEntry,
    EntryPacker,
    Kind,
    Listing,
    PackedEntries,
    Totals,
    totals,
)
from gate.reader.read import ArtifactReport, read_buffer
from gate.reader.stubs import stubs_of
from gate.render.inspect import artifact_json
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
TARGETS = [Target.parse(t) for t in ("sm_80", "sm_90", "sm_90a", "sm_120", "sm_121a")]
PTX = [Target.parse(t) for t in ("compute_80", "compute_90", "compute_120")]
CAPS = [Capability(12, 1), Capability(9, 0), Capability(8, 6)]
NAMES = [f"_Z1k{i}v" for i in range(5)]
SIZES = st.integers(0, 2**64 - 1)


Code = tuple[tuple[str, ...], str | None, tuple[str, ...], tuple[str, ...], str]
Case = tuple[list[DeviceEntry], PackedEntries]


@st.composite
def decoded(draw: st.DrawFn) -> Code:
    kernels = tuple(draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True)))
    return (
        kernels,
        draw(st.sampled_from([None, "CUDA 12.8", "CUDA 13.0"])),
        tuple(k for k in kernels if draw(st.booleans())),
        (),
        draw(st.sampled_from(["", "ab" * 32])),
    )


@st.composite
def packed(draw: st.DrawFn) -> Case:
    """Entries, and the same packed the way the reader packs them: a decoded part added
    once and named by each copy, shared header objects."""
    packer = EntryPacker()
    entries: list[DeviceEntry] = []
    codes: list[tuple[int, Code]] = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(list(Kind)))
        target = draw(st.sampled_from(PTX if kind is Kind.PTX else TARGETS))
        isa = draw(st.sampled_from([Version(8, 0), Version(9, 0)])) if kind is Kind.PTX else None
        section = draw(st.sampled_from([".nv_fatbin", ".ldata"]))
        compression = draw(st.sampled_from(["none", "lz4", "zstd"]))
        stored, size = draw(SIZES), draw(SIZES)
        debug = draw(st.booleans())
        name = draw(st.sampled_from([None, "ident.cu"]))
        part: Code = ((), None, (), (), "")
        code = EntryPacker.NO_CODE
        copy = bool(codes) and draw(st.booleans())
        if kind is Kind.LTOIR:
            pass
        elif copy:
            code, part = draw(st.sampled_from(codes))  # a copy of an earlier entry
        else:
            part = draw(decoded())
            code = packer.code(*part)
            codes.append((code, part))
        kernels, producer, traps, empty, sha256 = part
        shape = packer.shape(kind, target, isa, section, compression, debug)
        packer.add(shape, stored, size, name, code)
        entries.append(DeviceEntry(kind, target, kernels, isa, section, compression, stored,
                                   size, producer, debug, name, traps, empty, sha256))  # fmt: skip
    result = packer.entries()
    assert isinstance(result, PackedEntries)
    return entries, result


@settings(max_examples=150, deadline=None)
@given(packed())
def test_packed_entries_are_the_tuple_of_the_same_entries(case: Case) -> None:
    entries, found = case
    assert tuple(found) == tuple(entries)
    assert found == tuple(entries)
    assert tuple(entries) == found  # the tuple's side defers to ours
    assert found != tuple(entries[:-1])
    assert found != "not entries"
    assert len(found) == len(entries)
    assert hash(found) == hash(tuple(entries))
    for i in range(-len(entries), len(entries)):
        assert found[i] == entries[i]
    assert found[1:] == tuple(entries[1:])
    assert found[::-1] == tuple(reversed(entries))
    with pytest.raises(IndexError):
        found[len(entries)]
    with pytest.raises(IndexError):
        found[-len(entries) - 1]
    # The read pool pickles them (our own bytes, made just above).
    assert pickle.loads(pickle.dumps(found)) == tuple(entries)  # noqa: S301
    assert list(found.kinds()) == [e.kind for e in entries]


@settings(max_examples=150, deadline=None)
@given(packed())
def test_a_packed_listing_answers_as_the_tuple_listing_does(case: Case) -> None:
    entries, found = case
    ours, theirs = Listing(found), Listing(tuple(entries))
    assert ours == theirs
    assert _totals(totals(found)) == _totals(totals(tuple(entries)))
    for kind in Kind:
        assert (
            ours.of_kind(kind)
            == theirs.of_kind(kind)
            == tuple(e for e in entries if e.kind is kind)
        )
        assert tuple(ours.each(kind)) == theirs.of_kind(kind)
        assert ours.targets(kind) == theirs.targets(kind)
        # Copies left out, nothing else: what each distinct entry decodes to, per target.
        assert (
            _decoded(ours.distinct(kind))
            == _decoded(theirs.distinct(kind))
            == _decoded(e for e in entries if e.kind is kind)
        )
        assert len(tuple(ours.distinct(kind))) <= len(ours.of_kind(kind))
    assert ours.kernels() == theirs.kernels()
    assert ours.missing_kernels() == theirs.missing_kernels()
    for cap in CAPS:
        assert ours.predict(cap) == theirs.predict(cap)
        assert ours.routes(cap) == theirs.routes(cap)
    report = ArtifactReport("x.so", "ELF", 64, "x86-64", ours, names=True)
    other = ArtifactReport("x.so", "ELF", 64, "x86-64", theirs, names=True)
    assert artifact_json(report, CAPS) == artifact_json(other, CAPS)


def _decoded(entries: Iterable[DeviceEntry]) -> set[tuple[object, ...]]:
    return {(e.target, e.kernels, e.traps, e.empty) for e in entries}


def test_distinct_entries_leave_out_the_copies_of_one_payload_only() -> None:
    sm90, sm80 = Target.parse("sm_90"), Target.parse("sm_80")
    packer = EntryPacker()
    shape90 = packer.shape(Kind.SASS, sm90, None, ".nv_fatbin", "zstd", False)
    shape80 = packer.shape(Kind.SASS, sm80, None, ".nv_fatbin", "zstd", False)
    first = packer.code(("k",), None, (), ("k",), "")
    other = packer.code(("k",), None, (), ("k",), "")  # the same names, another payload
    packer.add(shape90, 1, 2, None, first)
    packer.add(shape90, 3, 4, None, first)  # a copy
    packer.add(shape80, 5, 6, None, first)  # the same code on another target
    packer.add(shape90, 7, 8, None, other)
    listing = Listing(packer.entries())
    assert [(e.target, e.size) for e in listing.distinct(Kind.SASS)] == [
        (sm90, 2), (sm80, 6), (sm90, 8)
    ]  # fmt: skip
    assert list(listing.distinct(Kind.PTX)) == []
    # A kernel empty in two cubins of one target is empty on that target once.
    (stub,) = stubs_of(listing, ())
    assert (stub.kernel, stub.trap, stub.has_code) == ("k", False, False)
    assert stub.targets == (sm90, sm80)
    as_tuple = Listing(tuple(listing.entries))
    assert [(e.target, e.size) for e in as_tuple.distinct(Kind.SASS)] == [(sm90, 2), (sm80, 6)]
    assert stubs_of(as_tuple, ()) == (stub,)


def _totals(found: list[Totals]) -> list[tuple[object, ...]]:
    return [
        (t.kind, t.target, t.ptx_isa, t.section, t.compression, t.entries, t.stored_size,
         t.size, frozenset(t.kernels))
        for t in found
    ]  # fmt: skip


def test_totals_sum_entries_that_agree_on_their_header_in_first_seen_order() -> None:
    sm90, sm80 = Target.parse("sm_90"), Target.parse("sm_80")
    entries = (
        DeviceEntry(Kind.SASS, sm90, ("a",), None, ".nv_fatbin", "lz4", 10, 20),
        DeviceEntry(Kind.SASS, sm80, ("b",), None, ".nv_fatbin", "lz4", 1, 2),
        # An equal target that is another object, and another debug flag: the same row.
        DeviceEntry(
            Kind.SASS, Target.parse("sm_90"), ("c",), None, ".nv_fatbin", "lz4", 5, 6, debug=True
        ),
        DeviceEntry(Kind.SASS, sm90, ("a",), None, ".ldata", "lz4", 7, 8),
    )
    packer = EntryPacker()
    for e in entries:
        code = packer.code(e.kernels, e.producer, e.traps, e.empty, e.sha256)
        shape = packer.shape(e.kind, e.target, e.ptx_isa, e.section, e.compression, e.debug)
        packer.add(shape, e.stored_size, e.size, e.name, code)
    expected = [
        (Kind.SASS, sm90, None, ".nv_fatbin", "lz4", 2, 15, 26, frozenset({"a", "c"})),
        (Kind.SASS, sm80, None, ".nv_fatbin", "lz4", 1, 1, 2, frozenset({"b"})),
        (Kind.SASS, sm90, None, ".ldata", "lz4", 1, 7, 8, frozenset({"a"})),
    ]
    assert _totals(totals(entries)) == expected
    assert _totals(totals(packer.entries())) == expected


def test_an_empty_packer_gives_the_empty_tuple() -> None:
    assert EntryPacker().entries() == ()


def test_a_packer_names_only_what_it_holds_and_packs_one_listing() -> None:
    packer = EntryPacker()
    with pytest.raises(ValueError, match="no such shape or code"):
        packer.add(0, 1, 1, None)  # no shape yet
    shape = packer.shape(Kind.SASS, TARGETS[0], None, ".nv_fatbin", "none", False)
    same = packer.shape(Kind.SASS, Target.parse("sm_80"), None, ".nv_fatbin", "none", False)
    assert same == shape  # equal parts share one index
    with pytest.raises(ValueError, match="no such shape or code"):
        packer.add(shape, 1, 1, None, 1)  # no code 1 yet
    with pytest.raises(ValueError, match="no such shape or code"):
        packer.add(shape + 1, 1, 1, None)
    packer.add(shape, 1, 2, None)
    handed = packer.entries()
    assert handed == (DeviceEntry(Kind.SASS, TARGETS[0], (), None, ".nv_fatbin", "none", 1, 2),)
    # What was handed over is never changed by the packer again.
    for more in (
        lambda: packer.add(shape, 3, 4, None),
        lambda: packer.shape(Kind.PTX, PTX[0], None, ".nv_fatbin", "none", False),
        lambda: packer.code((), None, (), (), ""),
    ):
        with pytest.raises(ValueError, match="already handed over"):
            more()
    assert len(handed) == 1
    as_list: object = list(handed)
    assert handed != as_list  # a tuple's equality: a list of the same is not equal


def test_a_names_read_drops_the_pages_of_every_payload_it_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last run of decoded pages is dropped too (a small file's read decodes one run):
    the decoding generator is run to its end, not left suspended after its last entry."""
    import mmap

    from gate.reader import decoding

    released: list[tuple[int, int]] = []
    monkeypatch.setattr(decoding, "releaser", lambda _buf: lambda lo, hi: released.append((lo, hi)))
    path = GOLDEN / "debug.fatbin"  # two entries, no copies: only decoding drops pages
    one = path.read_bytes()
    headers = [e for c in fatbin.parse_containers(one, 0, len(one), "x") for e in c.entries]
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        report = read_buffer(buf, 0, len(buf), "debug.fatbin")
    assert len(report.listing.entries) == len(headers) == 2
    for e in headers:
        lo, hi = e.payload_offset, e.payload_offset + e.payload_size
        assert any(a <= lo and hi <= b for a, b in released), (e, released)


def test_headers_are_kept_packed_and_given_back_whole() -> None:
    entries = [
        fatbin.Entry(fatbin.KIND_ELF, 0x50, 64, 1000, 0, 0, 0, 90, 0x2001, 4000, "", 0),
        fatbin.Entry(
            fatbin.KIND_PTX, 2**63, 72, 2**40, 77, 8, 9, 121, 2**64 - 1, 2**64 - 2, "kernels.cu", 64
        ),
        fatbin.Entry(fatbin.KIND_NVVM, 7, 64, 0, 0, 0, 0, 52, 0, 0, "", 0),
    ]
    headers = Headers()
    headers.extend(entries[:2])
    headers.extend(entries[2:])
    assert len(headers) == 3
    assert list(headers) == entries
    assert [headers[i] for i in range(3)] == entries
    with pytest.raises(IndexError):
        headers[3]
    with pytest.raises(IndexError):
        headers[-1]


def test_a_read_listing_holds_no_entry_objects() -> None:
    """What makes libcufft.so.11's names read fit in 1/10 of cuobjdump's memory: the
    reader's listing keeps columns, and every DeviceEntry it hands out is made then."""
    one = (GOLDEN / "debug.fatbin").read_bytes()
    gc.collect()
    before = _alive(DeviceEntry)
    report = read_buffer(one * 40, 0, 40 * len(one), "x40.fatbin")
    gc.collect()
    assert len(report.listing.entries) == 80
    assert isinstance(report.listing.entries, PackedEntries)
    assert _alive(DeviceEntry) == before
    assert all(e.kernels for e in report.listing.entries)


def _alive(cls: type) -> int:
    return sum(1 for o in gc.get_objects() if type(o) is cls)
