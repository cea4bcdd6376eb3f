"""`cuda-gate inspect` of one wheel: the per-distribution table a folder of wheels gets.

A real wheel built from the nvcc-built golden binaries (tests/golden), host-only ELF files,
and a library whose fatbin sits in ``.data`` (as libcurand's do), read in process; the
console's exact lines, and ``--files`` (``--by-file``), ``--json`` and the exit statuses as
the per-file reading gives them.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.cli import main
from gate.errors import ExitCode
from gate.render.environment import fit
from tests.elfbuild import elf_with_section

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
HOST_ONLY = Path(shutil.which("true") or "/bin/true")  # an ELF file with no device code


@pytest.fixture
def wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """mix 2.0: libk.so (sm_80, sm_120, compute_80), hopper.cubin (sm_90a), librand.so
    (sm_90 and compute_90 in .data) and four files without device code."""
    monkeypatch.setenv("COLUMNS", "100")  # the width a log gets, whatever the terminal
    path = tmp_path / "mix-2.0-py3-none-linux_x86_64.whl"
    in_data = elf_with_section(b".data", 0x3, b"junk" * 7 + (GOLDEN / "debug.fatbin").read_bytes())
    with zipfile.ZipFile(path, "w") as z:
        z.write(GOLDEN / "libkernels.so", "mix/libk.so")
        z.write(GOLDEN / "sm_90a.cubin", "mix/hopper.cubin")
        z.writestr("mix/librand.so", in_data)
        for i in range(4):
            z.write(HOST_ONLY, f"mix/_host{i}.so")
        z.writestr("mix-2.0.dist-info/METADATA", "Name: mix\nVersion: 2.0\n")
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["inspect", "--no-detect", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_one_wheel_is_one_distribution_with_its_bottom_line_first(
    wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "--device", "12.1", "--device", "9.0", str(wheel))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "1 distribution with device code, 0 without; 7 artifacts read",
        "distribution  version  device  verdict",
        (
            "mix           2.0      12.1    partly: 2 of 3 libraries run (1 by compatible SASS "
            "(sm_120), 1 by PTX JIT (compute_90, ISA 9.0, driver >= 13.0)); "
            "1 only for other devices; by target only (--names: per kernel)"
        ),
        (
            "                       9.0     runs: 2 libraries by exact SASS, 1 by PTX JIT "
            "(compute_80, ISA 9.0, driver >= 13.0); by target only (--names: per kernel)"
        ),
        "    12.1 compatible SASS (sm_120): 1 file: mix/libk.so",
        "    12.1 PTX JIT (compute_90, ISA 9.0, driver >= 13.0): 1 file: mix/librand.so",
        "    12.1 only for other devices: 1 file: mix/hopper.cubin",
        "    9.0 exact SASS (sm_90a): 1 file: mix/hopper.cubin",
        "    9.0 exact SASS (sm_90): 1 file: mix/librand.so",
        "    9.0 PTX JIT (compute_80, ISA 9.0, driver >= 13.0): 1 file: mix/libk.so",
        "    4 files without device code",
        (
            "    1 cubin and 1 PTX outside .nv_fatbin (.data): cuobjdump --list-elf and --list-ptx "
            "do not list them"
        ),
        "summary   mixed  cannot run",
        "12.1          1           1",
        "9.0           1           0",
    ]


def test_without_a_device_the_targets_stand_in_for_a_verdict(
    wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, str(wheel))
    assert code == 0
    assert out.splitlines()[2:] == [
        "mix           2.0      -       SASS sm_80..sm_120 (4), PTX compute_80..compute_90 (2)",
        "    4 files without device code",
        (
            "    1 cubin and 1 PTX outside .nv_fatbin (.data): cuobjdump --list-elf and --list-ptx "
            "do not list them"
        ),
        "no device given (--device CAP): no verdict",
    ]


@pytest.mark.parametrize("option", ["--files", "--by-file"])
def test_files_gives_the_per_file_table(
    wheel: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    code, out, _ = _run(capsys, option, "--device", "12.1", str(wheel))
    assert code == 0
    heads = [line.split("  ")[0] for line in out.splitlines() if not line.startswith(" ")]
    members = ["libk.so", "hopper.cubin", "librand.so", *(f"_host{i}.so" for i in range(4))]
    assert sorted(heads) == sorted(f"{wheel}!mix/{m}" for m in members)
    assert out.count("  no device code\n") == 4


def _schema() -> dict[str, Any]:
    text = resources.files("gate").joinpath("schemas/inspect.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def test_json_and_exit_statuses_are_the_per_file_reading_s(
    wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "--json", "--device", "12.1", str(wheel))
    assert code == 0
    doc = json.loads(out)
    jsonschema.validate(doc, _schema())
    assert len(doc["artifacts"]) == 7
    assert {a["path"].split("!")[0] for a in doc["artifacts"]} == {str(wheel)}
    table, files = (
        _run(capsys, *a, "--require-device", "12.1", str(wheel)) for a in ((), ("--files",))
    )
    assert table[0] == files[0] == ExitCode.NOT_ACCEPTED
    assert table[2] == files[2]  # the same failing artifacts, said the same way


def test_its_files_without_device_code_need_no_device_as_in_a_folder_of_wheels(
    wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The four host-only libraries are no part of mix's answer: the wheel alone passes 9.0
    # as the folder holding it does (they used to fail it, file by file), and fails 12.1
    # (hopper.cubin: only for other devices) as the folder does.
    for device, expected in (("9.0", 0), ("12.1", ExitCode.NOT_ACCEPTED)):
        for flags in ((), ("--files",), ("--json",), ("--strict",)):
            alone = _run(capsys, *flags, "--require-device", device, str(wheel))
            folder = _run(capsys, *flags, "--require-device", device, str(wheel.parent))
            assert alone[0] == folder[0] == expected, (device, flags, alone[2], folder[2])
            assert "_host" not in alone[2]


NAMES = ["a.so", "bb.so", "ccc.so", "dddd.so"]


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (200, "12 files: a.so, bb.so, ccc.so, dddd.so"),
        (38, "12 files: a.so, bb.so, ccc.so, dddd.so"),
        (37, "12 files: a.so, bb.so, ... and 2 more"),
        (36, "12 files: a.so, ... and 3 more"),
        (29, "12 files"),  # not even one name and the count of the others: the count alone
    ],
)
def test_names_end_at_the_width_and_no_name_is_cut(width: int, expected: str) -> None:
    assert fit("12 files", NAMES, width) == expected
    assert fit("12 files", [], width) == "12 files"
