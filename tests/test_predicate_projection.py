"""The signed predicate is a projection of the run record, and reads back as what it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.attest.manifest import build_statement, evidence_digests
from gate.attest.predicate import predicate_of, read
from gate.fsutil import FileDigest
from gate.record import load
from gate.store.records import RunIndex, RunMeta
from tests.manifest_evidence import make_evidence, sha256

pytestmark = pytest.mark.unit


def test_the_predicate_reads_back_as_the_run_record(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    record = load(ev.folder)
    digests = evidence_digests(ev.folder)
    signed = read(predicate_of(record, digests), "test")
    assert signed.run_id == record.run.run_id
    assert (signed.runner, signed.runner_class) == (record.run.runner, record.run.runner_class)
    assert (signed.revision, signed.repository) == (
        record.source.revision,
        record.source.repository,
    )
    assert signed.executions == record.executions
    assert [(c.name, c.state) for c in signed.checks] == [(c.name, c.state) for c in record.checks]
    assert signed.verdict.accepted is record.verdict.accepted
    assert signed.verdict.reasons == tuple(record.verdict.reasons)
    assert [(a.name, a.sha256) for a in signed.artifacts] == [
        (a.name, a.sha256) for a in record.artifacts
    ]
    assert signed.evidence == digests


def test_the_statement_signs_the_projection(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    record = load(ev.folder)
    digests = evidence_digests(ev.folder)
    assert build_statement(ev.folder, digests, record)["predicate"] == predicate_of(record, digests)


def test_one_file_digest_each_document_with_its_own_key(tmp_path: Path) -> None:
    ev = make_evidence(tmp_path)
    digests = evidence_digests(ev.folder)
    result = next(d for d in digests if d.name == "result.json")
    assert result == FileDigest.of_file("result.json", ev.folder / "result.json", plain=True)
    data = (ev.folder / "result.json").read_bytes()
    assert result == FileDigest.of_bytes("result.json", data)
    assert (result.sha256, result.size) == (sha256(ev.folder / "result.json"), len(data))
    assert result.to_json() == {"name": "result.json", "sha256": result.sha256, "size": len(data)}
    meta = RunMeta("acme", "kernels", "a" * 40, "runner-1", "7")
    index = RunIndex.from_json(RunIndex(meta, digests, None, "0").to_json(), "index")
    assert index.files == digests
    assert b'"path": "result.json"' in RunIndex(meta, (result,), None, "0").to_json()
