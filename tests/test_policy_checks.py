"""Each ``[policy]`` rule wired into the check it decides: its state, cause and message.

The listings are built the way the reader builds them (a kernel-less device-link stub per
SASS target, then the kernels); the launches are the golden recorder record with some
kernels never launched. The target rules themselves are tests/test_policy_rules.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from gate.config import EntryPoint
from gate.evidence import EvidenceDir
from gate.launch.coverage import judge
from gate.launch.log import read_record
from gate.proc import Result
from gate.reader.hostelf import HostFormat
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.record import RESULT_VERSION, RunRecord
from gate.rules.causes import Cause, ExecPath
from gate.rules.policy import DEFAULT_POLICY, Action, ReleasePolicy
from gate.rules.require import Requirement
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import Check, CheckState
from gate.scan.walk import read_paths
from gate.stages.artifactchecks import listing_checks
from gate.stages.inspected import Inspected
from gate.stages.policycheck import policy_checks
from gate.stages.runs import Run
from gate.stages.stubcheck import stub_check
from tests.records import make_record

pytestmark = pytest.mark.unit

KERNEL = "_Z11write_valuePi"
GOLDEN = Path(__file__).resolve().parent / "golden"
SM90 = Requirement.of_target(Target.parse("sm_90"))
GB10 = Requirement.of_device(Capability(12, 1))


def listing(sass: tuple[str, ...] = (), ptx: tuple[str, ...] = ()) -> Listing:
    entries = [DeviceEntry(Kind.SASS, Target.parse(s), ()) for s in sass]
    entries += [DeviceEntry(Kind.SASS, Target.parse(s), (KERNEL,)) for s in sass]
    entries += [DeviceEntry(Kind.PTX, Target.parse(p), (KERNEL,), Version(9, 0)) for p in ptx]
    return Listing(tuple(entries))


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


# --- missing_sass, ptx_as_device_code ------------------------------------------------------


def test_ptx_only_fails_the_sass_check_by_default_and_under_ptx_as_device_code_it_warns() -> None:
    art = listing(ptx=("compute_90",))
    plain = by_name(listing_checks("libk.so", art, SM90, ("write_value",)))
    sass = plain["libk.so: SASS for sm_90"]
    assert (sass.state, sass.cause) == (CheckState.FAILED, Cause.MISSING_SASS)
    assert plain["libk.so: kernel write_value in sm_90 SASS"].state is CheckState.NOT_RUN

    accepted = ReleasePolicy(ptx_as_device_code=True)
    found = by_name(listing_checks("libk.so", art, SM90, ("write_value",), accepted))
    sass = found["libk.so: SASS for sm_90"]
    assert (sass.state, sass.cause) == (CheckState.WARNED, None)
    assert sass.message == (
        "no SASS for sm_90 (needs sm_90); SASS targets: none; compute_90 PTX stands in as "
        "device code (policy.ptx_as_device_code = true): the driver JIT-compiles it at the "
        "first launch"
    )
    kernel = found["libk.so: kernel write_value in compute_90 PTX (standing in for sm_90 SASS)"]
    assert kernel.state is CheckState.PASSED
    assert found["libk.so: PTX for compute_90"].state is CheckState.PASSED


def test_lower_plain_ptx_stands_in_and_newer_ptx_never_does() -> None:
    accepted = ReleasePolicy(ptx_as_device_code=True)
    lower = by_name(listing_checks("a", listing(ptx=("compute_80",)), SM90, (), accepted))
    assert lower["a: SASS for sm_90"].state is CheckState.WARNED
    assert "compute_80 PTX stands in" in lower["a: SASS for sm_90"].message
    newer = by_name(listing_checks("a", listing(ptx=("compute_100",)), SM90, (), accepted))
    assert newer["a: SASS for sm_90"].state is CheckState.FAILED


def test_ptx_stands_in_only_where_its_kernels_are() -> None:
    art = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_80"), (KERNEL,)),
            DeviceEntry(Kind.PTX, Target.parse("compute_90"), ("_Z5otherPi",)),
        )
    )
    accepted = ReleasePolicy(ptx_as_device_code=True)
    found = by_name(listing_checks("a", art, SM90, ("write_value",), accepted))
    assert found["a: SASS for sm_90"].state is CheckState.WARNED
    missing = found["a: kernel write_value in compute_90 PTX (standing in for sm_90 SASS)"]
    assert (missing.state, missing.cause) == (CheckState.FAILED, Cause.MISSING_KERNEL)


def test_missing_sass_warn_warns_the_target_and_its_kernels() -> None:
    policy = ReleasePolicy(missing_sass=Action.WARN)
    found = by_name(
        listing_checks("a", listing(ptx=("compute_90",)), SM90, ("write_value",), policy)
    )
    sass = found["a: SASS for sm_90"]
    assert (sass.state, sass.cause) == (CheckState.WARNED, None)
    assert sass.message.endswith('(policy.missing_sass = "warn")')
    assert found["a: kernel write_value in sm_90 SASS"].state is CheckState.NOT_RUN
    # Not looked for where the target is missing; a kernel missing from SASS that is there
    # still fails.
    present = by_name(
        listing_checks("a", listing(sass=("sm_90",), ptx=("compute_90",)), SM90, ("scale",), policy)
    )
    assert present["a: kernel scale in sm_90 SASS"].state is CheckState.FAILED


# --- missing_ptx -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "state", "kernel"),
    [
        (Action.FAIL, CheckState.FAILED, CheckState.NOT_RUN),
        (Action.WARN, CheckState.WARNED, CheckState.NOT_RUN),
        (Action.ALLOW, CheckState.PASSED, None),
    ],
)
def test_missing_ptx_decides_the_ptx_check(
    action: Action, state: CheckState, kernel: CheckState | None
) -> None:
    policy = ReleasePolicy(missing_ptx=action)
    found = by_name(listing_checks("a", listing(sass=("sm_90",)), SM90, ("write_value",), policy))
    ptx = found["a: PTX for compute_90"]
    assert ptx.state is state
    assert ptx.cause == (Cause.MISSING_PTX if state is CheckState.FAILED else None)
    suffix = "" if action is Action.FAIL else f' (policy.missing_ptx = "{action.value}")'
    assert ptx.message == f"no PTX for compute_90 (needs compute_90); PTX targets: none{suffix}"
    got = found.get("a: kernel write_value in compute_90 PTX")
    assert (got.state if got else None) is kernel
    assert found["a: SASS for sm_90"].state is CheckState.PASSED


# --- surplus_targets, ptx_for_highest, required_devices ---------------------------------------


def test_the_default_policy_adds_no_check() -> None:
    art = listing(sass=("sm_80", "sm_90"), ptx=("compute_80",))
    assert policy_checks("a", art, [SM90, GB10], DEFAULT_POLICY) == []


@pytest.mark.parametrize(
    ("action", "state"),
    [(Action.WARN, CheckState.WARNED), (Action.FAIL, CheckState.FAILED)],
)
def test_surplus_sass_is_named_with_what_was_required(action: Action, state: CheckState) -> None:
    policy = ReleasePolicy(surplus_targets=action)
    art = listing(sass=("sm_80", "sm_90", "sm_120"), ptx=("compute_80",))
    (check,) = policy_checks("libk.so", art, [SM90, GB10], policy)
    assert check.name == "libk.so: no SASS beyond the required targets"
    assert check.state is state
    assert check.cause == (Cause.WRONG_TARGET if state is CheckState.FAILED else None)
    assert check.message == (
        "SASS for sm_80 sm_120, which no required target (sm_90, device 12.1) asked for"
        f' (policy.surplus_targets = "{action.value}")'
    )
    (clean,) = policy_checks("libk.so", listing(sass=("sm_90", "sm_121")), [SM90, GB10], policy)
    assert clean.state is CheckState.PASSED


def test_surplus_needs_a_required_target_to_judge_by() -> None:
    policy = ReleasePolicy(surplus_targets=Action.FAIL, ptx_for_highest=Action.FAIL)
    assert policy_checks("a", listing(sass=("sm_80",)), [], policy) == []


@pytest.mark.parametrize(
    ("action", "state"),
    [(Action.WARN, CheckState.WARNED), (Action.FAIL, CheckState.FAILED)],
)
def test_ptx_for_the_highest_required_target(action: Action, state: CheckState) -> None:
    policy = ReleasePolicy(ptx_for_highest=action)
    art = listing(sass=("sm_90", "sm_121"), ptx=("compute_90", "compute_120"))
    (check,) = policy_checks("libk.so", art, [SM90, GB10], policy)
    assert check.name == "libk.so: PTX for the highest required target"
    assert (check.state, check.path) == (state, ExecPath.JIT)
    assert check.cause == (Cause.MISSING_PTX if state is CheckState.FAILED else None)
    assert check.message == (
        "no compute_121 PTX for the highest required target: devices newer than 12.1 get no "
        f"code from it; PTX targets: compute_90 compute_120 (policy.ptx_for_highest = "
        f'"{action.value}")'
    )
    good = listing(sass=("sm_90", "sm_121"), ptx=("compute_121",))
    (ok,) = policy_checks("libk.so", good, [SM90, GB10], policy)
    assert ok.state is CheckState.PASSED
    assert ok.message == "compute_121 PTX present for the highest required target"


def test_required_devices_need_a_route_on_each_device_of_the_runner_class() -> None:
    art = listing(sass=("sm_90",))
    runs, fails = policy_checks(
        "libk.so",
        art,
        [SM90],
        DEFAULT_POLICY,
        devices=(Capability(9, 0), Capability(12, 1)),
        runner_class="gb10",
        driver=Version(13, 0),
    )
    assert (runs.name, runs.state) == ("libk.so: runs on 9.0", CheckState.PASSED)
    assert runs.message.startswith(
        "runs on 9.0, required on runner class gb10 (policy.required_devices): 1 by exact SASS"
    )
    assert (fails.name, fails.state, fails.cause) == (
        "libk.so: runs on 12.1",
        CheckState.FAILED,
        Cause.WRONG_TARGET,
    )
    assert fails.message.startswith("does not run on 12.1, required on runner class gb10")
    # PTX that JIT-compiles for 12.1 is a route.
    (jit,) = policy_checks(
        "libk.so",
        listing(sass=("sm_90",), ptx=("compute_90",)),
        [SM90],
        DEFAULT_POLICY,
        devices=(Capability(12, 1),),
        runner_class="gb10",
        driver=Version(13, 0),
    )
    assert jit.state is CheckState.PASSED


# --- trap_stubs ---------------------------------------------------------------------------------


def stubbed() -> Listing:
    """write_value traps in its sm_90 SASS and has code in sm_80 (an architecture guard)."""
    return Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_80"), (KERNEL,)),
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), (KERNEL,), traps=(KERNEL,)),
        )
    )


def test_trap_stubs_warn_turns_the_failure_into_a_warning_and_says_so() -> None:
    failed = stub_check("libk.so", stubbed(), (Capability(9, 0),))
    assert failed is not None
    assert (failed.state, failed.cause) == (CheckState.FAILED, Cause.TRAP_STUB)
    warned = stub_check("libk.so", stubbed(), (Capability(9, 0),), trap_stubs=Action.WARN)
    assert warned is not None
    assert (warned.state, warned.cause) == (CheckState.WARNED, None)
    assert warned.message == failed.message + ' (policy.trap_stubs = "warn")'
    # Where no checked device runs the stub it warns anyway: the policy changes nothing.
    elsewhere = stub_check("libk.so", stubbed(), (Capability(8, 0),), trap_stubs=Action.WARN)
    assert elsewhere is not None
    assert elsewhere.state is CheckState.WARNED
    assert "policy" not in elsewhere.message


# --- launch_coverage ----------------------------------------------------------------------------


def library(*, smoke: bool = False) -> Inspected:
    (report,) = read_paths([GOLDEN / "libkernels.so"])
    host = HostFormat("ELF 64-bit", 64, 62, "x86-64", "shared object", None, (), (), ())
    path = GOLDEN / "libkernels.so"
    return Inspected("libkernels.so", path, "f" * 64, 1, host, (), report.listing, (), smoke, "")


def runs(*, launched: bool = True) -> list[Run]:
    """Both paths, each a process that launched only twice(int*) of the three kernels."""
    record = read_record(GOLDEN / "launches/launches.4242.json")
    twice = next(k for k in record.kernels if k.name == "_Z5twicePi")
    record = replace(record, kernels=(twice,), loads=(), modules=())
    out = []
    for path in ExecPath:
        result = Result(("./app",), 0, "PASS\n", "", 0.1)
        kept = (record,) if launched else ()
        note = "" if launched else "no CUPTI here"
        entry = EntryPoint("app", ("./app",))
        out.append(Run(entry, path, result, "x.log", True, True, None, (), kept, None, note))
    return out


def coverage(
    tmp_path: Path,
    action: Action,
    *,
    smoke: bool = False,
    launched: bool = True,
    required: tuple[str, ...] = (),
) -> Check:
    evidence = EvidenceDir.create(tmp_path / f"ev-{action.value}-{smoke}-{launched}")
    art = library(smoke=smoke)
    outcome = judge(
        evidence,
        runs=runs(launched=launched),
        artifacts=[art],
        capability=Capability(8, 0),
        required={art.path: required} if required else {},
        launch_coverage=action,
    )
    return next(c for c in outcome.checks if c.name == "libkernels.so: kernels launched [native]")


def test_launch_coverage_off_only_reports_the_figures(tmp_path: Path) -> None:
    check = coverage(tmp_path, Action.OFF)
    assert check.state is CheckState.PASSED
    assert check.message.startswith("1 of 3 kernels launched; never launched: ")


@pytest.mark.parametrize(
    ("action", "state", "cause"),
    [
        (Action.WARN, CheckState.WARNED, None),
        (Action.FAIL, CheckState.FAILED, Cause.MISSING_KERNEL),
    ],
)
def test_launch_coverage_asks_every_kernel_of_every_artifact(
    tmp_path: Path, action: Action, state: CheckState, cause: Cause | None
) -> None:
    check = coverage(tmp_path, action)
    assert (check.state, check.cause, check.path) == (state, cause, ExecPath.NATIVE)
    assert check.message.startswith(
        "require_launch not met on the native SASS (PTX JIT disabled) path: all: never launched: "
        "add_one(int*), "
        "write_value(int*) (1/3 launched)"
    )
    said = f' (policy.launch_coverage = "{action.value}")'
    assert check.message.endswith(said) is (action is Action.WARN)


def test_launch_coverage_fail_is_require_launch_all(tmp_path: Path) -> None:
    by_policy = coverage(tmp_path, Action.FAIL)
    evidence = EvidenceDir.create(tmp_path / "all")
    art = library()
    outcome = judge(
        evidence,
        runs=runs(),
        artifacts=[art],
        capability=Capability(8, 0),
        required={art.path: "all"},
    )
    by_config = next(c for c in outcome.checks if c.name == by_policy.name)
    assert by_policy == by_config


def test_launch_coverage_leaves_the_smoke_program_and_an_own_require_launch_alone(
    tmp_path: Path,
) -> None:
    assert coverage(tmp_path, Action.FAIL, smoke=True).state is CheckState.PASSED
    own = coverage(tmp_path, Action.WARN, required=("twice",))
    assert own.state is CheckState.PASSED  # the artifact's own require_launch is met


def test_launch_coverage_without_a_record_warns_or_fails_saying_why(tmp_path: Path) -> None:
    warned = coverage(tmp_path, Action.WARN, launched=False)
    assert (warned.state, warned.cause) == (CheckState.WARNED, None)
    assert warned.message == (
        'require_launch cannot be checked: no CUPTI here (policy.launch_coverage = "warn")'
    )
    failed = coverage(tmp_path, Action.FAIL, launched=False)
    assert (failed.state, failed.cause) == (CheckState.FAILED, Cause.EVIDENCE)


# --- result.json ----------------------------------------------------------------------------


def test_result_json_holds_the_effective_policy_and_reads_it_back() -> None:
    policy = ReleasePolicy(
        ptx_as_device_code=True,
        surplus_targets=Action.WARN,
        required_devices=(("gb10", (Capability(12, 1),)),),
    )
    record = replace(make_record(), policy=policy)
    doc = json.loads(record.dumps())
    assert doc["version"] == RESULT_VERSION  # the policy is recorded since version 5
    assert doc["policy"]["surplus_targets"] == "warn"
    assert doc["policy"]["required_devices"] == {"gb10": ["12.1"]}
    schema = json.loads(
        resources.files("gate").joinpath("schemas/result.schema.json").read_text("utf-8")
    )
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert RunRecord.from_json(doc, "result.json").policy == policy
    older = {k: v for k, v in json.loads(make_record().dumps()).items() if k != "policy"}
    older["version"] = 4  # written before the policy existed: no policy recorded
    assert RunRecord.from_json(older, "result.json").policy is None
