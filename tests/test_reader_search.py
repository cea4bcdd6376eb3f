"""The other sections of a host ELF searched for containers in pieces, on the decoding
pool, while the primary section is read: what a scan of each whole range finds, however
it is cut, whoever searches each piece, and whatever happens to a worker."""

from __future__ import annotations

import itertools
import os
import struct
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.reader import decoding, fatbin
from gate.reader.decoding import Threads
from gate.reader.read import read_buffer
from gate.scan import forked
from tests.elfbuild import elf_with_section

pytestmark = [
    pytest.mark.unit,
    # The suite's own "still-running" thread is alive while these fork (as in
    # test_reader_forked.py): harmless, it takes no lock a worker needs.
    pytest.mark.filterwarnings("ignore:This process:DeprecationWarning"),
]

GOLDEN = Path(__file__).parent / "golden"
REAL = (GOLDEN / "debug.fatbin").read_bytes()  # one container, two zstd entries


def _around(inner: bytes) -> bytes:
    """A container whose one entry (LTO IR: never decoded) is ``inner``: a scan keeps it and
    skips what it holds."""
    entry = struct.pack(
        "<HHIQIIHHIIIQQQ", fatbin.KIND_NVVM, 0, 64, len(inner), 0, 0, 0, 0, 90, 0, 0, 0x1, 0, 0
    )
    return struct.pack("<IHHQ", fatbin.CONTAINER_MAGIC, 1, 16, 64 + len(inner)) + entry + inner


PARTS = st.sampled_from(
    [
        REAL,
        _around(REAL),  # a container inside another
        _around(b"junk" + REAL[:40]),  # a lookalike inside a container
        fatbin.CONTAINER_PREFIX + struct.pack("<Q", 1 << 40),  # a magic claiming too much
        fatbin.CONTAINER_PREFIX[:5],  # a magic cut short
        REAL[:-8],  # a container cut short: its magic is a candidate that fails
        b"\0" * 8,
        b"\x50\xed",
        b"x" * 13,
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(PARTS, max_size=12), st.integers(1, 400), st.integers(16, 300), st.data())
def test_pieces_searched_apart_find_what_one_scan_finds(
    parts: list[bytes], piece: int, chunk: int, data: st.DataObject
) -> None:
    blob = b"".join(parts)
    lo = data.draw(st.integers(0, len(blob)))
    end = data.draw(st.integers(lo, len(blob)))
    scanned = list(fatbin.scan_containers(blob, lo, end, "blob", chunk=chunk))
    starts = itertools.chain.from_iterable(
        fatbin.container_starts(blob, at, min(at + piece, end), end, "blob")
        for at in range(lo, end, piece)
    )
    assert list(fatbin.containers_at(blob, starts, end, "blob")) == scanned


def test_a_container_is_found_whichever_piece_its_magic_straddles() -> None:
    blob = b"x" * 5 + REAL
    for piece in range(1, 12):
        starts = [
            s for at in range(0, len(blob), piece)
            for s in fatbin.container_starts(blob, at, min(at + piece, len(blob)), len(blob), "b")
        ]  # fmt: skip
        assert starts == [5], piece


@pytest.fixture
def ldata(monkeypatch: pytest.MonkeyPatch) -> bytes:
    """A libcufft-like ELF (containers in .ldata) whose scan is spread in small pieces."""
    monkeypatch.setattr(decoding, "SEARCH_MIN", 1)
    monkeypatch.setattr(decoding, "_SEARCH_PIECE", 100)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    blob = b"junk" * 7 + REAL + _around(REAL) + b"\0" * 5 + REAL
    return elf_with_section(b".ldata", 0x2 | 0x1 | 0x10000000, blob)


def _pools(kind: str) -> tuple[list[Executor], Threads]:
    pools: list[Executor] = []

    def start(workers: int) -> Executor:
        pool: Executor = (
            forked.ForkedDecoders(workers) if kind == "processes" else ThreadPoolExecutor(workers)
        )
        pools.append(pool)
        return pool

    return pools, start


@pytest.mark.parametrize("kind", ["processes", "threads"])
@pytest.mark.parametrize("names", [True, False])
def test_a_scan_spread_over_the_pool_lists_what_a_serial_one_lists(
    ldata: bytes, kind: str, names: bool
) -> None:
    serial = read_buffer(ldata, 0, len(ldata), "x.so", names=names)
    assert len(serial.listing.entries) == 5  # three containers kept, the one inside not
    pools, start = _pools(kind)
    spread = read_buffer(ldata, 0, len(ldata), "x.so", names=names, threads=start)
    assert pools  # the pool searched
    assert spread.listing == serial.listing


def test_a_piece_whose_worker_died_is_searched_by_the_reader(
    ldata: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = os.getpid()
    real = decoding.Decoding._search

    def dies(self: decoding.Decoding, piece: tuple[int, int, int]) -> object:
        if os.getpid() != parent:
            os._exit(9)
        return real(self, piece)

    monkeypatch.setattr(decoding.Decoding, "_search", dies)
    pools, start = _pools("processes")
    spread = read_buffer(ldata, 0, len(ldata), "x.so", threads=start)
    assert pools
    assert spread.listing == read_buffer(ldata, 0, len(ldata), "x.so").listing
