"""cuobjdump refusing a container the gate's reader reads is a failed cross-check, exit 1.

Issue 45 item 6: `run` on such a file exited 3 (a tool failure). The input is a real
nvcc-built object with one header field changed: the first entry's ident offset, set
past the entry's header while its ident length stays 0. cuobjdump 13 refuses the whole
container ("Invalid fatbin header"); the reader reads no ident of length 0, so it reads
the entries as nvcc wrote them. The two readers disagree on the same bytes, and the
cross-check row says so, with both sides' word.
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
from pathlib import Path

import pytest

from gate import proc
from gate.errors import ExitCode, ToolError
from gate.reader.listing import Kind
from gate.reader.read import read_artifact
from gate.tools import cuobjdump

pytestmark = pytest.mark.integration

SOURCE = "__global__ void write_value(int *p) { *p = 42; }\n"
_MAGIC = struct.pack("<I", 0xBA55ED50)
_CONTAINER = struct.Struct("<IHHQ")
# An entry header's ident offset and length (gate.reader.fatbin._ENTRY's 10th, 11th fields).
_IDENT = struct.Struct("<II")
_IDENT_AT = 0x20
_PAST_THE_HEADER = 0xFF00


@pytest.fixture(scope="module")
def tool() -> str:
    try:
        return cuobjdump.find()
    except ToolError as e:
        pytest.skip(f"cuobjdump not found: {e.one_line()}")


@pytest.fixture(scope="module")
def refused_object(tool: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An nvcc-built object whose first fatbin entry's ident offset points past its header."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH: the object is built by it")
    folder = tmp_path_factory.mktemp("refused")
    (folder / "k.cu").write_text(SOURCE)
    built = proc.run(
        [nvcc, "-c", "-gencode", "arch=compute_90,code=[sm_90,compute_90]", "k.cu", "-o", "k.o"],
        cwd=folder,
        timeout=300,
    )
    assert built.ok, built.output()
    data = bytearray((folder / "k.o").read_bytes())
    assert data.count(_MAGIC) == 1  # one container, in .nv_fatbin
    container = data.index(_MAGIC)
    _, version, header_size, _ = _CONTAINER.unpack_from(data, container)
    assert version == 1
    entry = container + header_size
    offset, length = _IDENT.unpack_from(data, entry + _IDENT_AT)
    assert (offset, length) == (0, 0), "nvcc wrote an ident: pick another field"
    _IDENT.pack_into(data, entry + _IDENT_AT, _PAST_THE_HEADER, 0)
    (folder / "build").mkdir()
    changed = folder / "build" / "k.o"
    changed.write_bytes(data)
    return changed


def test_cuobjdump_refuses_what_the_reader_reads(tool: str, refused_object: Path) -> None:
    listed = proc.run([tool, "--list-elf", str(refused_object)], timeout=cuobjdump.TIMEOUT)
    assert "Invalid fatbin header" in listed.stderr, listed.output()
    with pytest.raises(cuobjdump.RefusedError) as refused:
        cuobjdump.run_tool(tool, ["--list-elf"], refused_object)
    assert refused.value.said.startswith("cuobjdump fatal : Invalid fatbin header in ")
    listing = read_artifact(refused_object).listing
    assert [(e.kind, str(e.target)) for e in listing.entries] == [
        (Kind.SASS, "sm_90"),
        (Kind.PTX, "compute_90"),
    ]


def test_run_fails_the_cross_check_naming_both_readers(tool: str, refused_object: Path) -> None:
    project = refused_object.parent.parent
    (project / "cuda-gate.toml").write_text('[[artifact]]\npath = "build/k.o"\n')
    shutil.rmtree(project / "gate-evidence", ignore_errors=True)
    run = proc.run(
        [sys.executable, "-m", "gate", "run", "--no-store", "--target", "sm_90"],
        cwd=project,
        base_env=dict(os.environ),
        timeout=300,
    )
    said = f"cuobjdump fatal : Invalid fatbin header in '{refused_object}'"
    row = (
        f"k.o: cuobjdump agrees with the cuda-gate reader: cuobjdump refuses the file ({said}); "
        "the cuda-gate reader reads 2 entries (SASS sm_90, PTX compute_90)"
    )
    assert run.returncode == ExitCode.NOT_ACCEPTED, run.output()  # was 3
    (verdict,) = [line for line in run.stdout.splitlines() if line.startswith("Verdict: ")]
    assert verdict == f"Verdict: not accepted: {row}"
    # Only the cross-check fails: cuobjdump's refusal is kept aside, not read as empty listings.
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1, run.stdout
    kept = project / "gate-evidence" / "artifacts" / "k.o"
    assert not (kept / "elf-list.txt").exists()
    refusal = (kept / "cuobjdump-refused.txt").read_text(encoding="utf-8")
    assert (
        refusal.count("Invalid fatbin header") == 4
    )  # --list-elf, --list-ptx, -symbols, --dump-ptx
    assert "SASS   sm_90" in (kept / "device-code.txt").read_text(encoding="utf-8")
