"""Dropping the pages a read has touched (gate.reader.pages): the map's resident size
stays near one sweep's worth however many small ranges are read, and a large range is
dropped as soon as it is released."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest

from gate.reader import pages

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(sys.platform != "linux", reason="reads the map's size from /proc"),
]

MB = 1 << 20


def _resident(path: Path) -> int:
    """Bytes of this process's maps of ``path`` resident now (/proc/self/smaps)."""
    total, ours = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(maxsplit=1)[0]
        if "-" in first and not first.endswith(":"):  # a map's own line: address range, path
            ours = line.rstrip().endswith(str(path))
        elif ours and first == "Rss:":
            total += int(line.split()[1]) * 1024
    return total


@pytest.fixture
def mapped(tmp_path: Path) -> tuple[Path, mmap.mmap]:
    path = tmp_path / "payloads.bin"
    path.write_bytes(bytes(range(256)) * (16 * MB // 256))
    with path.open("rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return path, buf


def test_small_ranges_stay_mapped_no_longer_than_a_sweep(
    mapped: tuple[Path, mmap.mmap],
) -> None:
    path, buf = mapped
    release = pages.releaser(buf)
    step = 64 << 10
    peak = 0
    for i, lo in enumerate(range(0, len(buf), step)):
        assert buf[lo : lo + step]  # read: its pages are mapped in
        release(lo, lo + step)
        if i % 4 == 3:
            peak = max(peak, _resident(path))
    # 16 MB read a small range at a time: never more than a sweep's worth (and what one
    # fault maps around it) stays mapped.
    assert peak <= pages._SWEEP_BYTES + 4 * pages.FAULT_AROUND, peak
    buf.close()


def test_a_large_range_is_dropped_when_it_is_released(mapped: tuple[Path, mmap.mmap]) -> None:
    path, buf = mapped
    release = pages.releaser(buf)
    size = 2 * pages._ALONE
    assert buf[MB : MB + size].count(b"\0") == size // 256  # read: mapped in
    assert _resident(path) >= size
    release(MB, MB + size)
    assert _resident(path) <= 2 * pages.FAULT_AROUND
    buf.close()


def test_a_buffer_that_is_no_file_map_is_left_alone() -> None:
    data = bytearray(b"x" * MB)
    pages.releaser(data)(0, MB)  # nothing to drop, nothing raised
    assert data == b"x" * MB
