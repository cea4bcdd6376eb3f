"""The baseline rules (gate.rules.baseline), table by table: what a loss is, what each
rule's severity does, which rows and checks a comparison gives. Written to kill mutants:
every comparison and every default has a row that fails when it is flipped."""

from __future__ import annotations

import pytest

from gate.errors import ConfigError
from gate.rules.baseline import (
    CLASSNAME,
    Change,
    CodeFacts,
    Diff,
    Level,
    Policy,
    Row,
    Rule,
    TargetCode,
    checks,
    compare,
    needs_newer_driver,
)
from gate.rules.causes import Cause
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import CheckState

pytestmark = pytest.mark.unit

K = frozenset({"scale", "shift"})


def sass(number: str, kernels: frozenset[str] = K, size: int | None = 100) -> TargetCode:
    return TargetCode(False, Target.parse(f"sm_{number}"), kernels, None, size)


def ptx(
    number: str, isa: str = "9.0", kernels: frozenset[str] = K, size: int | None = 10
) -> TargetCode:
    return TargetCode(True, Target.parse(f"compute_{number}"), kernels, Version.parse(isa), size)


def lib(*targets: TargetCode, name: str = "libk.so") -> CodeFacts:
    return CodeFacts(name, targets)


def judged(diff: Diff) -> set[tuple[Level, Rule | None, str]]:
    """The losses (fail or warn) of a comparison."""
    return {(c.level, c.rule, c.what) for c in diff.changes if c.level is not Level.INFO}


def infos(diff: Diff) -> set[str]:
    return {c.what for c in diff.changes if c.level is Level.INFO}


V1 = lib(sass("90"), sass("121"), ptx("90"), ptx("121"))

LOSSES = [
    pytest.param(V1, V1, set(), id="unchanged"),
    pytest.param(
        V1,
        lib(sass("90"), ptx("90"), ptx("121")),
        {
            (Level.FAIL, Rule.DROPPED_TARGET, "sm_121 dropped"),
            (
                Level.FAIL,
                Rule.LOST_NATIVE_ROUTE,
                (
                    "device 12.1 lost its native route: exact SASS (sm_121) -> "
                    "PTX JIT (compute_121, ISA 9.0, driver >= 13.0)"
                ),
            ),
        },
        id="sass-dropped",
    ),
    pytest.param(
        V1,
        lib(sass("90"), sass("121"), ptx("90")),
        {(Level.FAIL, Rule.DROPPED_TARGET, "compute_121 dropped")},
        id="ptx-dropped-native-kept",
    ),
    pytest.param(
        lib(sass("120"), sass("121")),
        lib(sass("120")),
        # 12.1 still runs SASS (compatible sm_120): the target is lost, the native route not.
        {(Level.FAIL, Rule.DROPPED_TARGET, "sm_121 dropped")},
        id="exact-to-compatible-stays-native",
    ),
    pytest.param(
        lib(sass("90"), sass("121", frozenset({"scale"}))),
        lib(sass("90", frozenset({"scale"})), sass("121", frozenset({"scale"}))),
        {(Level.FAIL, Rule.DROPPED_KERNEL, "lost kernel shift from sm_90")},
        id="kernel-dropped-from-one-target",
    ),
    pytest.param(
        lib(ptx("90", "8.8")),
        lib(ptx("90", "9.0")),
        {(Level.FAIL, Rule.NEWER_DRIVER, "PTX ISA 8.8 -> 9.0 needs driver >= 13.0")},
        id="isa-needs-newer-driver",
    ),
    pytest.param(
        lib(ptx("90", "9.1")),
        lib(ptx("90", "10.0")),
        {
            (
                Level.FAIL,
                Rule.NEWER_DRIVER,
                "PTX ISA 9.1 -> 10.0 needs a driver newer than every known one",
            )
        },
        id="isa-beyond-every-rule",
    ),
    pytest.param(lib(ptx("90", "9.0")), lib(ptx("90", "8.8")), set(), id="isa-older-is-fine"),
    pytest.param(
        lib(sass("90")),
        lib(ptx("90")),
        {
            (Level.FAIL, Rule.DROPPED_TARGET, "sm_90 dropped"),
            (
                Level.FAIL,
                Rule.LOST_NATIVE_ROUTE,
                (
                    "device 9.0 lost its native route: exact SASS (sm_90) -> "
                    "PTX JIT (compute_90, ISA 9.0, driver >= 13.0)"
                ),
            ),
        },
        id="sass-to-ptx-only",
    ),
    pytest.param(
        lib(ptx("90")),
        lib(ptx("100")),
        # 9.0 loses its only code, but it never ran SASS: the target rule says it.
        {(Level.FAIL, Rule.DROPPED_TARGET, "compute_90 dropped")},
        id="ptx-route-lost-is-no-native-loss",
    ),
]


