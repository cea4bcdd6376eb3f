"""The decision core's tables, row by row, as CUDA-FACTS.md and docs/configuration.md state them.

Each table here is written from the sentences it cites, not from the code: the code must
agree with every row. Rows seen on the lent H200 (9.0, driver 580 / CUDA 13.0) are
marked ``H200``; the gpu tier runs them there (tests/test_gpu_decisions.py).
"""

from __future__ import annotations

import pytest

from gate.errors import ConfigError
from gate.rules.compat import Form, rules, sass_runs_on
from gate.rules.require import Requirement, why_not
from gate.rules.routes import Path, Route, jit_support, judge, min_driver, route
from gate.rules.targets import Capability, Target, Variant, Version, parse_required_target

pytestmark = pytest.mark.unit


def t(text: str) -> Target:
    return Target.parse(text)


def v(text: str) -> Version:
    return Version.parse(text)


# --- What satisfies a required target (docs/configuration.md, its target-forms table) ----
# (required, code, satisfies, seen): code of the same SM number, SASS (sm_) or PTX (compute_).
REQUIREMENT_ROWS = [
    # A required sm_XYa: only sm_XYa SASS and compute_XYa PTX (issue 20, item 1).
    ("sm_90a", "sm_90a", True, "H200"),
    ("sm_90a", "sm_90", False, "H200"),  # plain code lacks wgmma, setmaxnreg
    ("sm_90a", "compute_90a", True, "H200"),
    ("sm_90a", "compute_90", False, "H200"),
    ("sm_100a", "sm_100f", False, ""),  # family code lacks tcgen05's arch-only parts
    ("sm_121a", "sm_121", False, ""),
    ("sm_121a", "compute_121f", False, ""),
    # A required sm_XYf: only the family build.
    ("sm_120f", "sm_120f", True, ""),
    ("sm_120f", "sm_120", False, ""),  # plain code lacks the family features
    ("sm_120f", "sm_120a", False, ""),  # runs on 12.0 only, not on 12.1
    ("sm_120f", "compute_120f", True, ""),
    ("sm_120f", "compute_120", False, ""),
    ("sm_100f", "compute_100a", False, ""),
    # A required plain sm_XY: plain SASS or the family build (it serves every device the
    # plain build runs on); PTX must be plain, the only PTX that JITs for later majors.
    ("sm_90", "sm_90", True, "H200"),
    ("sm_90", "compute_90", True, "H200"),
    ("sm_90", "sm_90a", False, "H200"),
    ("sm_120", "sm_120a", False, ""),  # sgl-kernel: sm_120a does not run on 12.1
    ("sm_120", "sm_120f", True, ""),
    ("sm_120", "compute_120f", False, ""),
    ("sm_100", "sm_100f", True, ""),
    ("sm_121", "sm_121a", False, ""),
    # Never another SM number, whatever its form.
    ("sm_121", "sm_120", False, ""),
    ("sm_120", "sm_121", False, ""),
    ("sm_90", "compute_80", False, "H200"),
    ("sm_90a", "sm_100a", False, ""),
]


@pytest.mark.parametrize(("required", "code", "ok", "seen"), REQUIREMENT_ROWS)
def test_what_satisfies_a_required_target(required: str, code: str, ok: bool, seen: str) -> None:
    assert Requirement.of_target(t(required)).satisfied_by(t(code)) is ok, seen


# The probed device's own requirement: code built for its capability, in any form.
DEVICE_ROWS = [
    (Capability(9, 0), "sm_90", True, "H200"),
    (Capability(9, 0), "sm_90a", True, "H200"),
    (Capability(9, 0), "compute_90a", True, "H200"),
    (Capability(9, 0), "compute_90", True, "H200"),
    (Capability(9, 0), "sm_80", False, "H200"),
    (Capability(9, 0), "compute_80", False, "H200"),  # JITs there, but is not built for it
    (Capability(12, 1), "sm_121f", True, ""),
    (Capability(12, 1), "sm_121a", True, ""),
    (Capability(12, 1), "sm_120", False, ""),  # runs there, but is not the seed's sm_121
    (Capability(12, 1), "sm_120f", False, ""),
    (Capability(10, 3), "compute_103f", True, ""),
]


