"""Real nvcc builds of several gencode variants, inspected with real cuobjdump.

What the gate's inspection says about each must match what the build asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gate.audit.artifact import phrase
from gate.evidence import EvidenceDir
from gate.reader.listing import Kind
from gate.rules.hosts import HostRule
from gate.rules.require import Requirement
from gate.rules.routes import Path as Route
from gate.rules.targets import Capability, Target
from gate.rules.verdict import Check
from gate.stages import build
from gate.stages import inspect as inspection
from gate.system import machine as environment

pytestmark = pytest.mark.integration

T = Target.parse
SM90 = Requirement.of_target(T("sm_90"))
Builder = Callable[[str, tuple[str, ...], tuple[str, ...]], inspection.Inspected]


@pytest.fixture(scope="module")
def build_and_inspect(tmp_path_factory: pytest.TempPathFactory) -> Builder:
    nvcc = environment.nvcc_path()
    cache: dict[str, inspection.Inspected] = {}

    def make(name: str, sass: tuple[str, ...], ptx: tuple[str, ...]) -> inspection.Inspected:
        if name not in cache:
            work = tmp_path_factory.mktemp(name)
            output, result = build.build_smoke(
                nvcc, work, [T(s) for s in sass], [T(p) for p in ptx]
            )
            assert result.ok, result.output()
            ev = EvidenceDir.create(work / "evidence")
            cache[name] = inspection.inspect_artifact(output, ev)
        return cache[name]

    return make


def failed(found: list[Check]) -> set[str]:
    return {c.name.split(": ", 1)[1] for c in found if not c.ok}


def test_sass_and_ptx_build_passes_every_check(build_and_inspect: Builder) -> None:
    art = build_and_inspect("full", ("sm_90",), ("compute_90",))
    found = inspection.listing_checks(art.name, art.listing, SM90, ("write_value",))
    assert failed(found) == set()
    # nvcc 13 adds a kernel-less device-link stub per arch: two cubins, one kernel.
    assert len(art.listing.of_kind(Kind.SASS)) == 2
    assert sum(1 for e in art.listing.of_kind(Kind.SASS) if e.kernels) == 1
    assert art.host.description.startswith("smoke: ELF 64-bit LSB pie executable")


def test_sass_only_build_fails_the_ptx_checks(build_and_inspect: Builder) -> None:
    art = build_and_inspect("sass-only", ("sm_90",), ())
    found = inspection.listing_checks(art.name, art.listing, SM90, ("write_value",))
    assert failed(found) == {"PTX for compute_90", "kernel write_value in compute_90 PTX"}
    assert art.listing.predict(Capability(9, 0)).native


def test_ptx_only_build_fails_the_sass_checks(build_and_inspect: Builder) -> None:
    art = build_and_inspect("ptx-only", (), ("compute_90",))
    found = inspection.listing_checks(art.name, art.listing, SM90, ("write_value",))
    assert failed(found) == {"SASS for sm_90", "kernel write_value in sm_90 SASS"}
    prediction = art.listing.predict(Capability(9, 0))
    assert not prediction.native
    assert phrase(prediction) == "runs only through PTX JIT"


def test_multi_arch_build_routes_per_device(build_and_inspect: Builder) -> None:
    art = build_and_inspect("multi", ("sm_80", "sm_90"), ("compute_90",))
    assert art.listing.targets(Kind.SASS) == (T("sm_80"), T("sm_90"))
    routes = {
        cap: art.listing.predict(Capability.parse(cap)).kernels[0].route.path
        for cap in ("8.0", "8.6", "9.0", "12.1")
    }
    assert routes == {
        "8.0": Route.EXACT_SASS,
        "8.6": Route.COMPATIBLE_SASS,
        "9.0": Route.EXACT_SASS,
        "12.1": Route.PTX_JIT,
    }


def test_arch_specific_build_serves_only_its_device(build_and_inspect: Builder) -> None:
    art = build_and_inspect("arch-a", ("sm_90a",), ())
    assert art.listing.predict(Capability(9, 0)).native
    # cuobjdump prints sm_90a; a 10.0 device gets nothing from it: it was built for 9.0 only.
    assert art.listing.predict(Capability(10, 0)).kernels[0].route.path is Route.OTHER_DEVICES


def test_foreign_target_build_has_nothing_for_this_device(build_and_inspect: Builder) -> None:
    art = build_and_inspect("foreign", ("sm_120",), ("compute_120",))
    found = inspection.listing_checks(art.name, art.listing, SM90, ("write_value",))
    assert len(failed(found)) == 4
    assert phrase(art.listing.predict(Capability(9, 0))) == "no code for its 1 kernel"


def test_evidence_holds_the_listings(build_and_inspect: Builder) -> None:
    art = build_and_inspect("full", ("sm_90",), ("compute_90",))
    ev = art.path.parent / "evidence"
    assert "smoke.1.sm_90.cubin" in (ev / "elf-list.txt").read_text(encoding="utf-8")
    assert "Function : _Z11write_valuePi" in (ev / "sass.txt").read_text(encoding="utf-8")
    content = inspection.content_checks(art, EvidenceDir(ev))
    assert all(c.ok for c in content), [c.message for c in content if not c.ok]
    assert inspection.host_check(art, HostRule("x86_64", "this host")).ok
    spark = HostRule("aarch64", "12.1 devices ship on aarch64 hosts only (GB10)")
    wrong = inspection.host_check(art, spark)
    assert not wrong.ok
    assert wrong.message == (
        "x86-64 does not run on aarch64 (12.1 devices ship on aarch64 hosts only (GB10))"
    )
    assert wrong.remedy == "build on (or cross-compile for) aarch64, the device host's machine"
    # A configuration that contradicts the device: the message says so, no remedy guesses.
    conflict = HostRule("x86_64", "the config's host", "the config says host x86_64, but ...")
    assert inspection.host_check(art, conflict).remedy is None
    assert inspection.host_check(art, HostRule("x86_64", "this host")).remedy is None


def test_a_sass_dump_without_sass_is_not_a_sass_dump(build_and_inspect: Builder) -> None:
    # cuobjdump --dump-sass of a PTX-only artifact prints only "Fatbin ptx code" headers.
    art = build_and_inspect("ptx-only", (), ("compute_90",))
    ev = EvidenceDir(art.path.parent / "evidence")
    assert "Fatbin ptx code" in ev.path("sass.txt").read_text(encoding="utf-8")
    found = {c.name: c for c in inspection.content_checks(art, ev)}
    assert not found["smoke: SASS dump holds SASS"].ok
    assert not found["smoke: ELF listing lists a cubin"].ok
    assert found["smoke: PTX dump holds PTX"].ok


def test_empty_listing_is_a_failure(tmp_path: Path, build_and_inspect: Builder) -> None:
    art = build_and_inspect("full", ("sm_90",), ("compute_90",))
    ev = EvidenceDir.create(tmp_path / "ev")
    ev.write_text("elf-list.txt", "")
    ev.write_text("ptx.txt", "cuobjdump info    : File 'x' does not contain device code\n")
    found = inspection.content_checks(art, ev)
    assert {c.name for c in found if not c.ok} == {
        "smoke: ELF listing lists a cubin",
        "smoke: PTX dump holds PTX",
    }


def test_a_missing_kernel_is_named_as_cxx_spells_it() -> None:
    from gate.reader.listing import DeviceEntry, Listing
    from gate.rules.targets import Version

    listing = Listing(
        (
            DeviceEntry(Kind.SASS, T("sm_90"), ("_Z11write_valuePi",)),
            DeviceEntry(Kind.PTX, T("compute_90"), (), ptx_isa=Version(9, 0)),
        )
    )
    check = inspection.coverage_check("libk.so", listing)
    assert not check.ok
    assert check.message == "write_value(int*) missing from compute_90"