@pytest.mark.parametrize(("old", "new", "expected"), LOSSES)
def test_what_counts_as_a_loss(
    old: CodeFacts, new: CodeFacts, expected: set[tuple[Level, Rule | None, str]]
) -> None:
    assert judged(compare([old], [new])) == expected


def test_an_artifact_dropped_fails_and_one_added_is_reported() -> None:
    diff = compare([V1], [lib(sass("90"), name="libnew.so")])
    assert judged(diff) == {(Level.FAIL, Rule.DROPPED_ARTIFACT, "artifact dropped")}
    assert {c.artifact for c in diff.changes} == {"libk.so", "libnew.so"}
    assert infos(diff) == {"artifact added"}
    assert Row("libk.so", "artifact", "present", "absent", "dropped") in diff.rows
    assert Row("libnew.so", "artifact", "absent", "present", "added") in diff.rows


def test_additions_are_reported_never_judged() -> None:
    diff = compare(
        [lib(sass("90", frozenset({"scale"})))],
        [lib(sass("90"), sass("121"), ptx("121"))],
    )
    assert judged(diff) == set()
    assert diff.failed == ()
    assert diff.warned == ()
    assert {"sm_121 added", "compute_121 added", "gained kernel shift in sm_90"} <= infos(diff)


@pytest.mark.parametrize(
    ("warned", "levels"),
    [
        ((), {Level.FAIL}),
        ((Rule.DROPPED_TARGET,), {Level.WARN, Level.FAIL}),
        ((Rule.DROPPED_TARGET, Rule.LOST_NATIVE_ROUTE), {Level.WARN}),
    ],
)
def test_each_rule_has_its_own_severity(warned: tuple[Rule, ...], levels: set[Level]) -> None:
    diff = compare([V1], [lib(sass("90"), ptx("90"), ptx("121"))], Policy(frozenset(warned)))
    assert {c.level for c in diff.changes if c.rule is not None} == levels
    assert {c.rule for c in diff.warned} == set(warned)
    assert len(diff.failed) + len(diff.warned) == 2


@pytest.mark.parametrize(
    ("table", "warned"),
    [
        ({}, frozenset()),
        ({"dropped_target": "fail"}, frozenset()),
        ({"dropped_target": "warn"}, frozenset({Rule.DROPPED_TARGET})),
        (
            {"dropped_kernel": "warn", "newer_driver": "warn", "dropped_artifact": "fail"},
            frozenset({Rule.DROPPED_KERNEL, Rule.NEWER_DRIVER}),
        ),
    ],
)
def test_policy_from_the_configuration_table(
    table: dict[str, object], warned: frozenset[Rule]
) -> None:
    policy = Policy.from_mapping(table, "cuda-gate.toml")
    assert policy.warned == warned
    for rule in Rule:
        assert policy.level(rule) is (Level.WARN if rule in warned else Level.FAIL)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"dropped_targets": "warn"}, "x.toml: [baseline] 'dropped_targets' is no rule"),
        (
            {"dropped_target": "ignore"},
            'x.toml: [baseline] dropped_target must be "fail" or "warn"',
        ),
        ({"dropped_target": True}, "dropped_target must be"),
    ],
)
def test_a_bad_policy_is_a_config_error(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Policy.from_mapping(table, "x.toml")


def test_the_rule_keys_are_the_configuration_keys() -> None:
    assert [r.value for r in Rule] == [
        "dropped_artifact",
        "dropped_target",
        "dropped_kernel",
        "lost_native_route",
        "newer_driver",
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("9.0", "9.1", True),
        ("8.5", "8.6", True),  # 12.5 -> 12.7
        ("9.0", "9.0", False),
        ("9.1", "9.0", False),
        ("9.1", "10.0", True),  # beyond every rule
        ("10.0", "10.1", True),
        ("10.0", "10.0", False),  # the same ISA, even one beyond every rule
        ("5.0", "6.0", False),  # older than every rule: no claim
        ("5.0", "8.0", False),
    ],
)
def test_which_isa_needs_a_newer_driver(old: str, new: str, expected: bool) -> None:
    assert needs_newer_driver(Version.parse(old), Version.parse(new)) is expected