@pytest.mark.parametrize(("device", "code", "ok", "seen"), DEVICE_ROWS)
def test_what_satisfies_the_probed_device(
    device: Capability, code: str, ok: bool, seen: str
) -> None:
    assert Requirement.of_device(device).satisfied_by(t(code)) is ok, seen


def test_every_form_is_satisfied_by_its_own_code_in_sass_and_ptx() -> None:
    for text in ("sm_75", "sm_90a", "sm_100f", "sm_121", "sm_121a", "sm_120f"):
        requirement = Requirement.of_target(t(text))
        assert requirement.satisfied_by(t(text))
        assert requirement.satisfied_by(t(text).as_ptx())


@pytest.mark.parametrize(
    ("required", "sass", "ptx"),
    [
        ("sm_90", ["sm_90"], ["compute_90"]),  # 9.0 has no family: there is no sm_90f
        ("sm_120", ["sm_120", "sm_120f"], ["compute_120"]),
        ("sm_130", ["sm_130", "sm_130f"], ["compute_130"]),  # newer than the listed families
        ("sm_90a", ["sm_90a"], ["compute_90a"]),
        ("sm_120f", ["sm_120f"], ["compute_120f"]),
    ],
)
def test_the_accepted_lists_name_the_table_row(
    required: str, sass: list[str], ptx: list[str]
) -> None:
    requirement = Requirement.of_target(t(required))
    assert [str(x) for x in requirement.accepted(ptx=False)] == sass
    assert [str(x) for x in requirement.accepted(ptx=True)] == ptx


def test_the_device_requirement_accepts_every_variant_and_is_labelled_by_the_device() -> None:
    requirement = Requirement.of_device(Capability(12, 1))
    assert [str(x) for x in requirement.accepted(ptx=False)] == ["sm_121", "sm_121f", "sm_121a"]
    h200 = Requirement.of_device(Capability(9, 0))
    assert [str(x) for x in h200.accepted(ptx=True)] == ["compute_90", "compute_90a"]
    assert requirement.sass_label() == requirement.ptx_label() == "device 12.1"
    named = Requirement.of_target(t("compute_90a"))  # a PTX spelling names its SASS form
    assert (named.target, named.form) == (t("sm_90a"), Form.ARCH)
    assert (named.sass_label(), named.ptx_label()) == ("sm_90a", "compute_90a")


@pytest.mark.parametrize(
    ("required", "present", "ptx", "words"),
    [
        ("sm_90a", ["sm_90"], False, "sm_90 present, but sm_90a needs sm_90a: plain and family"),
        ("sm_120f", ["sm_120a"], False, "but sm_120f needs sm_120f: plain code lacks the family"),
        ("sm_120", ["sm_120a"], False, "arch-specific code runs on X.Y only"),
        ("sm_120", ["compute_120f"], True, "a/f PTX JIT-compiles for its own devices only"),
        (
            "sm_90",
            ["sm_80"],
            False,
            "no SASS for sm_90 (needs sm_90); SASS targets: sm_80",
        ),
        ("sm_90", [], True, "no PTX for compute_90 (needs compute_90); PTX targets: none"),
    ],
)
def test_why_a_requirement_is_not_met_names_what_is_there_and_why_it_is_not_enough(
    required: str, present: list[str], ptx: bool, words: str
) -> None:
    found = tuple(t(x) for x in present)
    assert words in why_not(Requirement.of_target(t(required)), found, ptx=ptx)


def test_a_capability_names_its_plain_target_and_a_target_keeps_its_form() -> None:
    assert parse_required_target("12.1") == t("sm_121")
    assert parse_required_target("121") == t("sm_121")
    assert parse_required_target("compute_90a") == t("sm_90a")
    assert parse_required_target(" sm_100f ") == t("sm_100f")


@pytest.mark.parametrize("text", ["sm121", "GB10", "12.x"])
def test_a_required_target_of_no_form_is_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_required_target(text)
    assert info.value.one_line() == (
        f"not a CUDA target (like sm_121, sm_90a, sm_120f, 12.1 or 121): {text!r}"
    )


