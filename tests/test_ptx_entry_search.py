"""The PTX ``.entry`` search off the GIL (memmem through ctypes) gives what ``find`` and the
pure-Python search give: the same names from the same text, however it is cut."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.reader import cubin, memsearch

pytestmark = pytest.mark.unit

HEADER = b".version 9.0\n.target sm_90a\n"
ENTRY = re.compile(rb"\.entry\s+([\w$%]+)")
TOKENS = [
    b".entry ", b".entry\n\t", b"_Z3fooPi", b"k$1", b"%r", b"(", b" ", b"\n", b".entr",
    b"y ", b"e", b"\0", b".", b"ntry",
]  # fmt: skip


def test_memmem_searches_bytes() -> None:
    # Linux's C library has it: on the decoding threads the search runs without the GIL.
    assert memsearch.in_bytes(b".entry") is not None


def test_large_pieces_are_searched_by_memmem(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 1 MiB piece of a streamed text (payloads' chunk) is searched off the GIL.
    searched: list[int] = []
    real = memsearch.in_bytes

    def recorded(data: bytes) -> object:
        searched.append(len(data))
        return real(data)

    monkeypatch.setattr(memsearch, "in_bytes", recorded)
    text = b".entry a\n" + b"x" * (1 << 20) + b".entry b\n"
    assert cubin.read_ptx(text, 0, len(text), "x").kernels == ("a", "b")
    assert searched, "no piece was searched by memmem"
    assert min(searched) >= cubin._PTX_MEMMEM_MIN


def test_only_bytes_are_searched_in_place() -> None:
    # A bytearray can be resized (its address moves): never searched by address.
    assert memsearch.in_bytes(bytearray(b".entry")) is None  # type: ignore[arg-type]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    text=st.lists(st.sampled_from(TOKENS), max_size=120).map(b"".join),
    start=st.integers(0, 1200),
)
def test_the_same_answers_as_find(text: bytes, start: int) -> None:
    find = memsearch.in_bytes(text)
    assert find is not None
    for needle in (b".entry", b"\0", b"y"):
        assert find(needle, start) == text.find(needle, start)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    body=st.lists(st.sampled_from(TOKENS), max_size=80).map(b"".join),
    cuts=st.lists(st.integers(0, 2000), max_size=8),
)
def test_the_same_names_with_and_without_memmem(body: bytes, cuts: list[int]) -> None:
    text = HEADER + body
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(cubin, "_PTX_MEMMEM_MIN", 0)  # every piece, however small
        with_memmem = cubin.scan_ptx(iter(pieces), "x")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(memsearch, "in_bytes", lambda _data: None)
        without = cubin.scan_ptx(iter(pieces), "x")
    assert with_memmem == without
    ended = text.split(b"\0", 1)[0]
    assert with_memmem.kernels == tuple(m.group(1).decode() for m in ENTRY.finditer(ended)), (
        "the names a plain search of the whole text finds"
    )
