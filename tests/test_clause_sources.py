"""Every clause of the headline and the diagnosis can be checked (issue 42, item 4).

Run records are generated over the combinations: the native run passed, failed (with
each error it can fail with), timed out or did not run; the forced-JIT run passed, failed
or did not run; a static finding (no SASS for the device, a trap stub, no PTX) or none; a
library outside the project blamed (it blocks forced JIT, or its check failed) or none;
and the program's runtime module refused or loaded on each path. Each record is written
as result.json, checked against its schema and read back; then every clause of
``verdict.clauses`` and of each diagnosis's ``clauses`` is resolved by its JSON pointer,
and its path, outcome, error code and kernel must be the record's, its words must be in
the statement or the diagnosis, and no clause says failed of a record that passed.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.config import EntryPoint
from gate.launch.coverage import RuntimeModule, module_checks
from gate.proc import Result
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.record import Artifact, Device, LoadedLibrary, RunRecord
from gate.rules.causes import Cause, ExecPath, RuntimeFailure, path_of
from gate.rules.clauses import Load
from gate.rules.kernels import readable_name
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import Check, CheckState, Stage, StageStatus
from gate.stages import predict
from gate.stages.execute import execution_check
from gate.stages.runs import Run
from tests.records import make_record

pytestmark = pytest.mark.unit

H100 = Capability(9, 0)
K = "_Z6kernelPi"
SCHEMA = json.loads(resources.files("gate").joinpath("schemas/result.schema.json").read_text())
# How each run can end: None passed, "timeout", "not run", else the failure it printed
# (its text, or "" for an exit status with no known error).
NATIVE_ENDS = ["pass", "timeout", "not run", 209, 223, 719, "exit"]
JIT_ENDS = ["pass", "not run", 209, 222, 218, "exit"]
STATIC = [None, "missing-sass", "trap", "missing-ptx"]
LIBRARY = [None, "blocks-jit", "check-fails"]
_BY_CODE = {f.code: f for f in RuntimeFailure}


def a_run(path: ExecPath, end: object) -> Run | None:
    """The run of ``app`` on ``path`` that ended as ``end`` (None: it did not run)."""
    if end == "not run":
        return None
    entry = EntryPoint("app", ("./app",), timeout=5.0)
    timed_out = end == "timeout"
    if end == "pass":
        output, rc = "PASS\n", 0
    elif isinstance(end, int):
        output, rc = f"app: CUDA error: {_BY_CODE[end].text}\n", 1
    else:
        output, rc = "app: something went wrong\n", -9 if timed_out else 3
    result = Result(("./app",), rc, output, "", 0.5, timed_out=timed_out)
    failure = _BY_CODE[end] if isinstance(end, int) else None
    return Run(entry, path, result, path.log_name, "PASS" in output, True, failure)


def own_listing(static: str | None) -> Listing:
    """The project's artifact: sm_90 SASS (sm_80 where SASS is missing) and compute_90 PTX."""
    sass = "sm_80" if static == "missing-sass" else "sm_90"
    traps = (K,) if static == "trap" else ()
    entries = [DeviceEntry(Kind.SASS, Target.parse(sass), (K,), traps=traps)]
    if static != "missing-ptx":
        entries.append(DeviceEntry(Kind.PTX, Target.parse("compute_90"), (K,), Version(9, 0)))
    return Listing(tuple(entries))


STATIC_CHECKS = {
    "missing-sass": Check("app: SASS for 9.0", "gate.inspect", CheckState.FAILED,
                          "no SASS for 9.0: sm_80 present", cause=Cause.MISSING_SASS),
    "trap": Check("app: trap stubs", "gate.inspect", CheckState.FAILED,
                  "kernel(int*): trap stub in sm_90 SASS", cause=Cause.TRAP_STUB),
    "missing-ptx": Check("app: PTX for 9.0", "gate.inspect", CheckState.FAILED,
                         "no PTX for 9.0", cause=Cause.MISSING_PTX),
}  # fmt: skip


