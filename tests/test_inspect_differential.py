"""Differential tests: our reader's listing equals cuobjdump's on nvcc-built artifacts.

Kinds, archs, order and kernel names must match; ``f`` (which only the fatbin header
records) is compared without its suffix. Builds are few and shared by the session.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gate import proc
from gate.errors import ToolError
from gate.reader.listing import DeviceEntry, Kind
from gate.reader.read import ArtifactReport, read_archive, read_artifact
from gate.rules.targets import Target, Variant
from gate.tools import cuobjdump
from tests.cuobjdump_names import arch_of_listed_name

pytestmark = pytest.mark.integration

SOURCE = """
__device__ int helper(int x) { return x * 2; }
__global__ void write_value(int *p) { *p = 42; }
__global__ void add_one(int *p) { *p += 1; }
__global__ void twice(int *p) { *p = helper(*p); }
"""
SECOND = """
extern __device__ int helper(int x);
__global__ void from_second(int *p) { *p = helper(7); }
int main() { return 0; }
"""
MAIN = "int main() { return 0; }\n"
MULTI = [
    "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
    "-gencode", "arch=compute_100a,code=[sm_100a,compute_100a]",
    "-gencode", "arch=compute_120f,code=sm_120f",
]  # fmt: skip
ONE = ["-gencode", "arch=compute_90,code=[sm_90,compute_90]"]

# name -> (nvcc arguments after the sources, output file name, source files)
CASES: dict[str, tuple[list[str], str, tuple[str, ...]]] = {
    "multi-arch-a-f": ([*MULTI], "multi", ("k.cu", "main.cu")),
    "ptx-only": (["-gencode", "arch=compute_90,code=compute_90"], "ptx_only", ("k.cu", "main.cu")),
    "sass-only": (["-gencode", "arch=compute_80,code=sm_80"], "sass_only", ("k.cu", "main.cu")),
    "rdc": (["-rdc=true", *ONE], "rdc", ("k.cu", "second.cu")),
    "shared": (["-shared", "-Xcompiler", "-fPIC", *ONE], "libk.so", ("k.cu",)),
    "static": (["-lib", *ONE], "libk.a", ("k.cu", "second_lib.cu")),
    "debug-G": (["-G", *ONE], "debug", ("k.cu", "main.cu")),
    **{
        f"compress-{mode}": ([f"--compress-mode={mode}", *ONE], f"c_{mode}", ("k.cu", "main.cu"))
        for mode in ("size", "speed", "balance", "none")
    },
}


@pytest.fixture(scope="session")
def tools() -> tuple[str, str]:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH: the differential suite needs it")
    try:
        return nvcc, cuobjdump.find()
    except ToolError as e:
        pytest.skip(f"cuobjdump not found: {e.one_line()}")


@pytest.fixture(scope="session")
def built(
    tools: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Path]:
    """Build a case on first use, once per session."""
    folder = tmp_path_factory.mktemp("differential")
    (folder / "k.cu").write_text(SOURCE)
    (folder / "main.cu").write_text(MAIN)
    (folder / "second.cu").write_text(SECOND)
    (folder / "second_lib.cu").write_text("__global__ void lib_only(int *p) { *p = 3; }\n")
    cache: dict[str, Path] = {}

    def build(case: str) -> Path:
        if case not in cache:
            args, output, sources = CASES[case]
            proc.run_checked(
                [tools[0], *sources, *args, "-o", output], what=f"nvcc ({case})", cwd=folder
            )
            cache[case] = folder / output
        return cache[case]

    return build


def _plain(target: Target) -> str:
    """cuobjdump's name for a target: ``sm_`` prefix, no ``f``."""
    variant = Variant.NONE if target.variant is Variant.FAMILY else target.variant
    return str(Target(target.major, target.minor, variant, virtual=False))


def _ours(path: Path) -> list[DeviceEntry]:
    reports: tuple[ArtifactReport, ...]
    if path.suffix == ".a":
        reports = read_archive(path, scan=False)
    else:
        reports = (read_artifact(path, scan=False),)
    assert all(r.error is None for r in reports)
    return [e for r in reports for e in r.listing.entries]


def _theirs(tool: str, path: Path, *args: str) -> str:
    return cuobjdump.run_tool(tool, list(args), path).stdout


@pytest.mark.parametrize("case", sorted(CASES))
def test_listing_equals_cuobjdump(
    case: str, built: Callable[[str], Path], tools: tuple[str, str]
) -> None:
    path, tool = built(case), tools[1]
    ours = _ours(path)
    sass = [e for e in ours if e.kind is Kind.SASS]
    ptx = [e for e in ours if e.kind is Kind.PTX]
    listed = _theirs(tool, path, "--list-elf") + _theirs(tool, path, "--list-ptx")
    elf_names = cuobjdump.parse_list(listed, "ELF")
    ptx_names = cuobjdump.parse_list(listed, "PTX")
    assert [_plain(e.target) for e in sass] == [str(arch_of_listed_name(n)) for n in elf_names]
    assert [_plain(e.target) for e in ptx] == [str(arch_of_listed_name(n)) for n in ptx_names]
    symbols = cuobjdump.parse_symbols(_theirs(tool, path, "-symbols"))
    assert [(_plain(t), sorted(k)) for t, k in symbols] == [
        (_plain(e.target), sorted(e.kernels)) for e in sass
    ]
    modules = cuobjdump.parse_ptx_dump(_theirs(tool, path, "--dump-ptx"))
    assert [sorted(m.entries) for m in modules] == [sorted(e.kernels) for e in ptx]
    assert [m.version for m in modules] == [str(e.ptx_isa) for e in ptx]


def test_cases_cover_what_the_issue_asks(built: Callable[[str], Path]) -> None:
    multi = _ours(built("multi-arch-a-f"))
    assert {str(e.target) for e in multi} >= {"sm_90", "sm_100a", "sm_120f", "compute_100a"}
    assert {e.kind for e in _ours(built("ptx-only"))} == {Kind.PTX}
    assert {e.kind for e in _ours(built("sass-only"))} == {Kind.SASS}
    assert all(e.debug and e.compression == "zstd" for e in _ours(built("debug-G")))
    assert {e.compression for e in _ours(built("compress-speed"))} == {"lz4", "none"}
    assert {e.compression for e in _ours(built("compress-size"))} == {"zstd"}
    assert {e.compression for e in _ours(built("compress-none"))} == {"none"}
    rdc = read_artifact(built("rdc"), scan=False)
    assert "_Z11from_secondPi" in rdc.listing.kernels()
