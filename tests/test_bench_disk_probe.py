"""benchmarks/disk_probe.py, which times on the GPU machine how a library's section comes
off its disk by each way of asking: it must run there the first time, in one device call."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.elfbuild import elf_with_section

pytestmark = pytest.mark.integration
PROBE = Path(__file__).resolve().parent.parent / "benchmarks" / "disk_probe.py"
SHF_ALLOC = 0x2
WAYS = 9


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROBE), *argv], capture_output=True, text=True, check=False,
        timeout=120,
    )  # fmt: skip


def test_every_way_brings_the_section_in_and_is_timed(tmp_path: Path) -> None:
    lib = tmp_path / "lib.so"
    lib.write_bytes(elf_with_section(b".nv_fatbin", SHF_ALLOC, bytes(range(256)) * 12_288))
    done = _run("--no-drop", "--passes", "2", str(lib))
    assert done.returncode == 0, done.stderr
    assert f"{lib}: .nv_fatbin 3.1 MB at 0x0" in done.stdout
    assert re.search(r"^one 8 MB MADV_WILLNEED brought in \d+ kB$", done.stdout, re.M)
    rows = re.findall(r"^\| ([^|]+) \| (\d) \| (\d+\.\d{3}) \| (\d+\.\d\d) \|$", done.stdout, re.M)
    assert len(rows) == 2 * WAYS
    assert {way for way, *_ in rows} == {way for way, *_ in rows[:WAYS]}
    assert [int(n) for _, n, *_ in rows] == [1] * WAYS + [2] * WAYS


def test_a_library_it_cannot_probe_is_one_line_and_exit_2(tmp_path: Path) -> None:
    lib = tmp_path / "lib.so"
    lib.write_bytes(elf_with_section(b".rodata", SHF_ALLOC, bytes(8192)))
    missing = tmp_path / "missing.so"
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    fifo = tmp_path / "fifo.so"
    os.mkfifo(fifo)  # opened as a file, it would wait for a writer for ever
    for argv, said in (
        ([str(lib)], f"{lib}: no .nv_fatbin section"),
        ([str(missing)], f"{missing}: cannot read: No such file or directory"),
        ([str(empty)], f"{empty}: empty file"),
        ([str(fifo)], f"{fifo}: not a regular file (a FIFO)"),
    ):
        done = _run("--no-drop", *argv)
        assert done.returncode == 2
        assert done.stderr == f"disk_probe.py: error: {said}\n"
        assert done.stdout == ""
