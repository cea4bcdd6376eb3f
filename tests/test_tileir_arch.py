"""A cuTile cubin in an nvFatbin-made fatbin is arch-specific in every read (issue 44 item 3).

nvFatbin writes the arch it is given (``"90"``) into the entry header and no 'a' flag, so the
'a' of tileiras' sm_90a cubin is only in the cubin's ``.nv.compat`` (and, for sm_100+, in the
header's copy of it). Before, a headers-only read (no ``--names``) named it ``sm_90``;
cuobjdump, which reads the cubin, names it ``sm_90a``. The inputs are NVIDIA's
(tests/tileir_inputs.py); cuobjdump is found as the cross-check finds it (PATH, next to
nvcc, or the nvidia-cuda-cuobjdump wheel).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gate.errors import ToolError
from gate.reader import fatbin
from gate.reader.listing import Kind
from gate.reader.read import read_buffer
from gate.tools import cuobjdump
from tests.cuobjdump_names import arch_of_listed_name
from tests.tileir_inputs import inputs

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def made() -> Path:
    try:
        return inputs()
    except ToolError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot make the cuTile inputs: {e.one_line()}")
        pytest.skip(f"cannot make the cuTile inputs: {e.one_line()}")


@pytest.fixture(scope="module")
def tool() -> str:
    try:
        return cuobjdump.find()
    except ToolError as e:
        pytest.skip(f"cuobjdump not found: {e.one_line()}")


def _sass(data: bytes, *, names: bool, at: int = 0) -> list[str]:
    """The SASS targets read from ``data`` placed ``at`` bytes into the buffer (as a
    container inside a host ELF is)."""
    buf = bytes(at) + data
    listing = read_buffer(buf, at, len(data), "x.fatbin", names=names).listing
    return [str(e.target) for e in listing.entries if e.kind is Kind.SASS]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # sm_90: no copy of .nv.compat in the header, the cubin stored raw: its ELF is read.
        ("cubin_tile.fatbin", "sm_90a"),
        # sm_120: the header's copy of .nv.compat says it.
        ("cubin120.fatbin", "sm_120a"),
    ],
)
@pytest.mark.parametrize("names", [False, True])
def test_a_cutile_cubin_is_named_as_cuobjdump_names_it(
    made: Path, tool: str, name: str, expected: str, names: bool
) -> None:
    path = made / name
    listed = cuobjdump.run_tool(tool, ["--list-elf"], path).stdout
    theirs = [str(arch_of_listed_name(n)) for n in cuobjdump.parse_list(listed, "ELF")]
    assert theirs == [expected]
    assert _sass(path.read_bytes(), names=names) == theirs
    assert _sass(path.read_bytes(), names=names, at=4096) == theirs
    # The header itself says nothing of it: what the reader had to look past.
    data = path.read_bytes()
    (entry, *_) = fatbin.parse_container(data, 0, len(data), name).entries
    assert not entry.flags & (fatbin.FLAG_ARCH_SPECIFIC | fatbin.FLAG_FAMILY_SPECIFIC)


def test_a_plain_cubin_beside_it_stays_plain(made: Path) -> None:
    """The 'a' comes from the cubin's own record, not from being in an nvFatbin fatbin: the
    same bytes with the record's arch-specific value cleared read plain in both reads."""
    data = bytearray((made / "cubin_tile.fatbin").read_bytes())
    cubin = (made / "vadd_sm_90.cubin").read_bytes()
    at = bytes(data).index(cubin)
    record = _compat_record(cubin)
    assert data[at + record + 2] == 1
    data[at + record + 2] = 0
    assert _sass(bytes(data), names=False) == ["sm_90"]
    assert _sass(bytes(data), names=True) == ["sm_90"]


def test_a_cubin_entry_that_does_not_read_as_an_elf_is_still_listed(made: Path) -> None:
    """A headers-only read looks into the cubin only for its 'a': bytes that are no ELF
    leave the entry plain, as before, and the file is read (a names read reports them)."""
    data = bytearray((made / "cubin_tile.fatbin").read_bytes())
    at = bytes(data).index(b"\x7fELF")
    data[at : at + 4] = b"XXXX"
    assert _sass(bytes(data), names=False) == ["sm_90"]


def _compat_record(cubin: bytes) -> int:
    """Where the arch-specific record (fmt 2, attr 0x09) of the cubin's .nv.compat is."""
    import struct

    shoff, = struct.unpack_from("<Q", cubin, 0x28)  # fmt: skip
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    for i in range(shnum):
        sh_type, = struct.unpack_from("<I", cubin, shoff + i * shentsize + 4)  # fmt: skip
        if sh_type == 0x70000086:
            offset, size = struct.unpack_from("<QQ", cubin, shoff + i * shentsize + 24)
            body = cubin[offset : offset + size]
            pos = body.index(b"\x02\x09")
            return int(offset) + pos
    raise AssertionError("no .nv.compat")


def test_the_header_copy_of_nv_compat_is_read_before_the_cubin(made: Path) -> None:
    """sm_100+: the header's copy of ``.nv.compat`` decides, the cubin is not opened (a
    compressed cubin could not be without decompressing): with the cubin's ELF made
    unreadable the entry is still sm_120a."""
    data = bytearray((made / "cubin120.fatbin").read_bytes())
    at = bytes(data).index(b"\x7fELF")
    data[at : at + 4] = b"XXXX"
    assert _sass(bytes(data), names=False) == ["sm_120a"]
