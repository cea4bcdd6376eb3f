"""Inputs that once hung or crashed the reader (tests/repro/README.md): one clean line each.

Every case runs `cuda-gate inspect` in this process under a hang guard (SIGALRM),
tracemalloc and a count of the lines of Python it runs, so a hang fails the test instead
of stalling it, a claimed size that gets allocated shows up as memory, and work that grows
with the input shows up as lines; bad files must give exactly one error line naming them,
good files beside them must still be read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gate.cli import main
from gate.errors import ExitCode
from tests.work import hang_guard, peak_memory, python_lines

REPRO = Path(__file__).parent / "repro"
GOLDEN = Path(__file__).parent / "golden"
# Traced bytes any one case may take.
MEMORY = 128 << 20
# Lines of Python any one case may run: the command itself runs ~13,000 (~115,000 when it
# first imports what it needs); one line per byte of these inputs would be millions.
LINES = 1_000_000

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str
    lines: int  # of Python, run by the command
    peak: int


@pytest.fixture
def inspect(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """Run `cuda-gate inspect ARGS` here, guarded against a hang; its exit code, output, and
    the lines of Python and the memory it took."""

    def run(*args: str) -> Outcome:
        capsys.readouterr()
        with (
            peak_memory() as memory,
            python_lines(limit=LINES) as lines,
            hang_guard(f"cuda-gate inspect {' '.join(args)}"),
        ):
            code = main(["inspect", "--no-detect", *args])
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        assert memory.amount < MEMORY, f"{memory.amount} bytes traced"
        return Outcome(code, out, err, lines.amount, memory.amount)

    return run


def _warm(inspect: Callable[..., Outcome], *args: str) -> Outcome:
    """`cuda-gate inspect ARGS` once uncached to import what it needs, then again: the
    second run's lines are the reading's, not the imports'."""
    inspect(*args, "--no-cache")
    return inspect(*args)


def _errors(outcome: Outcome) -> list[str]:
    """The line of each artifact that could not be read: a lone artifact's line is the
    error itself; over several, "1 of 20 artifacts could not be read: FIRST" (or "none of
    the 3 artifacts could be read: FIRST and 2 more") follows them."""
    lines = outcome.err.strip().splitlines()
    if re.search(r"artifacts could(?: not)? be read: ", lines[-1]):
        return lines[:-1]
    assert len(lines) == 1, lines
    return lines


