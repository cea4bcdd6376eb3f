"""The release policy's rules over targets (gate.rules.policy), table by table.

Targets and capabilities are the ones /work/shared/CUDA-FACTS.md lists (8.0, 8.6, 8.9,
9.0, 10.0, 12.0, 12.1); each table row is a case a release engineer states in
EasyBuild's words: PTX as device code, surplus device code, PTX for the highest cc.
"""

from __future__ import annotations

import pytest

from gate.errors import BadInputError
from gate.rules.baseline import Level, Policy, Rule
from gate.rules.policy import (
    DEFAULT_POLICY,
    Action,
    ReleasePolicy,
    highest_ptx,
    missing_highest,
    stand_ins,
    stub_severity,
    surplus,
)
from gate.rules.require import Requirement
from gate.rules.stubs import Severity
from gate.rules.targets import Capability, Target
from gate.rules.verdict import CheckState

pytestmark = pytest.mark.unit


def need(text: str) -> Requirement:
    """``sm_90``-style: a named target in its own form; ``12.1``-style: the probed device."""
    if "." in text:
        return Requirement.of_device(Capability.parse(text))
    return Requirement.of_target(Target.parse(text))


def targets(*texts: str) -> tuple[Target, ...]:
    return tuple(Target.parse(t) for t in texts)


@pytest.mark.parametrize(
    ("action", "found", "state"),
    [
        (Action.FAIL, True, CheckState.FAILED),
        (Action.WARN, True, CheckState.WARNED),
        (Action.ALLOW, True, CheckState.PASSED),
        (Action.OFF, True, CheckState.PASSED),
        (Action.FAIL, False, CheckState.PASSED),
        (Action.WARN, False, CheckState.PASSED),
    ],
)
def test_an_action_decides_the_state_of_a_finding(
    action: Action, found: bool, state: CheckState
) -> None:
    assert action.state(found=found) is state
    assert action.judged is (action in (Action.WARN, Action.FAIL))


@pytest.mark.parametrize(
    ("required", "ptx", "standing"),
    [
        # A plain target: its own PTX, or plain PTX of a lower cc (EasyBuild: lower or equal).
        ("sm_90", ("compute_90",), ("compute_90",)),
        ("sm_90", ("compute_80", "compute_86"), ("compute_80", "compute_86")),
        ("sm_90", ("compute_100",), ()),  # PTX JIT-compiles upwards only
        ("sm_90", ("compute_90a",), ()),  # arch-specific PTX is not plain sm_90's code
        ("sm_86", ("compute_89",), ()),  # off by one minor: 8.9 PTX does not serve 8.6
        ("sm_89", ("compute_86",), ("compute_86",)),
        ("sm_120", ("compute_120f",), ()),  # sm_120's PTX row is compute_120 alone
        # An a/f target names features older PTX lacks: only its own PTX stands in.
        ("sm_90a", ("compute_90a",), ("compute_90a",)),
        ("sm_90a", ("compute_90", "compute_80"), ()),
        ("sm_100f", ("compute_100f",), ("compute_100f",)),
        ("sm_100f", ("compute_90", "compute_100"), ()),
        # The probed device: any PTX built for it, or plain PTX of a lower cc.
        ("12.1", ("compute_121a",), ("compute_121a",)),
        ("12.1", ("compute_120",), ("compute_120",)),
        ("12.1", ("compute_120a",), ()),  # sm_120a code does not run on 12.1
        ("12.1", ("compute_90",), ("compute_90",)),  # across majors: plain PTX JITs upwards
        ("9.0", ("compute_100",), ()),
    ],
)
def test_which_ptx_stands_in_for_a_required_targets_sass(
    required: str, ptx: tuple[str, ...], standing: tuple[str, ...]
) -> None:
    assert stand_ins(need(required), targets(*ptx)) == targets(*standing)


@pytest.mark.parametrize(
    ("required", "sass", "extra"),
    [
        (("sm_90",), ("sm_90",), ()),
        (("sm_90",), ("sm_80", "sm_90", "sm_100"), ("sm_80", "sm_100")),
        (("sm_90",), ("sm_90a",), ("sm_90a",)),  # plain sm_90 never asked for arch code
        (("sm_90a",), ("sm_90",), ("sm_90",)),
        (("sm_120",), ("sm_120f",), ()),  # family SASS meets a plain requirement
        (("12.1",), ("sm_120", "sm_121", "sm_121a"), ("sm_120",)),  # EasyBuild: ccs exactly
        (("sm_86", "sm_89", "9.0"), ("sm_89", "sm_86", "sm_90", "sm_80"), ("sm_80",)),
        (("sm_100f", "12.1"), ("sm_121", "sm_100", "sm_100f", "sm_120"), ("sm_100", "sm_120")),
    ],
)
def test_surplus_is_sass_no_required_target_asked_for_by_sm_number(
    required: tuple[str, ...], sass: tuple[str, ...], extra: tuple[str, ...]
) -> None:
    assert surplus([need(r) for r in required], targets(*sass)) == targets(*extra)


