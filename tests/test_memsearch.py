"""The container scan's search (memmem through ctypes) gives what ``find`` gives."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.reader import memsearch
from gate.reader.fatbin import CONTAINER_PREFIX

pytestmark = pytest.mark.unit

NEEDLE = CONTAINER_PREFIX


def test_memmem_is_there() -> None:
    # Linux's C library has it: the fallback to find is for elsewhere.
    assert memsearch._MEMMEM is not None


@given(
    st.lists(st.sampled_from([NEEDLE, NEEDLE[:5], b"\x00", b"\xba", b"xyz\x00"]), max_size=40),
    st.integers(0, 200),
    st.integers(0, 200),
)
def test_the_same_answers_as_find(parts: list[bytes], lo: int, hi: int) -> None:
    data = b"".join(parts)
    for buf in (data, bytearray(data)):
        with memsearch.finder(buf) as find:
            assert find(NEEDLE, lo, hi) == buf.find(NEEDLE, lo, hi)
            assert find(b"\x00", lo, hi) == buf.find(b"\x00", lo, hi)


def test_a_mapped_file_is_searched_in_place_and_released(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    data = b"\x00" * 5000 + NEEDLE + b"\x01" * 3000 + NEEDLE
    path.write_bytes(data)
    with path.open("rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with memsearch.finder(buf) as find:
        assert find(NEEDLE, 0, len(buf)) == 5000
        assert find(NEEDLE, 5001, len(buf)) == len(data) - len(NEEDLE)
        assert find(NEEDLE, 5001, len(buf) - 1) == -1  # straddles the end of the range
        assert find(NEEDLE, 0, 10**9) == 5000  # past the end: as find, the end
        with pytest.raises(BufferError):
            buf.close()  # its address is held
    buf.close()  # let go: the map closes
    assert buf.closed


def test_a_closed_map_falls_back_to_find(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(NEEDLE)
    with path.open("rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    buf.close()
    with memsearch.finder(buf) as find, pytest.raises(ValueError, match="closed"):
        find(NEEDLE, 0, 8)
