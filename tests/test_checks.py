"""Checks, verdict, predictions and diagnosis: what a release engineer relies on the gate to say."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.config import EntryPoint
from gate.errors import ExitCode
from gate.proc import Result
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.record import Execution
from gate.rules.causes import Cause, ExecPath, RuntimeFailure, classify
from gate.rules.require import Requirement
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import ACCEPTED_STATEMENT, Check, CheckState, Stage, StageStatus, decide
from gate.stages import predict
from gate.stages.artifactchecks import listing_checks
from gate.stages.runs import Run

pytestmark = pytest.mark.unit

H200 = Capability(9, 0)
KERNEL = "_Z11write_valuePi"
CUDA13 = Version(13, 0)


def listing(
    *, sass: tuple[str, ...] = ("sm_90",), ptx: tuple[str, ...] = ("compute_90",)
) -> Listing:
    entries = [DeviceEntry(Kind.SASS, Target.parse(s), ()) for s in sass]  # dlink stubs
    entries += [DeviceEntry(Kind.SASS, Target.parse(s), (KERNEL,)) for s in sass]
    entries += [
        DeviceEntry(Kind.PTX, Target.parse(p), (KERNEL,), ptx_isa=Version(9, 0)) for p in ptx
    ]
    return Listing(tuple(entries))


def run(path: ExecPath, rc: int, output: str, name: str = "smoke") -> Run:
    entry = EntryPoint(name, ("./smoke",))
    result = Result(("./smoke",), rc, output, "", 0.1)
    return Run(
        entry,
        path,
        result,
        path.log_name,
        "PASS" in output,
        True,
        None if rc == 0 else classify(output),
    )


def ok(path: ExecPath) -> Run:
    return run(path, 0, "PASS\n")


NO_IMAGE = "no kernel image is available for execution on the device\n"
JIT_OFF = "PTX JIT compilation was disabled\n"


def failing(checks_: list[Check]) -> list[str]:
    return [c.name for c in checks_ if not c.ok]


SM90 = Requirement.of_target(Target.parse("sm_90"))


def test_full_build_passes_every_listing_check() -> None:
    result = listing_checks("smoke", listing(), SM90, ("write_value",))
    assert len(result) == 4
    assert failing(result) == []
    assert "write_value present in sm_90 SASS as write_value(int*)" in [c.message for c in result]


def test_ptx_only_build_fails_the_sass_checks_and_names_what_is_there() -> None:
    result = listing_checks("smoke", listing(sass=()), SM90, ("write_value",))
    # The target's check fails, once; its kernels are not looked for in code not there.
    assert [c.name for c in result if c.failed] == ["smoke: SASS for sm_90"]
    assert "SASS targets: none" in result[0].message
    assert result[0].cause is Cause.MISSING_SASS
    assert result[1].name == "smoke: kernel write_value in sm_90 SASS"
    assert (result[1].state, result[1].cause) == (CheckState.NOT_RUN, None)
    assert result[1].message == "not looked for: no sm_90 SASS at all"


def test_foreign_target_is_missing_not_substituted() -> None:
    result = listing_checks(
        "smoke", listing(sass=("sm_80",), ptx=("compute_80",)), SM90, ("write_value",)
    )
    assert result[0].message == "no SASS for sm_90 (needs sm_90); SASS targets: sm_80"
    assert len(failing(result)) == 4


def test_missing_kernel_is_reported_per_target() -> None:
    lst = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), ("_Z5otherv",)),
            DeviceEntry(Kind.PTX, Target.parse("compute_90"), (KERNEL,)),
        )
    )
    result = listing_checks("lib", lst, SM90, ("write_value",))
    assert failing(result) == ["lib: kernel write_value in sm_90 SASS"]


def execution(path: ExecPath) -> tuple[str, ExecPath]:
    return ("smoke", path)


BOTH = (execution(ExecPath.NATIVE), execution(ExecPath.JIT))


def test_verdict_needs_execution_evidence() -> None:
    v = decide((), [Check("a", "gate.inspect", CheckState.PASSED, "ok")], ())
    assert not v.accepted
    assert v.statement == "not accepted: execution not verified"
    assert v.exit_code is ExitCode.NOT_ACCEPTED


def test_verdict_accepts_only_with_all_checks_and_execution() -> None:
    v = decide((), [Check("a", "gate.inspect", CheckState.PASSED, "ok")], BOTH)
    assert v.accepted
    assert v.statement == ACCEPTED_STATEMENT
    bad = decide((), [Check("a", "gate.inspect", CheckState.FAILED, "broken")], BOTH)
    assert bad.statement == "not accepted: a: broken"
    assert bad.exit_code is ExitCode.NOT_ACCEPTED


def test_a_run_needs_both_paths_for_every_entry_point() -> None:
    v = decide((), [], (execution(ExecPath.NATIVE),))
    assert not v.accepted
    assert "execution not verified" in v.statement


def test_verdict_headline_is_the_stage_that_stopped_the_run() -> None:
    stages = (
        Stage("environment", StageStatus.FAILED, "nvcc not found on PATH", 0.0, int(ExitCode.TOOL)),
        Stage("probe", StageStatus.SKIPPED, "the environment stage failed"),
    )
    v = decide(
        stages,
        [Check("late", "gate.inspect", CheckState.FAILED, "x", cause=Cause.MISSING_SASS)],
        (),
    )
    assert v.statement == "not accepted: nvcc not found on PATH"
    assert v.exit_code is ExitCode.TOOL
    assert any("execution not verified" in r for r in v.reasons)


def test_headline_is_the_highest_ranked_cause_not_the_first_row() -> None:
    checks = [
        Check(
            "app: ELF listing lists a cubin",
            "gate.inspect",
            CheckState.FAILED,
            "none",
            cause=Cause.NO_DEVICE_CODE,
        ),
        Check(
            "app [native]",
            "gate.execute.native",
            CheckState.FAILED,
            "JIT disabled",
            cause=Cause.JIT_DISABLED,
        ),
        Check(
            "app: SASS for sm_90",
            "gate.inspect",
            CheckState.FAILED,
            "no SASS for sm_90",
            cause=Cause.MISSING_SASS,
        ),
    ]
    v = decide((), checks, BOTH)
    assert v.statement == "not accepted: app: SASS for sm_90: no SASS for sm_90"
    assert v.cause is Cause.MISSING_SASS
    assert v.reasons[1].startswith("app: ELF listing")


def test_a_loaded_library_ranks_before_the_run_it_broke() -> None:
    checks = [
        Check(
            "app [native]",
            "gate.execute.native",
            CheckState.FAILED,
            "exit status 1",
            cause=Cause.EXIT_STATUS,
        ),
        Check(
            "loaded libk.so: device code for 9.0",
            "gate.loaded",
            CheckState.FAILED,
            "nothing in it runs",
            cause=Cause.LOADED_LIBRARY,
        ),
    ]
    assert decide((), checks, BOTH).statement.startswith("not accepted: loaded libk.so")


def test_static_failure_without_a_device_exits_1_and_a_clean_one_exits_4() -> None:
    no_device = (
        Stage("execute", StageStatus.SKIPPED, "no CUDA device", 0.0, int(ExitCode.NO_DEVICE)),
    )
    clean = decide(no_device, [Check("a", "gate.inspect", CheckState.PASSED, "ok")], ())
    assert clean.exit_code is ExitCode.NO_DEVICE
    assert clean.statement == "not accepted: execution not verified (no CUDA device)"
    broken = decide(
        no_device,
        [
            Check(
                "a: SASS for sm_121",
                "gate.inspect",
                CheckState.FAILED,
                "no SASS",
                cause=Cause.MISSING_SASS,
            )
        ],
        (),
    )
    assert broken.exit_code is ExitCode.NOT_ACCEPTED
    assert broken.statement == "not accepted: a: SASS for sm_121: no SASS"


def test_a_check_that_did_not_run_is_never_accepted() -> None:
    v = decide((), [Check("x", "gate.inspect", CheckState.NOT_RUN, "not run")], BOTH)
    assert not v.accepted
    assert v.statement == "not accepted: x: not run (did not run)"
    assert v.exit_code is ExitCode.NOT_ACCEPTED


def test_a_warned_check_is_accepted() -> None:
    v = decide((), [Check("x", "gate.predict", CheckState.WARNED, "nothing to compare")], BOTH)
    assert v.accepted


def test_execution_passed_is_decided_by_its_own_fields() -> None:
    expected_3 = Execution(
        "e", ExecPath.NATIVE, "x", 3, False, 0.1, "l", None, True, expected_returncode=3
    )
    assert expected_3.passed
    dirty = Execution("e", ExecPath.JIT, "x", 0, False, 0.1, "l", None, True, cache_clean=False)
    assert not dirty.passed
    killed = Execution("e", ExecPath.JIT, "x", None, True, 0.1, "l", None, True)
    assert not killed.passed


def prediction(lst: Listing, *, own: bool = True) -> predict.Prediction:
    sources = (predict.Source("smoke" if own else "libvendor.so", lst, own),)
    return predict.Prediction(
        "smoke",
        H200,
        sources,
        predict.expect_native(sources, H200),
        predict.expect_jit(sources, H200, CUDA13),
        (),
    )


@pytest.mark.parametrize(
    ("native", "jit", "expected"),
    [
        ((1, JIT_OFF), (0, "PASS\n"), "revisit the native target and the final link step"),
        ((0, "PASS\n"), (1, NO_IMAGE), "check that PTX is present and that the driver supports"),
        ((1, NO_IMAGE), (1, NO_IMAGE), "investigate the toolchain, runtime libraries and device"),
    ],
)
def test_diagnosis_for_each_failure_combination(
    native: tuple[int, str], jit: tuple[int, str], expected: str
) -> None:
    runs = [run(ExecPath.NATIVE, *native), run(ExecPath.JIT, *jit)]
    found = predict.diagnose(runs, [prediction(listing())])
    assert len(found) == 1
    assert expected in found[0]
    assert "_90" in found[0]  # the evidence: what the artifact holds (sm_90 or compute_90)


def test_no_diagnosis_when_both_pass() -> None:
    assert predict.diagnose([ok(ExecPath.NATIVE), ok(ExecPath.JIT)], [prediction(listing())]) == []


def test_unsupported_ptx_diagnosis_names_the_driver() -> None:
    runs = [
        ok(ExecPath.NATIVE),
        run(ExecPath.JIT, 1, "the provided PTX was compiled with an unsupported toolchain\n"),
    ]
    found = predict.diagnose(runs, [prediction(listing())])
    assert "older than the PTX ISA needs" in found[0]
    assert "driver >= 13.0" in found[0]


def test_prediction_mismatch_when_native_passes_without_sass() -> None:
    # The JIT-cache pitfall: a PTX-only build must not pass natively.
    check = prediction(listing(sass=())).check([ok(ExecPath.NATIVE), ok(ExecPath.JIT)])
    assert not check.ok
    assert check.cause is Cause.PREDICTION
    assert "native: predicted cannot run" in check.message
    assert "JIT cache" in check.message


def test_prediction_matches_for_sass_only_build() -> None:
    runs = [ok(ExecPath.NATIVE), run(ExecPath.JIT, 1, NO_IMAGE)]
    check = prediction(listing(ptx=())).check(runs)
    assert check.ok, check.message


def test_prediction_for_foreign_target_expects_both_to_fail() -> None:
    lst = listing(sass=("sm_120",), ptx=("compute_120",))
    runs = [run(ExecPath.NATIVE, 1, NO_IMAGE), run(ExecPath.JIT, 1, NO_IMAGE)]
    assert prediction(lst).check(runs).ok


def test_a_run_that_fails_for_want_of_code_where_code_was_predicted_is_a_finding() -> None:
    runs = [run(ExecPath.NATIVE, 1, NO_IMAGE), ok(ExecPath.JIT)]
    check = prediction(listing()).check(runs)
    assert not check.ok
    assert "native: predicted runs" in check.message


def test_a_vendor_library_without_ptx_blocks_only_whole_program_jit() -> None:
    torch_like = listing(sass=("sm_80", "sm_90", "sm_120"), ptx=())
    p = prediction(torch_like, own=False)
    assert p.native.can_run is True
    assert p.jit.can_run is False
    assert p.jit_blocked_by_library
    assert "libvendor.so ships no PTX" in p.jit.basis
    failed_jit = run(ExecPath.JIT, 1, NO_IMAGE)
    # The project has no device code of its own here: nothing to prove, the failure is excused.
    assert predict.excuse(failed_jit, [p], frozenset()) is not None
    # A run that failed for another reason is never excused.
    assert predict.excuse(run(ExecPath.JIT, 1, "segfault\n"), [p], frozenset()) is None


def test_every_vendor_library_that_blocks_jit_is_named_what_the_project_links_first() -> None:
    # A torch program loads a dozen SASS-only libraries: the verdict must not name whichever
    # happened to load first (libcublas) and hide libtorch_cuda.
    def sass_only(kernels: int) -> Listing:
        names = tuple(f"k{i}" for i in range(kernels))
        return Listing((DeviceEntry(Kind.SASS, Target.parse("sm_90"), names),))

    # libtorch_cuda.so is the smallest here, but the project links against it: it comes first.
    sizes = {"libcublas.so.13": 3, "libtorch_cuda.so": 2, "libcufft.so.12": 5, "libnccl.so.2": 1}
    sources = [
        predict.Source(name, sass_only(n), own=False, linked=name == "libtorch_cuda.so")
        for name, n in sizes.items()
    ]
    sources.append(predict.Source("libcudnn.so.9", listing(), own=False))  # has PTX: no blocker
    jit = predict.expect_jit(sources, H200, CUDA13)
    assert jit.can_run is False
    assert not jit.firm
    assert jit.blocker is not None
    assert jit.blocker.name == "libtorch_cuda.so"
    assert jit.basis == (
        "libtorch_cuda.so, libcufft.so.12, libcublas.so.13 and 1 more ship no PTX for 9.0"
    )
    assert predict.expect_native(sources, H200).can_run is True


def test_vendor_libraries_read_headers_only_rank_by_bytes_of_device_code() -> None:
    # Loaded libraries are read without kernel names: rank by size, never by name.
    def headers_only(size: int) -> Listing:
        entry = DeviceEntry(Kind.SASS, Target.parse("sm_90"), (), size=size)
        return Listing((entry,))

    sizes = {"libcublas.so.13": 10, "libcupti.so.13": 5, "libtorch_cuda.so": 900, "libz.so": 50}
    sources = [predict.Source(name, headers_only(n), own=False) for name, n in sizes.items()]
    jit = predict.expect_jit(sources, H200, CUDA13)
    assert jit.basis.startswith("libtorch_cuda.so, libz.so, libcublas.so.13 and 1 more")


def test_a_project_library_without_ptx_is_a_real_jit_failure() -> None:
    p = prediction(listing(ptx=()), own=True)
    assert p.jit.can_run is False
    assert not p.jit_blocked_by_library
    assert predict.excuse(run(ExecPath.JIT, 1, NO_IMAGE), [p], frozenset()) is None


def test_own_ptx_must_be_proved_before_a_blocked_jit_run_is_excused() -> None:
    own = predict.Source("libext.so", listing(), True)
    vendor = predict.Source("libtorch_cuda.so", listing(ptx=()), False)
    sources = (own, vendor)
    p = predict.Prediction(
        "ext",
        H200,
        sources,
        predict.expect_native(sources, H200),
        predict.expect_jit(sources, H200, CUDA13),
        (),
    )
    assert p.jit_blocked_by_library
    failed = run(ExecPath.JIT, 1, NO_IMAGE, name="ext")
    assert predict.excuse(failed, [p], frozenset()) is None
    assert predict.excuse(failed, [p], frozenset({"other.so"})) is None
    assert predict.excuse(failed, [p], frozenset({"libext.so"})) is not None


@pytest.mark.parametrize("failure", list(RuntimeFailure))
def test_runtime_failures_are_classified_from_their_text(failure: RuntimeFailure) -> None:
    assert classify(f"some prefix: {failure.text}\n") is failure


def test_a_pass_where_only_a_vendor_library_lacked_code_is_no_contradiction() -> None:
    # Lazy loading: a program that launches none of torch's kernels runs under forced JIT.
    p = prediction(listing(sass=("sm_90",), ptx=()), own=False)
    check = p.check([ok(ExecPath.NATIVE), ok(ExecPath.JIT)])
    assert check.ok, check.message
    assert "jit: predicted at risk (libvendor.so ships no PTX for 9.0), passed" in check.message


def test_a_kernel_less_stub_is_no_code_for_a_target() -> None:
    # nvcc adds a device-link stub per arch; an artifact whose kernels are all elsewhere
    # has no sm_90 code even though an sm_90 entry exists.
    lst = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), ()),
            DeviceEntry(Kind.SASS, Target.parse("sm_80"), (KERNEL,)),
            DeviceEntry(Kind.PTX, Target.parse("compute_90"), (KERNEL,), ptx_isa=Version(9, 0)),
        )
    )
    result = {c.name: c for c in listing_checks("lib", lst, SM90, ())}
    assert result["lib: SASS for sm_90"].message == (
        "no SASS for sm_90: only kernel-less entries (sm_90)"
    )
    assert result["lib: PTX for compute_90"].ok


def test_own_ptx_too_new_for_the_driver_is_named_with_the_numbers_and_both_causes() -> None:
    lst = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_80"), (KERNEL,)),
            DeviceEntry(Kind.PTX, Target.parse("compute_90"), (KERNEL,), ptx_isa=Version(9, 2)),
        )
    )
    p = prediction(lst)
    assert p.native.can_run is False
    assert p.native.basis == "smoke: 1 kernel without SASS for 9.0 (SASS: sm_80)"
    assert p.jit.can_run is False
    assert p.jit.basis == (
        "smoke: the PTX of 1 kernel (ISA 9.2) needs driver CUDA >= 13.2; this driver is CUDA 13.0"
    )
    runs = [
        run(ExecPath.NATIVE, 1, JIT_OFF),
        run(ExecPath.JIT, 1, "the provided PTX was compiled with an unsupported toolchain\n"),
    ]
    (found,) = predict.diagnose(runs, [p])
    assert found.startswith("smoke: both paths fail, each for its own reason: native: smoke: 1")
    assert "forced JIT: smoke: the PTX of 1 kernel (ISA 9.2) needs driver CUDA >= 13.2" in found
    assert "investigate the toolchain" not in found
    assert p.check(runs).ok  # both failed as predicted: no contradiction


def test_own_code_built_only_for_other_devices_cannot_run_on_this_one() -> None:
    lst = Listing((DeviceEntry(Kind.SASS, Target.parse("sm_100a"), (KERNEL,)),))
    p = prediction(lst)
    assert p.native.basis == (
        "smoke: every kernel is built only for other devices (a/f builds); none for 9.0"
    )
    assert p.jit.basis == "smoke: no kernel is built for 9.0"


def test_lto_ir_alone_is_named_as_such_in_the_target_checks() -> None:
    lst = Listing((DeviceEntry(Kind.LTOIR, Target.parse("sm_90"), ()),))
    result = {c.name: c for c in listing_checks("libk.a", lst, SM90, ())}
    lto = "LTO IR only (lto_90): it runs nowhere until it is device-linked; device-link it first"
    assert result["libk.a: SASS for sm_90"].message == lto
    assert result["libk.a: PTX for compute_90"].message == lto
    assert not result["libk.a: SASS for sm_90"].ok


def test_an_artifact_without_device_code_that_must_carry_kernels_fails(tmp_path: Path) -> None:
    from gate.evidence import EvidenceDir
    from gate.reader.hostelf import HostFormat
    from gate.rules.hosts import HostRule
    from gate.stages.artifactchecks import artifact_checks
    from gate.stages.inspected import Inspected

    host = HostFormat("ELF 64-bit", 64, 62, "x86-64", "executable", None, (), (), ())
    app = Inspected(
        "app", tmp_path / "app", "a" * 64, 1, host, (), Listing(), ("scale",), False, ""
    )
    here = HostRule("x86_64", "this host")
    ev = EvidenceDir.create(tmp_path / "ev")
    checks = artifact_checks(app, ev, here, [SM90], CUDA13)
    assert [(c.name, c.state, c.message) for c in checks] == [
        ("app: host ELF machine", CheckState.PASSED, "x86-64 matches x86_64 (this host)"),
        ("app: kernels scale", CheckState.FAILED, "required of it, but it holds no device code"),
    ]
    assert checks[1].cause is Cause.MISSING_KERNEL
    # A library from a wheel with no device code is one of several: the wheel may hold them.
    from dataclasses import replace

    member = replace(app, in_wheel=True)
    assert [c.name for c in artifact_checks(member, ev, here, [SM90], CUDA13)] == [
        "app: host ELF machine"
    ]
