"""The golden launch records (tests/golden/launches/v2/) placed as runs, and the library
they were recorded against: shared by the tests of routes, coverage and the launch summary."""

from __future__ import annotations

import shutil
from pathlib import Path

from gate.config import EntryPoint
from gate.evidence import EvidenceDir
from gate.launch.log import read_folder
from gate.launch.routes import Held
from gate.proc import Result
from gate.reader.hostelf import HostFormat
from gate.rules.causes import ExecPath
from gate.scan.walk import read_paths
from gate.stages.inspected import Inspected
from gate.stages.runs import Run

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests/golden"
RECORDS = GOLDEN / "launches/v2"
SM120_SASS = "b0fc75ceb1979707cc602c6c85fa91debef8017ac01f41d63a02233614535f90"


def library() -> Inspected:
    (report,) = read_paths([GOLDEN / "libkernels.so"])
    host = HostFormat("ELF 64-bit", 64, 62, "x86-64", "shared object", None, (), (), ())
    path = GOLDEN / "libkernels.so"
    return Inspected("libkernels.so", path, "f" * 64, 1, host, (), report.listing, (), False, "")


def held() -> Held:
    lib = library()
    return Held.of([(lib.name, lib.listing)])


def run_of(evidence: EvidenceDir, path: ExecPath, fatbin: bytes) -> Run:
    """The golden record of ``path`` placed in the evidence with the images it names."""
    folder = f"launches/app.{path.value}"
    where = evidence.path(folder)
    where.mkdir(parents=True)
    (record_file,) = (RECORDS / path.value).glob("launches.*.json")
    shutil.copy(record_file, where / record_file.name)
    pid = record_file.name.split(".")[1]
    (where / f"image-{pid}-0.bin").write_bytes(fatbin)
    if path is ExecPath.NATIVE:
        shutil.copy(GOLDEN / "sm_90a.cubin", where / f"image-{pid}-1.bin")
    result = Result(("./app",), 0, "PASS\n", "", 0.1)
    entry = EntryPoint("app", ("./app",))
    return Run(entry, path, result, "x.log", True, True, None, (), read_folder(where), folder)
