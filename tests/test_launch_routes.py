"""Routes of runtime launches named from the loaded module, and images accounted by content.

The golden records (tests/golden/launches/v2/, record format 2, written by hand) are one
process per path of a program carrying libkernels.so's device code (sm_80 and sm_120
SASS, compute_80 PTX) on an sm_120 device. Its kernels are launched with
cudaLaunchKernel, which shows CUPTI no driver launch to ask: the route comes from the
module holding the kernel. Native: the module is the embedded sm_120 cubin (its SHA-256
is that entry's). Forced JIT: the module is the JIT's output. The runtime hands the
program's own fatbin to cuLibraryLoadData (image-*-0.bin, the real .nv_fatbin of
libkernels.so); the native process also loads a foreign sm_90a cubin from memory.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from gate.evidence import EvidenceDir
from gate.launch.coverage import jit_compiled_symbols, judge
from gate.launch.log import launch_counts, read_folder, read_record
from gate.launch.routes import UNNAMED, jit_compiled, route_text
from gate.reader.elffile import ElfFile
from gate.rules.causes import ExecPath
from gate.rules.targets import Capability
from gate.scan.walk import read_paths
from tests.launch_golden import GOLDEN, RECORDS, ROOT, SM120_SASS, held, library, run_of

pytestmark = pytest.mark.unit

SCHEMA = json.loads((ROOT / "gate/schemas/launches.schema.json").read_text(encoding="utf-8"))


def test_v2_records_match_the_schema_and_kernels_take_their_modules_code() -> None:
    for record in (*RECORDS.glob("*/launches.*.json"), GOLDEN / "launches/launches.4242.json"):
        jsonschema.validate(json.loads(record.read_text(encoding="utf-8")), SCHEMA)
    native = read_record(RECORDS / "native/launches.4343.json")
    assert native.modules[0].arch == 120
    assert native.modules[0].sha256 == SM120_SASS
    twice, add_one = native.kernels
    assert (twice.binary_version, twice.module_arch, twice.module_sha256) == (None, 120, SM120_SASS)
    assert twice.ran_version == 120
    assert add_one.binary_version == 120  # the driver was asked: its word, no module needed
    assert add_one.module_arch is None
    old = read_record(GOLDEN / "launches/launches.4242.json")  # version 1 still reads
    assert old.modules[0].arch is None
    assert old.modules[0].kernels == ()
    assert old.kernels[1].module_arch is None


def test_a_v2_module_needs_its_cubin_facts(tmp_path: Path) -> None:
    doc = json.loads((RECORDS / "native/launches.4343.json").read_text(encoding="utf-8"))
    del doc["modules"][0]["sha256"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)
    bad = tmp_path / "launches.1.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    from gate.errors import BadInputError

    with pytest.raises(BadInputError, match=r"modules\[0\]: sha256 is missing"):
        read_record(bad)


def test_routes_say_sass_or_jit_output_by_the_modules_digest() -> None:
    known = held()
    (native,) = read_folder(RECORDS / "native")
    twice = native.kernels[0]
    assert route_text(twice, ExecPath.NATIVE, known) == "sm_120 SASS"
    (jit,) = read_folder(RECORDS / "jit")
    by_name = {k.name: k for k in jit.kernels}
    assert route_text(by_name["_Z5twicePi"], ExecPath.JIT, known) == (
        "JIT-compiled (sm_120) from PTX"
    )
    # On the forced-JIT path, a module that is the embedded SASS cubin is that SASS.
    embedded = replace(by_name["_Z5twicePi"], module_sha256=SM120_SASS)
    assert route_text(embedded, ExecPath.JIT, known) == "sm_120 SASS"
    # A module whose cubin could not be read names nothing: the route stays unknown.
    assert route_text(by_name["_Z7add_onePi"], ExecPath.JIT, known) == UNNAMED
    merged = launch_counts([native, jit])
    assert merged["_Z5twicePi"].count == 5
    assert merged["_Z5twicePi"].module_sha256 == SM120_SASS  # the first process's module


def test_a_kernel_ran_from_jit_output_only_where_its_route_says_so() -> None:
    known = held()
    (jit,) = read_folder(RECORDS / "jit")
    by_name = {k.name: k for k in jit.kernels}
    assert jit_compiled(by_name["_Z5twicePi"], known)  # a cubin no inspected file holds
    assert not jit_compiled(replace(by_name["_Z5twicePi"], module_sha256=SM120_SASS), known)
    assert not jit_compiled(by_name["_Z7add_onePi"], known)  # its module unread: unknown
    asked = replace(by_name["_Z7add_onePi"], binary_version=120)
    assert not jit_compiled(asked, known)  # the driver said SASS, naming no PTX
    assert jit_compiled(replace(asked, ptx_version=80), known)  # ... or from compute_80


def test_the_kernels_recorded_jit_compiled_come_from_forced_jit_runs_only(tmp_path: Path) -> None:
    evidence = EvidenceDir.create(tmp_path / "ev")
    runs = [run_of(evidence, p, b"") for p in ExecPath]
    assert jit_compiled_symbols(runs, [library()]) == {"_Z5twicePi", "_Z11write_valuePi"}
    assert jit_compiled_symbols(runs[:1], [library()]) == frozenset()  # native only


def test_coverage_names_each_runtime_launchs_code_and_the_programs_own_fatbin_is_no_module(
    tmp_path: Path,
) -> None:
    elf = ElfFile((GOLDEN / "libkernels.so").read_bytes(), "libkernels.so")
    section = elf.section(".nv_fatbin")
    assert section is not None
    fatbin = elf.data(section)  # what the runtime hands cuLibraryLoadData: the fatbin itself
    evidence = EvidenceDir.create(tmp_path / "ev")
    runs = [run_of(evidence, ExecPath.NATIVE, fatbin), run_of(evidence, ExecPath.JIT, fatbin)]
    outcome = judge(
        evidence,
        runs=runs,
        artifacts=[library()],
        capability=Capability.parse("12.0"),
        required={},
    )
    text = evidence.path("launches/coverage.txt").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines()]
    assert "3  twice(int*)  sm_120 SASS" in lines
    assert "1  add_one(int*)  sm_120 SASS" in lines  # the driver's word
    assert "2  twice(int*)  JIT-compiled (sm_120) from PTX" in lines
    assert "1  write_value(int*)  JIT-compiled (sm_120) from PTX" in lines
    assert f"1  add_one(int*)  {UNNAMED}" in lines
    native = next(c for c in outcome.checks if c.name == "libkernels.so: kernels launched [native]")
    assert "ran from sm_120 SASS: 2" in native.message
    # The program's own fatbin: accounted for by the file holding it, not a runtime module.
    (module,) = outcome.modules
    assert module.kind == "cubin"
    assert "sm_90a SASS" in module.targets()
    assert "cuModuleLoadData" in module.origin
    (accounted,) = outcome.accounted
    assert accounted.startswith("accounted for by libkernels.so: fatbin ")
    assert "from cuLibraryLoadData (an image in memory" in accounted
    assert accounted.endswith("sm_80 SASS, compute_80 PTX, sm_120 SASS")
    assert "runtime-modules" not in accounted
    kept = list(evidence.path("loaded/runtime-modules").iterdir())
    assert [p.suffix for p in kept] == [".cubin"]
    assert accounted in lines


def test_an_image_with_one_entry_no_inspected_file_holds_is_a_runtime_module() -> None:
    known = held()
    (cubin,) = read_paths([GOLDEN / "sm_90a.cubin"])
    assert known.holders(cubin.listing) == ()
    (lib,) = read_paths([GOLDEN / "libkernels.so"])
    assert known.holders(lib.listing) == ("libkernels.so",)
    mixed = replace(lib.listing, entries=(*lib.listing.entries, *cubin.listing.entries))
    assert known.holders(mixed) == ()
    undecoded = replace(lib.listing.entries[0], sha256="")  # read headers-only: no digest
    assert known.holders(replace(lib.listing, entries=(undecoded,))) == ()
