"""An entry point's diagnosis and the records behind it: each part of the code summary it
says comes with a clause naming its listing, and a trap stub is named from the listing
entry whose SASS holds it. Written to kill the mutants of gate.stages.predict's
``_paths_diagnosis`` and ``_entry_of`` that benchmarks/MUTATION.md reported."""

from __future__ import annotations

import pytest

from gate.config import EntryPoint
from gate.proc import Result
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.causes import ExecPath, RuntimeFailure
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import Diagnosed
from gate.stages import predict
from gate.stages.runs import Run

pytestmark = pytest.mark.unit

H100 = Capability(9, 0)
K = "_Z6kernelPi"
OWN = "/artifacts/0/listing"


def a_run(path: ExecPath, failure: RuntimeFailure | None) -> Run:
    """``app`` run on ``path``: passed, or failed printing ``failure``."""
    entry = EntryPoint("app", ("./app",), timeout=5.0)
    output, rc = ("PASS\n", 0) if failure is None else (f"app: CUDA error: {failure.text}\n", 1)
    result = Result(("./app",), rc, output, "", 0.5)
    return Run(entry, path, result, path.log_name, failure is None, True, failure)


def diagnosed(
    own: Listing,
    native: RuntimeFailure | None,
    jit: RuntimeFailure | None,
    vendor: Listing | None = None,
) -> Diagnosed:
    """The one diagnosis of ``app`` on an H100 with driver 13.0."""
    sources = [predict.Source("app", own, own=True, where="/artifacts/0")]
    if vendor is not None:
        sources.append(predict.Source("libv.so", vendor, own=False, where="/loaded_libraries/0"))
    prediction = predict.Prediction(
        "app",
        H100,
        tuple(sources),
        predict.expect_native(sources, H100),
        predict.expect_jit(sources, H100, Version(13, 0)),
        (),
    )
    runs = [a_run(ExecPath.NATIVE, native), a_run(ExecPath.JIT, jit)]
    (found,) = predict.diagnosed(runs, [prediction])
    return found


def sass(target: str, traps: tuple[str, ...] = ()) -> DeviceEntry:
    return DeviceEntry(Kind.SASS, Target.parse(target), (K,), traps=traps)


PTX_90 = DeviceEntry(Kind.PTX, Target.parse("compute_90"), (K,), Version(9, 0))
APP = Listing((sass("sm_90"), PTX_90))


def test_a_failing_jit_path_names_the_project_s_listing() -> None:
    found = diagnosed(APP, None, RuntimeFailure.UNSUPPORTED_PTX)
    sources = [c.source for c in found.clauses]
    assert sources == ["/executions/0", "/executions/1", OWN]
    assert all(c.text in found.text for c in found.clauses)


def test_a_jit_path_blocked_by_a_library_names_both_listings() -> None:
    vendor = Listing((DeviceEntry(Kind.SASS, Target.parse("sm_90"), ("_Z4vendv",)),))
    found = diagnosed(APP, None, RuntimeFailure.NO_KERNEL_IMAGE, vendor)
    sources = [c.source for c in found.clauses]
    assert sources[:3] == ["/executions/0", "/executions/1", OWN]
    assert sources[3:] == ["/loaded_libraries"]  # the library with code for 9.0, counted
    assert all(c.text in found.text for c in found.clauses)


def test_a_trap_stub_is_named_from_the_entry_that_traps() -> None:
    # sm_80's SASS comes first and holds the kernel whole; sm_90's, which 9.0 runs, traps.
    own = Listing((sass("sm_80"), sass("sm_90", traps=(K,)), PTX_90))
    found = diagnosed(own, RuntimeFailure.LAUNCH_FAILED, None)
    (stub,) = [c for c in found.clauses if c.kernel == K]
    assert stub.source == f"{OWN}/entries/1"
    assert "(sm_90 SASS)" in stub.text