def test_the_table_rows_say_before_after_and_change() -> None:
    old = lib(sass("90", size=6872), sass("121", size=6000), ptx("90", "8.8", size=761))
    new = lib(sass("90", frozenset({"scale"}), size=5240), ptx("90", "9.0", size=405))
    rows = {r.quantity: r for r in compare([old], [new]).rows}
    assert rows["SASS targets"] == Row("libk.so", "SASS targets", "sm_90, sm_121", "sm_90",
                                       "-sm_121")  # fmt: skip
    assert rows["PTX targets"].change == "-"
    assert rows["sm_90 kernels"] == Row("libk.so", "sm_90 kernels", "2", "1", "-1")
    assert "compute_90 kernels" not in rows  # unchanged kernels: no row
    assert rows["sm_90 bytes"].change == "-1632 bytes (-23.7%)"
    assert rows["compute_90 bytes"].change == "-356 bytes (-46.8%)"
    assert rows["device code bytes"] == Row(
        "libk.so", "device code bytes", "13633", "5645", "-7988 bytes (-58.6%)"
    )
    assert rows["PTX ISA"] == Row("libk.so", "PTX ISA", "8.8", "9.0", "8.8 -> 9.0")
    assert rows["route on 12.1"].before == "exact SASS (sm_121)"
    assert rows["route on 9.0"].change == "-"


def test_gains_read_with_a_plus_and_equal_sizes_are_no_change() -> None:
    old = lib(sass("90", frozenset({"scale"})), ptx("90"))
    new = lib(sass("90"), sass("100"), ptx("90"))
    rows = {r.quantity: r for r in compare([old], [new]).rows}
    assert rows["SASS targets"].change == "+sm_100"
    assert rows["sm_90 kernels"].change == "+1"
    assert "sm_90 bytes" not in rows
    assert rows["device code bytes"].change == "+100 bytes (+90.9%)"  # 110 -> 210
    assert rows["PTX ISA"].change == "-"


def test_unknown_sizes_are_never_a_false_zero() -> None:
    old = lib(sass("90", size=None))
    new = lib(sass("90", size=100))
    diff = compare([old], [new])
    row = next(r for r in diff.rows if r.quantity == "device code bytes")
    assert (row.before, row.after, row.change) == ("unknown", "100", "unknown")
    assert not any(r.quantity == "sm_90 bytes" for r in diff.rows)


def test_routes_are_compared_on_the_devices_asked_for_too() -> None:
    diff = compare([lib(sass("90"))], [lib(sass("90"))], devices=[Capability.parse("10.0")])
    assert [r.quantity for r in diff.rows if r.quantity.startswith("route")] == [
        "route on 9.0",
        "route on 10.0",
    ]
    moved = compare([lib(ptx("90"))], [lib(ptx("90"), sass("90"))])
    assert "device 9.0: PTX JIT (compute_90, ISA 9.0, driver >= 13.0) -> exact SASS (sm_90)" in (
        infos(moved)
    )


