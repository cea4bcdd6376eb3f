"""A real relink: the same objects linked again under the same file name is a changed artifact.

The seed: "any subsequent relinking requires a new acceptance test". Built with the
real nvcc from the shipped check.cu; the manifest is written over the first link and
verify must reject the second.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gate import proc
from gate.attest.manifest import ENVELOPE_FILE, write_manifest
from gate.attest.signing import generate_key_pair, signer_from_pem
from gate.attest.verify import verify
from gate.errors import ArtifactChangedError
from gate.guard.redact import Redactor
from gate.tools.programs import cuda_source
from tests.manifest_evidence import make_evidence, matching_machine, sha256

pytestmark = pytest.mark.integration


def _nvcc() -> str:
    found = shutil.which("nvcc")
    if found is None:
        pytest.skip("nvcc not on PATH")
    return found


def test_relinked_smoke_program_is_reported_changed(tmp_path: Path) -> None:
    nvcc = _nvcc()
    work = tmp_path / "build"
    work.mkdir()
    (work / "check.cu").write_text(cuda_source("smoke.cu"))
    gencode = ["-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
    proc.run_checked([nvcc, "-c", *gencode, "check.cu", "-o", "check.o"], cwd=work)
    proc.run_checked([nvcc, *gencode, "check.o", "-o", "check"], cwd=work)

    # Evidence recording the first link as the artifact "check".
    ev = make_evidence(tmp_path / "run", environ={})
    record = json.loads((ev.folder / "result.json").read_text())
    record["artifacts"] = [
        dict(
            record["artifacts"][0],
            path=str(work / "check"),
            sha256=sha256(work / "check"),
            size=(work / "check").stat().st_size,
        )
    ]
    (ev.folder / "result.json").write_text(json.dumps(record))
    pair = generate_key_pair()
    write_manifest(ev.folder, signer_from_pem(pair.private_pem, "test"), redactor=Redactor())
    key = signer_from_pem(pair.private_pem, "test").public_key()
    envelope = ev.folder / ENVELOPE_FILE
    assert verify(envelope, key, machine=matching_machine()).ok

    # Same objects, same output name, one more linker option.
    first = sha256(work / "check")
    proc.run_checked([nvcc, *gencode, "check.o", "-o", "check", "-Xlinker", "-znow"], cwd=work)
    assert sha256(work / "check") != first
    result = verify(envelope, key, machine=matching_machine())
    error = result.first_error()
    assert isinstance(error, ArtifactChangedError)
    assert f"{work / 'check'}: sha256 " in error.one_line()
