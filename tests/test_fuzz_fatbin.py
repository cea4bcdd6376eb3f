"""Property: whatever bytes a real fatbin is mutated into, reading it gives a report or a
one-line BadInputError naming the file; never another exception, a hang or unbounded memory.

Thousands of cases over the golden binaries (about 30 s): byte overwrites in the header
regions that matter most, random flips anywhere, truncations, and spliced size fields.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.errors import BadInputError
from gate.reader import fatbin
from gate.reader.read import read_buffer

GOLDEN = Path(__file__).parent / "golden"
SEEDS = {
    name: (GOLDEN / name).read_bytes()
    for name in ("debug.fatbin", "multi.o", "libkernels.so", "sm_90a.cubin")
}
# Fields whose corruption matters most: container and entry headers.
SIZES = [0, 1, 7, 8, 16, 63, 64, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, 1 << 40, (1 << 64) - 1]

pytestmark = pytest.mark.unit


def _hot_offsets(data: bytes) -> list[int]:
    """Offsets of container and entry headers, where mutations are most interesting."""
    hot = []
    pos = data.find(fatbin.CONTAINER_PREFIX)
    while pos >= 0:
        hot.append(pos)
        try:
            container = fatbin.parse_container(data, pos, len(data), "seed")
        except BadInputError:
            break
        hot += [e.offset for e in container.entries]
        pos = data.find(fatbin.CONTAINER_PREFIX, pos + 16)
    return hot or [0]


HOT = {name: _hot_offsets(data) for name, data in SEEDS.items()}


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(SEEDS)))
    data = bytearray(SEEDS[name])
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["hot-byte", "hot-size", "any-byte", "truncate"]))
        if not data:
            break
        if how == "truncate":
            del data[draw(st.integers(0, len(data) - 1)) :]
            continue
        if how == "any-byte":
            at = draw(st.integers(0, len(data) - 1))
        else:
            at = draw(st.sampled_from(HOT[name])) + draw(st.integers(0, 79))
        if at >= len(data):
            continue
        if how == "hot-size" and at + 8 <= len(data):
            value = draw(st.sampled_from(SIZES))
            width = draw(st.sampled_from([4, 8]))
            struct.pack_into("<Q" if width == 8 else "<I", data, at, value & ((1 << width * 8) - 1))
        else:
            data[at] = draw(st.integers(0, 255))
    return name, bytes(data)


@settings(
    max_examples=4000,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(case=mutated(), names=st.booleans())
def test_mutated_fatbins_read_or_fail_with_one_line(case: tuple[str, bytes], names: bool) -> None:
    name, data = case
    try:
        report = read_buffer(data, 0, len(data), name, names=names)
    except BadInputError as e:
        line = e.one_line()
        assert line.startswith(f"{name}: ")
        assert "\n" not in line
        return
    if names:  # decompressed entries passed the bound; headers alone are only listed
        for entry in report.listing.entries:
            assert entry.size <= fatbin.MAX_UNCOMPRESSED or entry.compression == "none"
