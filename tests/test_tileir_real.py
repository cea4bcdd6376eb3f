"""Real cuTile output through the reader and `cuda-gate inspect` (issue 44, items 1-3).

The inputs are NVIDIA's (tests/tileir_inputs.py: cuda-tile 1.7.0, tileiras 13.4 and
nvFatbin from PyPI, built once into .work/tileir): Tile IR bytecode, cuTile cubins for
sm_90 and sm_120, a Tile-IR-only fatbin and one with an sm_90 cuTile cubin beside the
Tile IR. On 439ceb4 the reader refused both fatbins ("unknown kind 128"). Without a wheel
the tests skip, saying why; under CI they fail.
"""

from __future__ import annotations

import json
import os
import struct
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.cli import main
from gate.errors import BadInputError, ExitCode, ToolError
from gate.reader import fatbin, tileir
from gate.reader.entries import Kind
from gate.reader.read import read_buffer
from gate.rules.targets import Version
from tests.tileir_inputs import inputs

pytestmark = pytest.mark.integration

F32 = "vector_add_Kt1_A1f32_1l0_A1f32_1l0_A1f32_1l0"
F16 = "vector_add_Kt1_A1f16_1l0_A1f16_1l0_A1f16_1l0"


@pytest.fixture(scope="module")
def made() -> Path:
    try:
        return inputs()
    except ToolError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot make the cuTile inputs: {e.one_line()}")
        pytest.skip(f"cannot make the cuTile inputs: {e.one_line()}")


def _read(path: Path, *, names: bool) -> tuple[object, ...]:
    data = path.read_bytes()
    return tuple(read_buffer(data, 0, len(data), path.name, names=names).listing.entries)


def test_tile_ir_bytecode_gives_its_version_and_kernels(made: Path) -> None:
    one = tileir.read((made / "vadd.tileir").read_bytes(), "vadd.tileir")
    assert one == tileir.TileIR(Version(13, 4), (F32,))
    # Two kernels in one module: the second is found past the first one's hints.
    two = tileir.read((made / "two.tileir").read_bytes(), "two.tileir")
    assert two == tileir.TileIR(Version(13, 4), (F32, F16))


@pytest.mark.parametrize("names", [False, True])
def test_a_fatbin_with_a_cubin_and_tile_ir_lists_both(made: Path, names: bool) -> None:
    sass, tile = _read(made / "cubin_tile.fatbin", names=names)
    assert sass.kind is Kind.SASS  # type: ignore[attr-defined]
    assert tile.kind is Kind.TILEIR  # type: ignore[attr-defined]
    assert tile.ptx_isa == Version(13, 4)  # type: ignore[attr-defined]  # bytecode version
    assert tile.compression == "zstd"  # type: ignore[attr-defined]
    assert tile.name == "vector_add"  # type: ignore[attr-defined]  # its identifier
    assert tile.size == len((made / "vadd.tileir").read_bytes())  # type: ignore[attr-defined]
    if names:
        assert str(sass.target) == "sm_90a"  # type: ignore[attr-defined]  # cuTile: arch-specific
        assert sass.kernels == tile.kernels == (F32,)  # type: ignore[attr-defined]


def test_the_tile_ir_header_is_as_nvfatbin_writes_it(made: Path) -> None:
    data = (made / "tile_only.fatbin").read_bytes()
    (entry,) = fatbin.parse_container(data, 0, len(data), "tile_only.fatbin").entries
    assert (entry.kind, entry.flags, entry.arch) == (128, 0x8011, 80)
    assert entry.header_size == 88 + 8  # 88 with a one-letter ident; "vector_add" takes 16
    assert entry.major == 0x0D04  # the bytecode version, 13.4


def test_an_invented_kind_in_place_of_tile_ir_leaves_the_cubin_listed(made: Path) -> None:
    data = bytearray((made / "cubin_tile.fatbin").read_bytes())
    _, tile = fatbin.parse_container(data, 0, len(data), "x").entries
    struct.pack_into("<H", data, tile.offset, 4096)
    sass, strange = read_buffer(bytes(data), 0, len(data), "x", names=True).listing.entries
    assert (sass.kind, str(sass.target), sass.kernels) == (Kind.SASS, "sm_90a", (F32,))
    assert (strange.kind, strange.number, strange.kernels) == (Kind.UNKNOWN, 4096, ())


def _inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["inspect", "--no-detect", *args])
    out, err = capsys.readouterr()
    return code, out + err