def test_checks_one_per_artifact_passed_warned_or_failed() -> None:
    lost_target = Change("a.so", Level.FAIL, "sm_121 dropped", Rule.DROPPED_TARGET)
    lost_kernel = Change("a.so", Level.FAIL, "sm_90 lost kernel k", Rule.DROPPED_KERNEL)
    warned = Change("b.so", Level.WARN, "sm_121 dropped", Rule.DROPPED_TARGET)
    info = Change("c.so", Level.INFO, "sm_100 added")
    rows = tuple(Row(n, "SASS targets", "", "", "") for n in ("a.so", "b.so", "c.so"))
    found = checks(Diff(rows, (lost_kernel, lost_target, warned, info)), "v1")
    assert [(c.name, c.state) for c in found] == [
        ("a.so: compared with the baseline", CheckState.FAILED),
        ("b.so: compared with the baseline", CheckState.WARNED),
        ("c.so: compared with the baseline", CheckState.PASSED),
    ]
    assert {c.classname for c in found} == {CLASSNAME}
    # The cause is the first rule's in the rules' order, whatever order the losses came in.
    assert found[0].cause is Cause.WRONG_TARGET
    assert found[0].message == "lost against v1: sm_90 lost kernel k; sm_121 dropped"
    assert (found[1].cause, found[1].message) == (None, "lost against v1: sm_121 dropped")
    assert (found[2].cause, found[2].message) == (None, "nothing lost against v1")


@pytest.mark.parametrize(
    ("rule", "cause"),
    [
        (Rule.DROPPED_ARTIFACT, Cause.EVIDENCE),
        (Rule.DROPPED_TARGET, Cause.WRONG_TARGET),
        (Rule.DROPPED_KERNEL, Cause.MISSING_KERNEL),
        (Rule.LOST_NATIVE_ROUTE, Cause.MISSING_SASS),
        (Rule.NEWER_DRIVER, Cause.PTX_NEEDS_DRIVER),
    ],
)
def test_each_rule_fails_with_its_cause(rule: Rule, cause: Cause) -> None:
    diff = Diff((Row("a.so", "q", "", "", ""),), (Change("a.so", Level.FAIL, "x", rule),))
    (check,) = checks(diff, "v1")
    assert check.cause is cause


def test_a_long_list_of_losses_is_cut_in_the_message() -> None:
    lost = tuple(
        Change("a.so", Level.FAIL, f"sm_90 lost kernel k{i}", Rule.DROPPED_KERNEL) for i in range(7)
    )
    (check,) = checks(Diff((Row("a.so", "q", "", "", ""),), lost), "v1")
    assert check.message.endswith("sm_90 lost kernel k4; and 2 more")
    assert "k5" not in check.message
    short = checks(Diff((Row("a.so", "q", "", "", ""),), lost[:5]), "v1")
    assert "more" not in short[0].message


# --- a whole release against its baseline, row by row and change by change ---------------
# v1.2 shipped libold.so, libk.so for 8.0, 8.6 and 9.0 with ISA 8.8 PTX, libhost.so with
# no device code yet, and libdown.so; the release drops libold.so and 8.x from libk.so
# (adding 10.0 and 12.0), trades a kernel of sm_90, raises libk.so's ISA and lowers
# libdown.so's, gives libhost.so its first kernels and adds libnew.so.
BASELINE = (
    lib(sass("90"), name="libold.so"),
    lib(sass("80", size=4000), sass("86", size=4000), sass("90", size=5000),
        ptx("90", "8.8", size=700)),
    lib(name="libhost.so"),
    lib(sass("90"), ptx("90", "9.0"), name="libdown.so"),
)  # fmt: skip
RELEASE = (
    lib(sass("90", frozenset({"scale", "fill"}), size=5400), sass("100", size=5000),
        sass("120", size=5000), ptx("90", "9.0", size=760)),
    lib(sass("90"), name="libhost.so"),
    lib(sass("90"), ptx("90", "8.8"), name="libdown.so"),
    lib(sass("90"), name="libnew.so"),
)  # fmt: skip
ON_10 = (Capability(10, 0),)
JIT_88 = "PTX JIT (compute_90, ISA 8.8, driver >= 12.9)"
JIT_90 = "PTX JIT (compute_90, ISA 9.0, driver >= 13.0)"