@pytest.mark.parametrize(
    ("required", "ptx", "missing"),
    [
        (("sm_80", "sm_90", "12.1"), ("compute_121",), None),
        (("sm_90", "12.1", "sm_80"), ("compute_90", "compute_80"), "compute_121"),
        (("sm_90", "12.1"), ("compute_120",), "compute_121"),  # one below the highest
        (("sm_90", "sm_120"), ("compute_121",), "compute_120"),  # one above is no answer
        (("sm_90a",), ("compute_90a",), "compute_90"),  # only plain PTX reaches later majors
        (("sm_100f", "sm_86"), ("compute_100", "compute_86"), None),
        (("sm_89", "sm_86"), ("compute_86",), "compute_89"),
    ],
)
def test_the_highest_required_target_needs_its_plain_ptx(
    required: tuple[str, ...], ptx: tuple[str, ...], missing: str | None
) -> None:
    found = missing_highest([need(r) for r in required], targets(*ptx))
    assert found == (None if missing is None else Target.parse(missing))


def test_no_requirement_asks_for_no_highest_ptx() -> None:
    assert highest_ptx([]) is None
    assert missing_highest([], ()) is None
    assert highest_ptx([need("sm_86"), need("sm_89"), need("sm_80")]) == Target.parse("compute_89")


@pytest.mark.parametrize(
    ("severity", "action", "result"),
    [
        (Severity.FAIL, Action.FAIL, Severity.FAIL),
        (Severity.FAIL, Action.WARN, Severity.WARN),
        (Severity.WARN, Action.FAIL, Severity.WARN),
        (Severity.WARN, Action.WARN, Severity.WARN),
        (Severity.NOTE, Action.WARN, Severity.NOTE),
        (Severity.NOTE, Action.FAIL, Severity.NOTE),
    ],
)
def test_trap_stubs_warn_lowers_only_a_failure(
    severity: Severity, action: Action, result: Severity
) -> None:
    assert stub_severity(severity, action) is result


def test_required_devices_are_the_runner_classes_own() -> None:
    policy = ReleasePolicy(
        required_devices=(
            ("gb10", (Capability(12, 1),)),
            ("h200", (Capability(9, 0), Capability(8, 0))),
        )
    )
    assert policy.devices_for("gb10") == (Capability(12, 1),)
    assert policy.devices_for("h200") == (Capability(9, 0), Capability(8, 0))
    assert policy.devices_for("l4") == ()
    assert policy.devices_for(None) == ()


def test_the_defaults_are_the_gate_before_the_policy_in_result_json() -> None:
    assert DEFAULT_POLICY.to_json() == {
        "missing_sass": "fail",
        "ptx_as_device_code": False,
        "missing_ptx": "fail",
        "surplus_targets": "allow",
        "ptx_for_highest": "off",
        "trap_stubs": "fail",
        "launch_coverage": "off",
        "required_devices": {},
        "baseline": {r.value: "fail" for r in Rule},
    }


def test_a_policy_reads_back_from_its_json() -> None:
    policy = ReleasePolicy(
        missing_sass=Action.WARN,
        ptx_as_device_code=True,
        missing_ptx=Action.ALLOW,
        surplus_targets=Action.FAIL,
        ptx_for_highest=Action.WARN,
        trap_stubs=Action.WARN,
        launch_coverage=Action.FAIL,
        required_devices=(("gb10", (Capability(12, 1),)),),
        baseline=Policy(frozenset({Rule.NEWER_DRIVER})),
    )
    doc = policy.to_json()
    assert doc["required_devices"] == {"gb10": ["12.1"]}
    assert doc["baseline"]["newer_driver"] == "warn"
    assert ReleasePolicy.from_json(doc, "result.json") == policy
    assert policy.baseline.level(Rule.NEWER_DRIVER) is Level.WARN


@pytest.mark.parametrize(
    "change",
    [
        {"surplus_targets": "maybe"},
        {"ptx_as_device_code": "yes"},
        {"required_devices": {"gb10": ["twelve"]}},
        {"baseline": {"dropped_target": "ignore"}},
        {"baseline": ["dropped_target"]},
        {"extra": 1},
    ],
)
def test_a_policy_in_json_that_is_not_one_is_refused_naming_the_file(
    change: dict[str, object],
) -> None:
    doc = {**DEFAULT_POLICY.to_json(), **change}
    with pytest.raises(BadInputError, match=r"^result\.json: "):
        ReleasePolicy.from_json(doc, "result.json")


def test_a_bad_baseline_severity_in_json_is_refused_word_for_word() -> None:
    doc = {**DEFAULT_POLICY.to_json(), "baseline": {"dropped_target": "ignore"}}
    with pytest.raises(BadInputError) as info:
        ReleasePolicy.from_json(doc, "runs/7/result.json")
    assert str(info.value) == (
        'runs/7/result.json: \'policy\': [baseline] dropped_target must be "fail" or "warn"'
    )
