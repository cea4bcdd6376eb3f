"""`cuda-gate inspect` names every file it cannot read, and why (issue 37, item 5).

Concrete mutations of the golden archive and fatbin, of the kinds the fuzz test
(tests/test_fuzz_fatbin.py) makes: an ar member's header or size broken or past the end,
a fatbin container inside an archive member or a raw fatbin claiming bytes that are not
there, a truncated fatbin, a corrupted zstd payload. Each exit 6 prints the file (and the
archive member, ``lib.a(member.o)``) with its problem: alone, as the one error line; beside
a good file (still listed), followed by the count and the first that could not be read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from gate.cli import main
from gate.errors import ExitCode
from gate.scan.cache import ENV_DIR

GOLDEN = Path(__file__).parent / "golden"
ARCHIVE = (GOLDEN / "libkernels.a").read_bytes()
FATBIN = (GOLDEN / "debug.fatbin").read_bytes()
# libkernels.a: its symbol table at 0x8, then lto.o's header at 0x238, whose device code
# (__nv_relfatbin) holds a fatbin container at 0x9fc of the archive.
MEMBER = 0x238
MEMBER_CONTAINER = 0x9FC
# debug.fatbin: one container at 0, its first entry (zstd) at 0x10, payload 0x60 later.
ENTRY_PAYLOAD = 0x10 + 0x60

pytestmark = pytest.mark.unit


def _put(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new) :]


@dataclass(frozen=True)
class Case:
    """A mutated input, the options it is inspected with, and what follows its path on
    the line naming it."""

    name: str
    data: bytes
    options: tuple[str, ...]
    problem: str


CASES = [
    Case(
        "size.a",
        _put(ARCHIVE, MEMBER + 48, b"12x4      "),
        (),
        ": corrupted archive member size at 0x238",
    ),
    Case(
        "past.a",
        _put(ARCHIVE, MEMBER + 48, b"99999999  "),
        (),
        ": archive member at 0x238 runs past the end",
    ),
    Case(
        "header.a",
        _put(ARCHIVE, MEMBER + 58, b"!!"),
        (),
        ": corrupted archive member header at 0x238",
    ),
    Case(
        "member.a",
        _put(ARCHIVE, MEMBER_CONTAINER + 8, struct.pack("<Q", 1 << 40)),
        ("--names",),
        "(lto.o): fatbin container at 0x9fc claims 1099511627776 bytes, past the end of its "
        "section",
    ),
    Case(
        "claims.fatbin",
        _put(FATBIN, 8, struct.pack("<Q", 1 << 40)),
        (),
        ": fatbin container at 0x0 claims 1099511627776 bytes, past the end of its section",
    ),
    Case(
        "cut.fatbin",
        FATBIN[:100],
        (),
        ": fatbin container at 0x0 claims 4848 bytes, past the end of its section",
    ),
    Case(
        "zstd.fatbin",
        _put(FATBIN, ENTRY_PAYLOAD, b"\xff" * 16),
        ("--names",),
        ": fatbin entry at 0x10: corrupted zstd data (decompression error: Data corruption "
        "detected)",
    ),
]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--names`` reads through the inspection cache: one of the test's own."""
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "cache"))


def _inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, list[str]]:
    code = main(["inspect", "--no-detect", *args])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_an_unreadable_file_is_named_with_its_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Case
) -> None:
    bad = tmp_path / case.name
    bad.write_bytes(case.data)
    code, _, err = _inspect(capsys, *case.options, str(bad))
    assert code == ExitCode.BAD_INPUT
    assert err == [f"cuda-gate: error: {bad}{case.problem}"]  # the error, said once


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_an_unreadable_file_beside_a_good_one_is_named_and_the_good_one_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Case
) -> None:
    bad = tmp_path / case.name
    bad.write_bytes(case.data)
    good = GOLDEN / "multi.o"
    code, out, err = _inspect(capsys, *case.options, str(good), str(bad))
    assert code == ExitCode.BAD_INPUT
    assert str(good) in out
    member = case.problem.partition(":")[0]  # "(lto.o)" for an archive's member, else ""
    assert err == [
        f"cuda-gate: error: {bad}{case.problem}",
        f"cuda-gate: error: 1 of 2 artifacts could not be read: {bad}{member}",
    ]