def test_a_release_against_its_baseline_row_by_row() -> None:
    k, host, down = "libk.so", "libhost.so", "libdown.so"
    assert compare(BASELINE, RELEASE, devices=ON_10).rows == (
        Row("libold.so", "artifact", "present", "absent", "dropped"),
        Row(k, "SASS targets", "sm_80, sm_86, sm_90", "sm_90, sm_100, sm_120",
            "-sm_80 -sm_86 +sm_100 +sm_120"),
        Row(k, "PTX targets", "compute_90", "compute_90", "-"),
        Row(k, "sm_90 kernels", "2", "2", "-1 +1"),
        Row(k, "sm_90 bytes", "5000", "5400", "+400 bytes (+8.0%)"),
        Row(k, "compute_90 bytes", "700", "760", "+60 bytes (+8.6%)"),
        Row(k, "device code bytes", "13700", "16160", "+2460 bytes (+18.0%)"),
        Row(k, "PTX ISA", "8.8", "9.0", "8.8 -> 9.0"),
        Row(k, "route on 8.0", "exact SASS (sm_80)", "nothing", "changed"),
        Row(k, "route on 8.6", "exact SASS (sm_86)", "nothing", "changed"),
        Row(k, "route on 9.0", "exact SASS (sm_90)", "exact SASS (sm_90)", "-"),
        Row(k, "route on 10.0", JIT_88, "exact SASS (sm_100)", "changed"),
        Row(host, "SASS targets", "none", "sm_90", "+sm_90"),
        Row(host, "PTX targets", "none", "none", "-"),
        Row(host, "device code bytes", "0", "100", "+100 bytes"),  # no percent of nothing
        Row(host, "route on 10.0", "nothing", "nothing", "-"),
        Row(down, "SASS targets", "sm_90", "sm_90", "-"),
        Row(down, "PTX targets", "compute_90", "compute_90", "-"),
        Row(down, "device code bytes", "110", "110", "-"),
        Row(down, "PTX ISA", "9.0", "8.8", "9.0 -> 8.8"),
        Row(down, "route on 9.0", "exact SASS (sm_90)", "exact SASS (sm_90)", "-"),
        Row(down, "route on 10.0", JIT_90, JIT_88, "changed"),
        Row("libnew.so", "artifact", "absent", "present", "added"),
    )  # fmt: skip


def test_a_release_against_its_baseline_change_by_change() -> None:
    k, fail, info = "libk.so", Level.FAIL, Level.INFO
    assert compare(BASELINE, RELEASE, devices=ON_10).changes == (
        Change("libold.so", fail, "artifact dropped", Rule.DROPPED_ARTIFACT),
        Change(k, fail, "sm_80 dropped", Rule.DROPPED_TARGET),
        Change(k, fail, "sm_86 dropped", Rule.DROPPED_TARGET),
        Change(k, info, "sm_100 added"),
        Change(k, info, "sm_120 added"),
        Change(k, fail, "lost kernel shift from sm_90", Rule.DROPPED_KERNEL, "shift"),
        Change(k, info, "gained kernel fill in sm_90", kernel="fill"),
        Change(k, info, "sm_90 +400 bytes (+8.0%)"),
        Change(k, info, "compute_90 +60 bytes (+8.6%)"),
        Change(k, fail, "PTX ISA 8.8 -> 9.0 needs driver >= 13.0", Rule.NEWER_DRIVER),
        Change(k, fail, "device 8.0 lost its native route: exact SASS (sm_80) -> nothing",
               Rule.LOST_NATIVE_ROUTE),
        Change(k, fail, "device 8.6 lost its native route: exact SASS (sm_86) -> nothing",
               Rule.LOST_NATIVE_ROUTE),
        Change(k, info, f"device 10.0: {JIT_88} -> exact SASS (sm_100)"),
        Change("libhost.so", info, "sm_90 added"),
        Change("libdown.so", info, "PTX ISA 9.0 -> 8.8"),  # an older ISA needs no newer driver
        Change("libdown.so", info, f"device 10.0: {JIT_90} -> {JIT_88}"),
        Change("libnew.so", info, "artifact added"),
    )  # fmt: skip


