"""Differential test on real CUDA wheels from PyPI: our reading of each member against
cuobjdump's ``--list-elf``, ``--list-ptx`` and ``-symbols`` (ENTRY functions per cubin).

Our side reads the wheel itself (:func:`gate.reader.read.read_wheel`, as ``cuda-gate
inspect`` does); cuobjdump reads each member extracted to a file. Every difference is
either in :data:`EXPECTED`, with why, or fails the test; an expected difference that no
longer shows fails too (the table must say what is true). ``f`` targets are compared as
cuobjdump prints them (``sm_100f`` -> ``sm_100``; only the fatbin header records ``f``),
as the gate's own cross-check does (gate.stages.inspect.compare). The wheels are the
small ones of tests/pypi_wheels.py, downloaded once and kept.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from gate import proc
from gate.errors import ToolError
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.reader.read import PRIMARY_SECTIONS, ArtifactReport, read_wheel
from gate.rules.targets import Variant
from gate.stages.crosscheck import compare
from gate.tools import cuobjdump
from tests.cuobjdump_names import arch_of_listed_name
from tests.pypi_wheels import SMALL, Wheel, fetch, folder

pytestmark = pytest.mark.integration

# CUPTI keeps its own modules in .rodata and loads them itself (cuModuleLoadData); cuobjdump
# reads .nv_fatbin only, so it lists none of them.
_CUPTI_RODATA = ("33 entries outside .nv_fatbin (.rodata)",)
# (distribution, member) -> its differences, exactly as _differences words them.
EXPECTED: dict[tuple[str, str], tuple[str, ...]] = {
    ("nvidia-cuda-cupti", "nvidia/cu13/lib/libcupti.so.13"): _CUPTI_RODATA,
    ("nvidia-cuda-cupti", "nvidia/cu13/lib/libcheckpoint.so"): _CUPTI_RODATA,
    ("nvidia-cuda-cupti-cu12", "nvidia/cuda_cupti/lib/libcupti.so.12"): _CUPTI_RODATA,
    ("nvidia-cuda-cupti-cu12", "nvidia/cuda_cupti/lib/libcheckpoint.so"): _CUPTI_RODATA,
    # cuobjdump 13.x stops at the second cubin (sm_70) of the CUDA 12.1 build with
    # "Invalid ELF" after listing the first; the reader decodes all seven, each with the
    # 202 kernels every other CUDA build of this wheel holds (checked below). What
    # cuobjdump did list must be the start of our list.
    ("bitsandbytes", "bitsandbytes/libbitsandbytes_cuda121.so"): (
        "cuobjdump stops after 1 of 7 cubins: Invalid ELF",
    ),
}
_SUFFIXES = (".so", ".cubin", ".fatbin")


def _unavailable(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def tool() -> str:
    try:
        return cuobjdump.find()
    except ToolError as e:
        _unavailable(f"cuobjdump not found: {e.one_line()}")
        raise AssertionError from e  # unreachable: _unavailable raises


def _plain(entry: DeviceEntry) -> str:
    """The arch as cuobjdump lists it: ``sm_`` for both kinds, no ``f``."""
    target = entry.target.plain() if entry.target.variant is Variant.FAMILY else entry.target
    return str(target.as_sass())


def _run(tool: str, args: list[str], path: Path) -> str:
    return cuobjdump.run_tool(tool, args, path).stdout


def _differences(report: ArtifactReport, path: Path, tool: str) -> list[str]:
    """How our report and cuobjdump's view of the same member differ, one line each."""
    out = []
    inside = [e for e in report.listing.entries if e.section in PRIMARY_SECTIONS]
    outside = [e for e in report.listing.entries if e.section not in PRIMARY_SECTIONS]
    if outside:
        sections = ", ".join(sorted({e.section for e in outside}))
        out.append(f"{len(outside)} entries outside .nv_fatbin ({sections})")
    sass = [_plain(e) for e in inside if e.kind is Kind.SASS]
    try:
        listed = _run(tool, ["--list-elf"], path)
    except ToolError as e:
        # What it printed before it stopped must be the start of our list.
        archs = [str(arch_of_listed_name(n)) for n in _partial(tool, path)]
        assert archs == sass[: len(archs)], path
        why = e.message.split("fatal", 1)[-1].split(":", 1)[-1].strip().split(" in ")[0]
        return [*out, f"cuobjdump stops after {len(archs)} of {len(sass)} cubins: {why}"]
    elf = [str(arch_of_listed_name(n)) for n in cuobjdump.parse_list(listed, "ELF")]
    if elf != sass:
        out.append(f"--list-elf: cuobjdump {elf}, cuda-gate {sass}")
    ptx = [str(arch_of_listed_name(n).as_sass()) for n in
           cuobjdump.parse_list(_run(tool, ["--list-ptx"], path), "PTX")]  # fmt: skip
    ours_ptx = [_plain(e) for e in inside if e.kind is Kind.PTX]
    if ptx != ours_ptx:
        out.append(f"--list-ptx: cuobjdump {ptx}, cuda-gate {ours_ptx}")
    # ENTRY functions per cubin, in order, by the gate's own cross-check comparison.
    theirs = cuobjdump.listing(_run(tool, ["-symbols"], path), "")
    ours = Listing(tuple(e for e in inside if e.kind is Kind.SASS))
    out += [f"-symbols: {d}" for d in compare(ours, theirs)]
    return out


def _partial(tool: str, path: Path) -> tuple[str, ...]:
    """The cubins cuobjdump lists before a fatal error (its stdout, which run_tool drops)."""
    result = proc.run([tool, "--list-elf", str(path)], timeout=cuobjdump.TIMEOUT)
    return cuobjdump.parse_list(result.stdout, "ELF")


@pytest.mark.parametrize("wheel", SMALL, ids=lambda w: w.name)
def test_every_member_agrees_with_cuobjdump_or_is_explained(
    wheel: Wheel, tool: str, tmp_path: Path
) -> None:
    try:
        path = fetch(wheel, folder())
    except ToolError as e:
        _unavailable(f"cannot download {wheel.requirement}: {e.one_line()}")
        raise AssertionError from e
    reports = {r.path.split("!", 1)[1]: r for r in read_wheel(path, names=True)}
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    compared = 0
    with zipfile.ZipFile(path) as z:
        for member, report in reports.items():
            assert report.error is None, report.error
            if not member.endswith(_SUFFIXES) and ".so." not in member:
                continue
            extracted = Path(z.extract(member, tmp_path))
            compared += 1
            got = _differences(report, extracted, tool)
            if got:
                found[wheel.name, member] = tuple(got)
    assert compared >= 5
    assert found == {k: v for k, v in EXPECTED.items() if k[0] == wheel.name}
    if wheel.name == "bitsandbytes":  # the build cuobjdump cannot read holds what the others do
        counts = {len(e.kernels) for e in reports["bitsandbytes/libbitsandbytes_cuda121.so"]
                  .listing.entries}  # fmt: skip
        assert counts == {len(e.kernels) for e in reports["bitsandbytes/libbitsandbytes_cuda124.so"]
                          .listing.entries} == {202}  # fmt: skip