# --- PTX ISA against drivers -------------------------------------------------------------
# (ISA, driver CUDA version, can JIT?): CUDA-FACTS.md's table, the 9.x series, and what
# the rules cannot say. None: no claim either way.
ISA_ROWS = [
    ("9.0", "13.0", True, "H200"),  # nvcc 13.0's own PTX on driver 580
    ("9.1", "13.0", False, "H200"),
    ("9.2", "13.0", False, ""),  # vllm 47397: PTX of nvcc 13.3 on driver 580
    ("9.2", "13.2", True, ""),
    ("8.8", "12.8", False, ""),
    ("8.8", "12.9", True, ""),
    ("8.6", "12.6", False, ""),  # 12.6 shipped no new ISA: 8.6 needs 12.7
    ("8.6", "12.7", True, ""),
    ("7.8", "11.8", True, ""),
    ("7.8", "11.7", False, ""),
    ("10.0", "13.9", False, ""),  # newer than every ISA the rules know, on a driver they know
    ("10.0", "14.0", None, ""),  # both past the rules: no claim
    ("5.0", "13.0", None, ""),  # older than the table: no claim
]


@pytest.mark.parametrize(("isa", "driver", "can", "seen"), ISA_ROWS)
def test_whether_a_driver_can_jit_an_isa(
    isa: str, driver: str, can: bool | None, seen: str
) -> None:
    assert jit_support(v(isa), v(driver)) is can, seen


def test_without_an_isa_or_a_driver_no_claim_is_made() -> None:
    assert jit_support(None, v("13.0")) is None
    assert jit_support(v("9.0"), None) is None
    assert min_driver(v("9.5")) == v("13.5")


def test_the_rules_know_where_their_isa_and_driver_knowledge_ends() -> None:
    assert rules().max_known_isa() == v("9.9")
    assert rules().max_known_driver() == v("13.9")


# --- Routes -------------------------------------------------------------------------------
def test_a_kernel_only_in_builds_for_other_devices_is_not_expected_here() -> None:
    only_a = route((t("sm_90a"),), ((t("compute_90a"), v("9.0")),), Capability(12, 1))
    assert only_a.path is Path.OTHER_DEVICES
    assert not only_a.expected()
    assert not only_a.usable(v("13.0"))
    only_f = route((t("sm_100f"),), (), Capability(12, 1))
    assert only_f.path is Path.OTHER_DEVICES
    # One plain build anywhere and the kernel is expected: it has nothing for 12.1.
    plain = route((t("sm_90a"), t("sm_80")), (), Capability(12, 1))
    assert plain.path is Path.NONE
    assert plain.expected()
    assert route((), (), Capability(12, 1)).path is Path.NONE  # no code at all


def test_route_usable_follows_the_driver_rule() -> None:
    jit = route((), ((t("compute_90"), v("9.2")),), Capability(9, 0))
    assert jit.path is Path.PTX_JIT
    assert jit.min_driver == v("13.2")
    assert not jit.usable(v("13.0"))
    assert jit.usable(v("13.2"))
    assert jit.usable(None)  # no driver known: no claim against it
    assert Route(Path.EXACT_SASS, t("sm_90")).usable(v("11.0"))
    assert not Route(Path.NONE).usable(None)


@pytest.mark.parametrize(
    ("routes", "per_kernel", "runs"),
    [
        # The project's own code: every kernel built for the device needs usable code.
        ([Path.EXACT_SASS, Path.NONE], True, False),
        ([Path.EXACT_SASS, Path.OTHER_DEVICES], True, True),  # sm_90a-only kernel on 12.1
        ([Path.OTHER_DEVICES], True, False),  # nothing built for it at all
        ([], True, False),
        ([Path.FAMILY_SASS, Path.PTX_JIT], True, True),
        # Any other library, as a whole: something in it must run.
        ([Path.EXACT_SASS, Path.NONE], False, True),
        ([Path.NONE, Path.OTHER_DEVICES], False, False),
        ([Path.COMPATIBLE_SASS], False, True),
        ([], False, False),
    ],
)
def test_an_artifact_runs_on_a_device_per_kernel_or_as_a_whole(
    routes: list[Path], per_kernel: bool, runs: bool
) -> None:
    found = [Route(p, t("sm_90") if p.is_native else None) for p in routes]
    assert judge(found, v("13.0"), per_kernel=per_kernel) is runs


def test_a_library_whose_only_ptx_needs_a_newer_driver_does_not_run_as_a_whole() -> None:
    too_new = Route(Path.PTX_JIT, t("compute_90"), v("9.2"), v("13.2"))
    assert not judge([too_new], v("13.0"), per_kernel=False)
    assert judge([too_new], v("13.2"), per_kernel=False)