def test_a_release_against_its_baseline_check_by_check() -> None:
    found = checks(compare(BASELINE, RELEASE, devices=ON_10), "v1.2")
    assert [(c.name.split(":")[0], c.state, c.cause, c.message) for c in found] == [
        ("libold.so", CheckState.FAILED, Cause.EVIDENCE, "lost against v1.2: artifact dropped"),
        (
            "libk.so",
            CheckState.FAILED,
            Cause.WRONG_TARGET,
            (
                "lost against v1.2: sm_80 dropped; sm_86 dropped; lost kernel shift from sm_90; "
                "PTX ISA 8.8 -> 9.0 needs driver >= 13.0; device 8.0 lost its native route: "
                "exact SASS (sm_80) -> nothing; and 1 more"
            ),
        ),
        # A passed artifact is followed by the rest.
        ("libhost.so", CheckState.PASSED, None, "nothing lost against v1.2"),
        ("libdown.so", CheckState.PASSED, None, "nothing lost against v1.2"),
        ("libnew.so", CheckState.PASSED, None, "nothing lost against v1.2"),
    ]


@pytest.mark.parametrize("warned", list(Rule))
def test_each_rule_warns_alone_when_the_configuration_says_so(warned: Rule) -> None:
    diff = compare(BASELINE, RELEASE, Policy(frozenset({warned})), ON_10)
    levels = {(c.rule, c.level) for c in diff.changes if c.rule is not None}
    assert levels == {(r, Level.WARN if r is warned else Level.FAIL) for r in Rule}


def test_an_unchanged_release_has_every_row_unchanged_and_no_change() -> None:
    diff = compare([V1], [V1])
    assert diff.changes == ()
    assert {r.change for r in diff.rows} == {"-"}
    assert [r.quantity for r in diff.rows] == [
        "SASS targets",
        "PTX targets",
        "device code bytes",
        "PTX ISA",
        "route on 9.0",
        "route on 12.1",
    ]


def test_a_ptx_target_of_unknown_isa_leaves_the_newest_isa_to_the_others() -> None:
    unknown = TargetCode(True, Target.parse("compute_80"), K, None, 10)
    old = lib(unknown, ptx("90", "8.8"))
    assert old.newest_isa() == Version(8, 8)
    assert lib(unknown).newest_isa() is None
    rows = {r.quantity: r for r in compare([old], [lib(unknown, ptx("90", "9.0"))]).rows}
    assert rows["PTX ISA"] == Row("libk.so", "PTX ISA", "8.8", "9.0", "8.8 -> 9.0")


def test_an_unknown_rule_is_refused_with_every_rule_named() -> None:
    with pytest.raises(ConfigError) as info:
        Policy.from_mapping({"dropped_targets": "warn"}, "cuda-gate.toml")
    assert str(info.value) == (
        "cuda-gate.toml: [baseline] 'dropped_targets' is no rule (dropped_artifact, "
        "dropped_target, dropped_kernel, lost_native_route, newer_driver)"
    )


def test_targets_lost_and_gained_are_said_by_sm_number_not_as_text() -> None:
    # As text, sm_100 sorts before sm_90; every column of the table orders by SM number.
    found = compare((lib(sass("90"), sass("100")),), (lib(sass("80"), sass("120")),))
    (targets,) = [r for r in found.rows if r.quantity == "SASS targets"]
    assert (targets.before, targets.after) == ("sm_90, sm_100", "sm_80, sm_120")
    assert targets.change == "-sm_90 -sm_100 +sm_80 +sm_120"
    said = [c.what for c in found.changes if c.what.endswith(("dropped", "added"))]
    assert said == ["sm_90 dropped", "sm_100 dropped", "sm_80 added", "sm_120 added"]
