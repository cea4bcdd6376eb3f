"""The run as a standard in-toto test-result attestation, beside the gate's own manifest.

Our manifest's predicate (``https://cuda-gate.dev/attestation/gate-run/v1``) holds all the
evidence, but only cuda-gate understands it. The in-toto Test Result predicate
(https://github.com/in-toto/attestation/blob/main/spec/predicates/test-result.md,
type :data:`PREDICATE_TYPE`, version 0.1) is what policy engines and in-toto test-result
consumers read; this module maps a run onto it:

* ``subject``: the final artifacts with their SHA-256, the same subjects as the manifest
  (or, when the run named no artifact, the source commit as a ``gitCommit`` digest; with
  neither there is nothing to attest, and no test-result Statement is written);
* ``result``: agrees with the verdict (gate.rules.verdict.attestation_result):
  ``PASSED`` when it accepted the run and no check warned, ``WARNED`` when it accepted
  with a warned check, ``FAILED`` when it did not accept it;
* ``passedTests`` / ``warnedTests`` / ``failedTests``: every check in exactly one list, by
  its JUnit identity (``<runner class>.<classname>::<name>``, as in ``junit.xml``) and its
  state (gate.rules.verdict.attestation_list): passed, warned (ran, accepted with a
  caveat), or failed (failed, or did not run: a check that did not run is never listed
  as passed or warned, so the spec's policy "every test for device A is in passedTests
  or warnedTests" refuses a run that never executed anything);
* ``configuration``: resource descriptors with digests for the run record
  (``result.json``), the gate's manifest (``manifest.json``, all the evidence) and the
  project configuration file when one was used. The run record's descriptor carries,
  as annotations (schema :data:`ANNOTATIONS_SCHEMA`, ``gate/schemas/``), where the
  checks ran: ``runnerEnvironment`` (``self-hosted`` or ``github-hosted``, as the
  Actions runner says; gate.system.ci.runner_environment), ``runnerClass``, ``runner`` (the
  runner's name), ``runId`` and ``cudaGateVersion``. A GitHub artifact attestation's
  Sigstore certificate names the runner of the job that *signed* it (a GitHub-hosted
  control job, never the GPU runner, which holds no OIDC token): so
  ``gh attestation verify --deny-self-hosted-runners`` passes even though the tests
  ran on a self-hosted GPU runner, and this annotation is where that is said;
* ``url``: the GitHub Actions run, when the gate ran in one.

``test-result.json`` is the Statement; ``test-result.dsse.json`` is the same bytes in a
DSSE envelope signed like ``manifest.dsse.json``. Both are written by the manifest step
(:func:`gate.attest.manifest.write_manifest`), after the manifest.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gate.errors import EvidenceError
from gate.fsutil import sha256_file
from gate.record import RESULT_FILE, RunRecord
from gate.render.junit import DEFAULT_CLASS, classname_of
from gate.rules.verdict import (
    FAILED_TESTS,
    PASSED_TESTS,
    WARNED_TESTS,
    attestation_list,
    attestation_result,
)
from gate.system import ci

PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
# The $id of gate/schemas/test-result-predicate.schema.json: the annotations' layout.
ANNOTATIONS_SCHEMA = "https://cuda-gate.dev/schemas/test-result-predicate/v1"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


def check_id(runner_class: str | None, classname: str, name: str) -> str:
    """A check's name in the attestation: its JUnit classname and name."""
    return f"{classname_of(classname, runner_class or DEFAULT_CLASS)}::{name}"


def build_test_result(
    record: RunRecord,
    subjects: Sequence[Mapping[str, Any]],
    evidence_dir: Path,
    *,
    manifest: Path | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """The test-result Statement for ``record``, or None when it would name no subject.

    ``subjects`` are the manifest's (name + sha256 of each final artifact).
    """
    subject = [dict(s) for s in subjects] or _source_subject(record)
    if not subject:
        return None
    env = os.environ if environ is None else environ
    runner_class = record.run.runner_class
    lists: dict[str, list[str]] = {PASSED_TESTS: [], WARNED_TESTS: [], FAILED_TESTS: []}
    for c in record.checks:
        lists[attestation_list(c.state)].append(check_id(runner_class, c.classname, c.name))
    verdict = record.verdict
    if not verdict.accepted and not lists[FAILED_TESTS]:
        # Not accepted with no failed check: a stage stopped before any check could say so.
        lists[FAILED_TESTS].append(check_id(runner_class, "gate", "verdict"))
    predicate: dict[str, Any] = {
        "result": attestation_result(verdict, [c.state for c in record.checks]),
        "configuration": _configuration(
            record, evidence_dir, manifest, config_file, ci.runner_environment(env)
        ),
        **lists,
    }
    url = ci.run_url(env)
    if url:
        predicate["url"] = url
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def _configuration(
    record: RunRecord,
    evidence_dir: Path,
    manifest: Path | None,
    config_file: Path | None,
    runner_environment: str,
) -> list[dict[str, Any]]:
    """Resource descriptors (name, sha256, media type) of what configured and recorded the run."""
    run = {
        "schema": ANNOTATIONS_SCHEMA,
        "runnerEnvironment": runner_environment,
        "runnerClass": record.run.runner_class or DEFAULT_CLASS,
        "runner": record.run.runner,
        "runId": record.run.run_id,
        "cudaGateVersion": record.tool_version,
    }
    found = [_descriptor(evidence_dir / RESULT_FILE, RESULT_FILE, "application/json", run)]
    if manifest is not None:
        found.append(_descriptor(manifest, manifest.name, "application/vnd.in-toto+json"))
    if config_file is not None:
        media = "application/toml" if config_file.suffix == ".toml" else "text/plain"
        found.append(_descriptor(config_file, _shown(config_file), media))
    return found


def _shown(path: Path) -> str:
    """A path as the descriptor names it: relative to the working folder when inside it."""
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        return path.relative_to(Path.cwd()).as_posix()
    return path.as_posix()


def _descriptor(
    path: Path, name: str, media_type: str, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    try:
        digest = sha256_file(path)
    except OSError as e:
        raise EvidenceError(f"{path}: cannot read for the test-result attestation: {e}") from e
    found: dict[str, Any] = {"name": name, "digest": {"sha256": digest}, "mediaType": media_type}
    if annotations:
        found["annotations"] = dict(annotations)
    return found


def _source_subject(record: RunRecord) -> list[dict[str, Any]]:
    """The source commit as the subject, for a run that named no final artifact (or none)."""
    revision = record.source.revision
    if not revision:
        return []
    return [{"name": record.source.repository or "source", "digest": {"gitCommit": revision}}]