def a_record(
    native: object,
    jit: object,
    static: str | None,
    library: str | None,
    refused: tuple[bool, bool],
) -> RunRecord:
    """The run record of one combination, built as the stages build theirs."""
    listing = own_listing(static)
    vendor = Listing((DeviceEntry(Kind.SASS, Target.parse("sm_90"), ("_Z4vendv",)),))
    sources = [predict.Source("app", listing, own=True, where="/artifacts/0")]
    if library is not None:
        sources.append(predict.Source("libv.so", vendor, own=False, where="/loaded_libraries/0"))
    prediction = predict.Prediction(
        "app",
        H100,
        tuple(sources),
        predict.expect_native(sources, H100),
        predict.expect_jit(sources, H100, Version(13, 0)),
        (),
    )
    runs = [r for r in (a_run(ExecPath.NATIVE, native), a_run(ExecPath.JIT, jit)) if r]
    checks = [STATIC_CHECKS[static]] if static is not None else []
    if library == "check-fails":
        checks.append(
            Check("loaded libv.so", "gate.execute.libraries", CheckState.FAILED,
                  "nothing runs on 9.0", cause=Cause.LOADED_LIBRARY)
        )  # fmt: skip
    proved = frozenset({"app"})
    checks += [execution_check(r, predict.excuse(r, [prediction], proved)) for r in runs]
    if runs:
        checks.append(prediction.check(runs))
    loads = tuple(
        Load(f"app [{r.path.value}]", r.path, *((223 if r.path is ExecPath.NATIVE else 222, "E")
             if refused[r.path is ExecPath.JIT] else (None, "")))
        for r in runs
    )  # fmt: skip
    if loads:
        origin = "cuModuleLoadData (an image in memory, 9 bytes)"
        kept = "loaded/runtime-modules/abab.ptx"
        module = RuntimeModule("ab" * 32, "PTX", kept, origin, listing, loads)
        checks += module_checks(module, H100)
    execute = Stage("execute", StageStatus.RAN if runs else StageStatus.SKIPPED, "no runs")
    record = make_record(checks, executions=[r.record() for r in runs], stages=(execute,))
    artifact = Artifact("app", "/p/app", "cd" * 32, 10, "ELF", "x86-64", (), listing)
    libraries = (
        (LoadedLibrary("/l/libv.so", "ef" * 32, False, ("app",), "libv", vendor, "x", True),)
        if library is not None
        else ()
    )
    return dataclasses.replace(
        record,
        device=Device(H100, None, "probe", None),
        artifacts=(artifact,),
        loaded_libraries=libraries,
        diagnoses=tuple(predict.diagnosed(runs, [prediction])),
    )


def resolve(doc: Any, pointer: str) -> Any:
    """The value at ``pointer`` (RFC 6901) in ``doc``."""
    node = doc
    for part in pointer.split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def check_clause(doc: Any, clause: dict[str, Any]) -> None:
    """The clause's path, outcome, error code and kernel are its record's."""
    source, text = clause["source"], clause["text"]
    record = resolve(doc, source)
    if clause["error"] is not None:
        assert f"error {clause['error']}" in text, clause
    if source.startswith("/executions/"):
        failure = RuntimeFailure.from_text(record["failure"])
        error = failure.code if failure is not None and not record["passed"] else None
        said = "passed" if record["passed"] else "failed"
        assert (clause["path"], clause["state"], clause["error"]) == (record["path"], said, error)
    elif source.startswith("/checks/"):
        cause = Cause(record["cause"]) if record["cause"] else None
        side = record["path"] or (p.value if (p := path_of(cause)) else None)
        assert (clause["path"], clause["state"], clause["error"]) == (
            side,
            record["state"],
            record["error"],
        ), (clause, record)
        assert f"{record['name']}: {record['message']}" in text
    elif source.startswith("/stages/"):
        state = {"failed": "failed", "skipped": "not-run"}[record["status"]]
        assert clause["state"] == state
        assert record["detail"] in text
    elif source == "/executions":
        assert clause["state"] == "not-run"
        assert len({e["path"] for e in record}) < 2  # some path did not run
    elif "/listing/entries/" in source:
        assert clause["kernel"] in record["kernels"]
        assert readable_name(clause["kernel"]) in text
    elif source.endswith("/listing"):
        owner = resolve(doc, source.removesuffix("/listing"))
        assert text.startswith(owner.get("name") or owner["path"].rsplit("/", 1)[-1])
    elif source == "/device/capability":
        assert text == f"device {record}"
    else:
        assert source in ("/artifacts", "/loaded_libraries"), source
    if clause["kernel"] is None and "/listing/entries/" not in source:
        assert clause["path"] is None or source.startswith(("/executions/", "/checks/"))
    # No clause says failed (or not run) of a path whose record passed, nor passed of one
    # that failed.
    if clause["state"] is not None and source.startswith(("/executions/", "/checks/")):
        passed = (
            record["passed"] if source.startswith("/executions/") else (record["state"] == "passed")
        )
        assert (clause["state"] == "passed") == passed, (clause, record)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(
    native=st.sampled_from(NATIVE_ENDS),
    jit=st.sampled_from(JIT_ENDS),
    static=st.sampled_from(STATIC),
    library=st.sampled_from(LIBRARY),
    refused=st.tuples(st.booleans(), st.booleans()),
)
def test_every_clause_names_its_record_and_says_what_it_holds(
    native: object,
    jit: object,
    static: str | None,
    library: str | None,
    refused: tuple[bool, bool],
) -> None:
    record = a_record(native, jit, static, library, refused)
    doc = json.loads(record.dumps())
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    again = RunRecord.from_json(doc, "result.json")
    assert again.diagnoses == record.diagnoses
    verdict = doc["verdict"]
    if verdict["accepted"]:
        assert verdict["clauses"] == []
    else:
        said = "; ".join(c["text"] for c in verdict["clauses"])
        assert verdict["statement"] == f"not accepted: {said}"
    for clause in verdict["clauses"]:
        check_clause(doc, clause)
        assert clause["state"] != "passed"  # the headline says what stopped the run
    for diagnosis in doc["diagnoses"]:
        paths = [c["path"] for c in diagnosis["clauses"] if c["path"] is not None]
        assert paths == ["native", "jit"]  # each path said once, by its own run
        for clause in diagnosis["clauses"]:
            check_clause(doc, clause)
            assert clause["text"] in diagnosis["text"]