# --- Route choice, order-independent -----------------------------------------------------
@pytest.mark.parametrize(
    ("sass", "ptx", "cap", "expected"),
    [
        (["sm_80", "sm_86"], [], "8.9", Route(Path.COMPATIBLE_SASS, t("sm_86"))),  # newest minor
        (["sm_86", "sm_80"], [], "8.9", Route(Path.COMPATIBLE_SASS, t("sm_86"))),
        (["sm_100f", "sm_100"], [], "10.3", Route(Path.COMPATIBLE_SASS, t("sm_100"))),  # plain wins
        (["sm_100", "sm_100f"], [], "10.3", Route(Path.COMPATIBLE_SASS, t("sm_100"))),
        (["sm_120f"], [], "12.1", Route(Path.FAMILY_SASS, t("sm_120f"))),
        (["sm_90a", "sm_90"], [], "9.0", Route(Path.EXACT_SASS, t("sm_90"))),  # plain exact first
        (["sm_90a"], [], "9.0", Route(Path.EXACT_SASS, t("sm_90a"))),
        (
            [],
            [("compute_80", "8.0"), ("compute_90", "9.0")],
            "9.0",
            Route(Path.PTX_JIT, t("compute_90"), v("9.0"), v("13.0")),  # the newest target
        ),
        (
            [],
            [("compute_90", "9.2"), ("compute_90", "9.0")],
            "9.0",
            Route(Path.PTX_JIT, t("compute_90"), v("9.0"), v("13.0")),  # the oldest ISA
        ),
        (
            [],
            [("compute_90", "9.0"), ("compute_90", "8.8")],
            "9.0",
            Route(Path.PTX_JIT, t("compute_90"), v("8.8"), v("12.9")),
        ),
        (
            [],
            [("compute_90", None), ("compute_90", "9.1")],
            "9.0",
            Route(Path.PTX_JIT, t("compute_90"), v("9.1"), v("13.1")),  # a known ISA first
        ),
        ([], [("compute_90", None)], "9.0", Route(Path.PTX_JIT, t("compute_90"))),
        (
            [],
            [("compute_90", "9.0"), ("compute_90a", "9.1")],
            "9.0",
            Route(Path.PTX_JIT, t("compute_90a"), v("9.1"), v("13.1")),  # a/f before plain
        ),
        (
            [],
            [("compute_100f", None), ("compute_100a", None)],
            "10.0",
            Route(Path.PTX_JIT, t("compute_100a")),  # ties by name: never by entry order
        ),
        (
            [],
            [("compute_100a", None), ("compute_100f", None)],
            "10.0",
            Route(Path.PTX_JIT, t("compute_100a")),
        ),
        (
            [],
            [("compute_100f", "9.0"), ("compute_100a", "9.0")],
            "10.0",
            Route(Path.PTX_JIT, t("compute_100a"), v("9.0"), v("13.0")),
        ),
        (
            ["sm_80"],
            [("compute_80", "8.0")],
            "9.0",
            Route(Path.PTX_JIT, t("compute_80"), v("8.0"), v("12.0")),
        ),
    ],
)
def test_which_route_a_kernel_takes(
    sass: list[str], ptx: list[tuple[str, str | None]], cap: str, expected: Route
) -> None:
    found = route(
        tuple(t(s) for s in sass),
        tuple((t(p), v(i) if i else None) for p, i in ptx),
        Capability.parse(cap),
    )
    assert found == expected


@pytest.mark.parametrize(
    ("r", "text"),
    [
        (
            Route(Path.PTX_JIT, t("compute_90"), v("9.0"), v("13.0")),
            "PTX JIT (compute_90, ISA 9.0, driver >= 13.0)",
        ),
        (Route(Path.PTX_JIT, t("compute_90"), v("10.0")), "PTX JIT (compute_90, ISA 10.0)"),
        (Route(Path.PTX_JIT, t("compute_90")), "PTX JIT (compute_90)"),
        (Route(Path.FAMILY_SASS, t("sm_120f")), "family SASS (sm_120f)"),
        (Route(Path.NONE), "nothing"),
        (Route(Path.OTHER_DEVICES), "only for other devices"),
    ],
)
def test_how_a_route_is_said(r: Route, text: str) -> None:
    assert r.describe() == text