# file -> (inspect options, words the one error line must hold)
BAD = {
    "ar_superscript_bsd.a": ((), "corrupted archive member name"),
    "ar_superscript_longname.a": ((), "corrupted archive member name"),
    "bomb_zstd_40x256M_ptx.fatbin": (("--names",), "decompression bomb"),
    "ptx_bigversion.fatbin": (("--names",), "not a PTX ISA version"),
    "zip_claim_3_75G.whl": ((), "size differs from the declared one"),
    "zip_claim_1_5G.whl": ((), "size differs from the declared one"),
    "zipbomb_3_9G.whl": ((), "not an ELF file or fatbin"),
    "elf_zipbomb_1G.whl": ((), "zip bomb"),
    "zip_encrypted.whl": ((), "encrypted zip member"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_naming_the_file(inspect: Callable[..., Outcome], name: str) -> None:
    options, words = BAD[name]
    outcome = inspect(str(REPRO / name), *options)
    assert outcome.code == ExitCode.BAD_INPUT
    (line,) = _errors(outcome)
    assert line.startswith(f"cuda-gate: error: {REPRO / name}")
    assert words in line


def test_twenty_members_claiming_1_5_gb_each_are_twenty_lines(
    inspect: Callable[..., Outcome],
) -> None:
    outcome = inspect(str(REPRO / "zip_20x_claim_1_5G.whl"))
    errors = _errors(outcome)
    assert len(errors) == 20
    assert all("size differs from the declared one" in e for e in errors)


@pytest.mark.parametrize(
    "name", ["ptx_newlines_zstd_4M.fatbin", "ptx_newlines_100000.fatbin", "hang_artifact.o"]
)
def test_runs_of_newlines_in_ptx_read_in_linear_time(
    inspect: Callable[..., Outcome], name: str
) -> None:
    outcome = _warm(inspect, str(REPRO / name), "--names", "--json")
    assert outcome.code == 0
    (art,) = json.loads(outcome.out)["artifacts"]
    assert [(e["kind"], e["target"], e["kernels"]) for e in art["entries"]] == [
        ("PTX", "compute_90", [])
    ]
    # No more Python than an ordinary fatbin's: a line per newline would be 100,000 more.
    ordinary = _warm(inspect, str(GOLDEN / "debug.fatbin"), "--names", "--json")
    assert outcome.lines < ordinary.lines + 10_000, (outcome.lines, ordinary.lines)


def test_headers_alone_never_decompress_the_bomb(inspect: Callable[..., Outcome]) -> None:
    outcome = inspect(str(REPRO / "bomb_zstd_40x256M_ptx.fatbin"), "--json")
    assert outcome.code == 0
    (art,) = json.loads(outcome.out)["artifacts"]
    assert len(art["entries"]) == 40


def test_bomb_reads_once_the_user_raises_the_ratio_and_stops_at_the_first_nul(
    inspect: Callable[..., Outcome],
) -> None:
    # 40 x 256 MB of zeros: a PTX text ends at its first NUL, so nothing past the first
    # piece of each entry is decompressed, and memory stays at one piece.
    bomb = str(REPRO / "bomb_zstd_40x256M_ptx.fatbin")
    outcome = _warm(inspect, bomb, "--names", "--max-ratio", "100000", "--json")
    assert outcome.code == 0
    assert outcome.peak < 32 << 20
    # The names cost ~400 lines of Python an entry over the headers alone; each entry read
    # to its end would be 256 pieces of 1 MiB, tens of lines each.
    headers = _warm(inspect, bomb, "--json")
    assert outcome.lines - headers.lines < 40 * 1_000, (outcome.lines, headers.lines)


def test_per_artifact_budget_counts_what_is_decompressed(inspect: Callable[..., Outcome]) -> None:
    # 4 MB of newlines from 145 bytes: under the ratio floor, past a 1 MB artifact budget.
    outcome = inspect(
        str(REPRO / "ptx_newlines_zstd_4M.fatbin"), "--names", "--max-artifact-mb", "1"
    )
    (line,) = _errors(outcome)
    assert "for one artifact; refusing (raise CUDA_GATE_MAX_ARTIFACT_MB" in line


def test_encrypted_member_does_not_stop_the_batch(inspect: Callable[..., Outcome]) -> None:
    outcome = inspect(
        str(REPRO / "zip_encrypted.whl"),
        str(REPRO / "demo-0.1-py3-none-any.whl"),
        "--names",
        "--files",  # each member on its own line
    )
    assert outcome.code == ExitCode.BAD_INPUT
    (line,) = _errors(outcome)
    assert "zip_encrypted.whl!pkg/libk.so: encrypted zip member" in line
    for member in ("pkg/libk.so", "pkg/k_sm90.cubin", "pkg/k_zstd.fatbin"):
        assert f"demo-0.1-py3-none-any.whl!{member}" in outcome.out


def test_raw_fatbin_without_names_routes_per_target(inspect: Callable[..., Outcome]) -> None:
    outcome = inspect(str(REPRO / "k_zstd.fatbin"), "--device", "9.0", "--json")
    (art,) = json.loads(outcome.out)["artifacts"]
    assert not art["names"]
    (device,) = art["devices"]
    assert device["verdict"] == "native"
    assert [r["route"] for r in device["routes"]] == ["exact SASS (sm_90)"]


@pytest.mark.parametrize("special", ["/dev/null", "fifo"])
def test_devices_and_fifos_are_refused_without_opening_them(
    inspect: Callable[..., Outcome], tmp_path: Path, special: str
) -> None:
    path = special
    if special == "fifo":
        path = str(tmp_path / "pipe")
        os.mkfifo(path)  # opening it for reading would block until a writer came
    outcome = inspect(path)
    assert outcome.code == ExitCode.BAD_INPUT
    (line,) = _errors(outcome)
    assert line.startswith(f"cuda-gate: error: {path}: not a regular file")


def test_non_utf8_file_name_prints_in_table_and_json(
    inspect: Callable[..., Outcome], tmp_path: Path
) -> None:
    odd = tmp_path / os.fsdecode(b"lib\xffk\nx.so")
    odd.write_bytes((GOLDEN / "libkernels.so").read_bytes())
    table = inspect(str(odd))
    assert table.code == 0
    assert "lib\\xffk\\x0ax.so" in table.out
    doc = inspect(str(odd), "--json")
    (art,) = json.loads(doc.out)["artifacts"]
    assert art["path"].endswith("lib\\xffk\\x0ax.so")


@pytest.mark.parametrize(
    ("option", "value"),
    [("--max-ratio", "0"), ("--max-entry-mb", "²"), ("--max-member-mb", "9" * 50)],
)
def test_bad_limit_values_are_one_config_error_line(
    capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    assert (
        main(["inspect", "--no-detect", option, value, str(GOLDEN / "multi.o")]) == ExitCode.CONFIG
    )
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"cuda-gate: error: {option}: ")


def test_limits_from_the_environment_apply(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_GATE_MAX_ARTIFACT_MB", "1")
    code = main(["inspect", "--no-detect", "--names", str(REPRO / "ptx_newlines_zstd_4M.fatbin")])
    assert code == ExitCode.BAD_INPUT
    assert "raise CUDA_GATE_MAX_ARTIFACT_MB" in capsys.readouterr().err