def test_inspect_names_the_routes_of_a_tile_ir_only_fatbin(
    made: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = made / "tile_only.fatbin"
    code, out = _inspect(capsys, str(path), "--device", "9.0", "--device", "12.1", "--names")
    assert code == 0, out
    assert "0 SASS, 0 PTX, 0 LTO IR, 1 TileIR, 1 kernel" in out
    (row,) = [line.split() for line in out.splitlines() if line.startswith("  TileIR ")]
    assert row[:6] == ["TileIR", "tileir", "1", "1", "13.4", "zstd"]
    lines = [line for line in out.splitlines() if line.startswith("  device ")]
    assert lines == [
        f"  device {cap}: unknown: Tile IR runs only where the driver compiles its bytecode "
        "version: 1 kernel through Tile IR (bytecode 13.4, driver >= 13.4)"
        for cap in ("9.0", "12.1")
    ]


def test_inspect_of_a_cubin_and_tile_ir_runs_the_cubin_where_it_can(
    made: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = made / "cubin_tile.fatbin"
    code, out = _inspect(capsys, str(path), "--device", "9.0", "--device", "12.1", "--names")
    assert code == 0, out
    assert "  device 9.0: native: 1 kernel from exact SASS (sm_90a)" in out
    assert "  device 12.1: unknown: Tile IR runs only where" in out


def test_inspect_json_holds_tile_ir_and_validates(
    made: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = made / "cubin_tile.fatbin"
    code, out = _inspect(capsys, str(path), "--json", "--names", "--device", "12.1")
    assert code == 0
    doc = json.loads(out)
    schema = resources.files("gate").joinpath("schemas/inspect.schema.json").read_text("utf-8")
    jsonschema.validate(doc, json.loads(schema))
    (art,) = doc["artifacts"]
    tile = art["entries"][1]
    assert (tile["kind"], tile["target"], tile["tileir_version"]) == ("TileIR", "tileir", "13.4")
    assert tile["kernels"] == [F32]
    (route,) = art["devices"][0]["routes"]
    assert (route["path"], route["ptx_isa"], route["min_driver"]) == ("Tile IR", "13.4", "13.4")


def test_strict_fails_an_entry_of_a_kind_not_understood(
    made: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = bytearray((made / "cubin_tile.fatbin").read_bytes())
    _, tile = fatbin.parse_container(data, 0, len(data), "x").entries
    struct.pack_into("<H", data, tile.offset, 4096)
    path = tmp_path / "strange.fatbin"
    path.write_bytes(bytes(data))
    code, out = _inspect(capsys, str(path), "--device", "9.0")
    assert code == 0, out
    assert "  kind 4096: 1 entry, 0.4 kB stored, not understood by this version of cuda-gate" in out
    code, out = _inspect(capsys, str(path), "--strict")
    assert code == ExitCode.NOT_ACCEPTED, out
    assert "fatbin entry of kind 4096 ('vector_add'): not understood" in out


@pytest.mark.parametrize(
    ("cubin", "target", "verdicts"),
    [
        (
            "vadd_sm_120.cubin",
            "sm_120a",
            {"12.0": "native", "12.1": "nothing built for this device"},
        ),
        ("cubin120.fatbin", "sm_120a", {"12.0": "native", "12.1": "nothing built for this device"}),
        ("vadd_sm_90.cubin", "sm_90a", {"9.0": "native", "12.1": "nothing built for this device"}),
    ],
)
def test_cutile_cubins_stay_arch_specific(
    made: Path,
    capsys: pytest.CaptureFixture[str],
    cubin: str,
    target: str,
    verdicts: dict[str, str],
) -> None:
    # GB10 (12.1) refuses an sm_120 cuTile cubin: tileiras writes sm_120a.
    devices = [a for cap in verdicts for a in ("--device", cap)]
    code, out = _inspect(capsys, str(made / cubin), "--names", *devices)
    assert code == 0, out
    assert f"  SASS   {target} " in out
    for cap, verdict in verdicts.items():
        assert f"  device {cap}: {verdict}" in out


@settings(max_examples=300, deadline=2000, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(at=st.integers(0, 10_000), value=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_mutated_bytecode_reads_or_fails_with_one_line(
    made: Path, at: int, value: int, cut: int
) -> None:
    data = bytearray((made / "two.tileir").read_bytes())
    data[at % len(data)] = value
    del data[max(cut % (len(data) + 1), 8) :]
    try:
        module = tileir.read(bytes(data), "two.tileir")
    except BadInputError as e:
        line = e.one_line()
    else:
        line = "two.tileir: read"
        assert len(module.kernels) <= 2
    assert line.startswith("two.tileir: ")
    assert "\n" not in line


def test_a_run_over_a_library_carrying_tile_ir_writes_a_valid_record(
    made: Path, tmp_path: Path
) -> None:
    """A host library whose .nv_fatbin holds Tile IR (and one holding only Tile IR) is gated:
    result.json and the manifest's predicate hold the TileIR entries their schemas allow, and
    the routes are worded (a Tile-IR-only library stopped the report with a schema error)."""
    import subprocess
    import sys

    (tmp_path / "e.c").write_text("int f(void) { return 1; }\n", encoding="utf-8")
    base = tmp_path / "base.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(tmp_path / "e.c"), "-o", str(base)], check=True)
    for fatbin_name, library in (("cubin_tile", "libtile.so"), ("tile_only", "libtileonly.so")):
        subprocess.run(
            ["objcopy", "--add-section", f".nv_fatbin={made / f'{fatbin_name}.fatbin'}",
             "--set-section-flags", ".nv_fatbin=alloc,readonly",
             str(base), str(tmp_path / library)],
            check=True, capture_output=True,
        )  # fmt: skip
    (tmp_path / "cuda-gate.toml").write_text(
        '[[build]]\nname = "touch"\ncommand = ["touch", "libtile.so", "libtileonly.so"]\n\n'
        '[[artifact]]\npath = "libtile.so"\n\n[[artifact]]\npath = "libtileonly.so"\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == ExitCode.NOT_ACCEPTED, out  # sm_90a only: sm_90 needs sm_90
    assert "error:" not in done.stderr, out
    record = json.loads((tmp_path / "gate-evidence" / "result.json").read_text(encoding="utf-8"))
    schema = json.loads(
        resources.files("gate.schemas").joinpath("result.schema.json").read_text(encoding="utf-8")
    )
    jsonschema.validate(record, schema)
    kinds = {
        entry["kind"]
        for artifact in record["artifacts"]
        if artifact["path"].endswith("libtileonly.so")
        for entry in artifact["listing"]["entries"]
    }
    assert kinds == {"TileIR"}