def test_a_kernel_whose_ptx_this_driver_cannot_jit_fails_the_per_kernel_judgment() -> None:
    too_new = Route(Path.PTX_JIT, t("compute_90"), v("9.2"), v("13.2"))
    native = Route(Path.EXACT_SASS, t("sm_90"))
    assert not judge([native, too_new], v("13.0"), per_kernel=True)
    assert judge([native, too_new], v("13.2"), per_kernel=True)
    assert judge([native, too_new], None, per_kernel=True)


# --- Targets: parsing at the edges -------------------------------------------------------
def test_an_sm_number_below_10_is_refused_and_10_is_a_target() -> None:
    with pytest.raises(ConfigError) as info:
        Target.parse("sm_09")
    assert info.value.one_line() == "not a CUDA target (SM number too small): 'sm_09'"
    assert (Target.parse("sm_10").major, Target.parse("sm_10").minor) == (1, 0)


def test_long_text_is_cut_in_a_message_at_40_characters() -> None:
    exact = "x" * 40
    with pytest.raises(ConfigError) as info:
        Capability.parse(exact)
    assert info.value.one_line().endswith(f": {exact!r}")
    longer = "y" * 41
    with pytest.raises(ConfigError) as info:
        Capability.parse(longer)
    assert info.value.one_line().endswith(f": {'y' * 40!r}... (41 characters)")


def test_targets_are_built_from_numbers_and_change_form() -> None:
    assert Target.from_number(121, Variant.ARCH, virtual=True) == t("compute_121a")
    assert Target.from_number(90, virtual=False) == t("sm_90")
    assert t("compute_100f").plain() == t("compute_100")
    assert t("sm_100f").plain() == t("sm_100")
    assert t("compute_90a").as_sass() == t("sm_90a")
    assert t("sm_120f").as_ptx() == t("compute_120f")
    assert Capability(12, 1).sm() == t("sm_121")
    assert parse_required_target("lto_90") == t("sm_90")


def test_a_family_serves_only_its_listed_members_not_every_minor() -> None:
    # sm_100f lists 10.0 and 10.3: a 10.1 (no such device) is not in the family.
    assert not sass_runs_on(t("sm_100f"), Capability(10, 1))
    assert sass_runs_on(t("sm_100"), Capability(10, 1))


@pytest.mark.parametrize(
    ("required", "present", "ptx", "message"),
    [
        (
            "sm_90a",
            ["sm_90", "sm_80"],
            False,
            (
                "no SASS for sm_90a: sm_90 present, but sm_90a needs sm_90a: plain and family code "
                "lack the arch-specific features (wgmma, setmaxnreg, tcgen05); SASS targets: "
                "sm_90 sm_80"
            ),
        ),
        (
            "sm_120f",
            ["sm_120"],
            False,
            (
                "no SASS for sm_120f: sm_120 present, but sm_120f needs sm_120f: plain code lacks "
                "the "
                "family features, and arch-specific code runs on X.Y only; SASS targets: sm_120"
            ),
        ),
        (
            "sm_120",
            ["sm_120a"],
            False,
            (
                "no SASS for sm_120: sm_120a present, but sm_120 needs sm_120 or sm_120f: "
                "arch-specific code runs on X.Y only (sm_120a does not run on 12.1); SASS "
                "targets: sm_120a"
            ),
        ),
        (
            "sm_120",
            ["compute_120f"],
            True,
            (
                "no PTX for compute_120: compute_120f present, but compute_120 needs compute_120: "
                "a/f "
                "PTX JIT-compiles for its own devices only, never for a later major; PTX targets: "
                "compute_120f"
            ),
        ),
        ("sm_121", [], False, "no SASS for sm_121 (needs sm_121 or sm_121f); SASS targets: none"),
        (
            "sm_120f",
            ["sm_120", "sm_120a", "sm_90"],
            False,
            (
                "no SASS for sm_120f: sm_120 sm_120a present, but sm_120f needs sm_120f: plain "
                "code lacks the family features, and arch-specific code runs on X.Y only; SASS "
                "targets: sm_120 sm_120a sm_90"
            ),
        ),
    ],
)
def test_why_a_requirement_is_not_met_word_for_word(
    required: str, present: list[str], ptx: bool, message: str
) -> None:
    found = tuple(t(x) for x in present)
    assert why_not(Requirement.of_target(t(required)), found, ptx=ptx) == message
