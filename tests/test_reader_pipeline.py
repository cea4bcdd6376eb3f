"""A names read decodes entries while it reads on, and leaves no thread behind when it fails."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gate.errors import BadInputError
from gate.reader import decoding, fatbin
from gate.reader.found import Found
from gate.reader.limits import Budget, Limits
from gate.reader.read import read_artifact, read_buffer

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"


class Recorded(ThreadPoolExecutor):
    """A pool that counts what it was given and whether it was shut down."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers)
        self.submitted = 0
        self.stopped = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.stopped = True
        super().shutdown(wait, cancel_futures=cancel_futures)


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list[Recorded]:
    """Every pool the reader starts; every batch of one entry, each worth a thread."""
    monkeypatch.setattr(decoding, "PARALLEL_MIN", 1)
    monkeypatch.setattr(decoding, "PARALLEL_MEAN_BYTES", 1)
    monkeypatch.setattr(decoding, "_BATCH", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    return []


def _threads(pools: list[Recorded]) -> Callable[[int], Recorded]:
    def start(workers: int) -> Recorded:
        pools.append(Recorded(workers))
        return pools[-1]

    return start


def one_container_per_entry(path: Path = GOLDEN / "libkernels.so") -> bytes:
    """The fatbin entries of ``path``'s first run of containers, each in a container of
    its own (tests/test_reader_forked.py uses it too)."""
    buf = path.read_bytes()
    at = buf.find(fatbin.CONTAINER_PREFIX)
    entries: list[fatbin.Entry] = []
    while at >= 0 and buf.startswith(fatbin.CONTAINER_PREFIX, at):
        container = fatbin.parse_container(buf, at, len(buf), path.name)
        entries += container.entries
        at += container.size
    assert len(entries) >= 2
    out = b""
    for e in entries:
        body = buf[e.offset : e.offset + e.header_size + e.payload_size]
        out += fatbin.CONTAINER_PREFIX + struct.pack("<Q", len(body)) + body
    return out


def test_entries_are_decoded_while_later_containers_are_read(pools: list[Recorded]) -> None:
    # Decoding waits for no header past its entry's: a large library's first entries are
    # decompressed on threads while the reader reads (and scans for) the rest, and while
    # a first read brings the file in from disk.
    blob = one_container_per_entry()
    found = Found(
        blob, "x.fatbin", True, Budget(Limits(), "x.fatbin"), digests=False,
        threads=_threads(pools),
    )  # fmt: skip
    given_before: list[int] = []

    def containers() -> Iterator[fatbin.Container]:
        for c in fatbin.parse_containers(blob, 0, len(blob), "x.fatbin"):
            given_before.append(sum(p.submitted for p in pools))
            yield c

    found.add("(fatbin)", containers())
    listing = found.listing()
    assert given_before[0] == 0
    assert given_before[-1] >= 1  # on the pool before the last container was read
    assert [p.stopped for p in pools] == [True]
    assert listing == read_buffer(blob, 0, len(blob), "x.fatbin", digests=False).listing


def test_a_read_that_fails_half_way_stops_its_threads_and_says_what_a_serial_read_says(
    pools: list[Recorded], tmp_path: Path
) -> None:
    # Entries already on the pool when a later container proves corrupt: the read ends
    # with the container's one-line error, the threads stopped before the file's map is
    # closed (a thread still reading it would make closing it fail instead).
    good = one_container_per_entry()
    bad = tmp_path / "x.fatbin"
    bad.write_bytes(good + b"\x01" * 64)
    with pytest.raises(BadInputError) as serial:
        read_artifact(bad)
    assert pools == []
    with pytest.raises(BadInputError) as threaded:
        read_artifact(bad, threads=_threads(pools))
    assert threaded.value.message == serial.value.message
    assert "no fatbin container" in serial.value.message
    assert len(pools) == 1
    assert pools[0].submitted >= 1
    assert pools[0].stopped
