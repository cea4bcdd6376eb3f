"""The compatibility rules of CUDA-FACTS.md, one test per row, on every named device."""

from __future__ import annotations

import pytest

from gate.errors import ConfigError
from gate.rules.compat import family_members, ptx_jits_for, sass_runs_on
from gate.rules.routes import Path, min_driver, route
from gate.rules.targets import (
    Capability,
    Target,
    Variant,
    Version,
    parse_target_or_capability,
)

pytestmark = pytest.mark.unit

GB10 = Capability(12, 1)
THOR = Capability(11, 0)
H200 = Capability(9, 0)
B200 = Capability(10, 0)
B300 = Capability(10, 3)
RTX50 = Capability(12, 0)


def t(text: str) -> Target:
    return Target.parse(text)


@pytest.mark.parametrize(
    ("text", "major", "minor", "variant", "virtual"),
    [
        ("sm_121", 12, 1, Variant.NONE, False),
        ("sm_90a", 9, 0, Variant.ARCH, False),
        ("sm_120f", 12, 0, Variant.FAMILY, False),
        ("compute_100f", 10, 0, Variant.FAMILY, True),
        ("compute_75", 7, 5, Variant.NONE, True),
        ("sm_110", 11, 0, Variant.NONE, False),
    ],
)
def test_target_parses_and_prints_round_trip(
    text: str, major: int, minor: int, variant: Variant, virtual: bool
) -> None:
    target = t(text)
    assert (target.major, target.minor, target.variant, target.virtual) == (
        major,
        minor,
        variant,
        virtual,
    )
    assert str(target) == text


@pytest.mark.parametrize("bad", ["sm121", "sm_", "gfx90a", "sm_9", "sm_90x", "compute_", ""])
def test_bad_target_text_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="not a CUDA target"):
        Target.parse(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12.1", GB10),
        ("121", GB10),
        ("9.0", H200),
        ("90", H200),
        ("sm_110", THOR),
        ("compute_121", GB10),
    ],
)
def test_capability_accepts_dotted_probe_and_target_forms(text: str, expected: Capability) -> None:
    assert parse_target_or_capability(text) == expected
    assert str(expected) == f"{expected.major}.{expected.minor}"


def test_capability_rejects_garbage() -> None:
    with pytest.raises(ConfigError, match="compute capability"):
        Capability.parse("twelve")


# Row 1: SASS runs on the same major at an equal or higher minor; never across majors.
@pytest.mark.parametrize(
    ("sass", "cap", "runs"),
    [
        ("sm_120", GB10, True),  # sm_120 SASS serves DGX Spark
        ("sm_121", GB10, True),
        ("sm_121", RTX50, False),  # a newer minor never runs on an older one
        ("sm_80", H200, False),  # observed on H200: sm_80 SASS does not run on 9.0
        ("sm_90", H200, True),
        ("sm_100", B300, True),
        ("sm_100", GB10, False),  # different major
        ("sm_110", THOR, True),
        ("sm_100", THOR, False),
        ("sm_90", GB10, False),
    ],
)
def test_sass_same_major_rule(sass: str, cap: Capability, runs: bool) -> None:
    assert sass_runs_on(t(sass), cap) is runs


# Row 2: PTX JIT-compiles forward across majors, never backwards.
@pytest.mark.parametrize(
    ("ptx", "cap", "jits"),
    [
        ("compute_75", H200, True),  # observed on H200 under forced JIT
        ("compute_120", H200, False),  # observed: "no kernel image is available"
        ("compute_90", GB10, True),
        ("compute_121", GB10, True),
        ("compute_121", RTX50, False),
        ("compute_90", THOR, True),
        ("compute_110", GB10, True),
    ],
)
def test_ptx_forward_jit_rule(ptx: str, cap: Capability, jits: bool) -> None:
    assert ptx_jits_for(t(ptx), cap) is jits


# Row 3: architecture-specific targets run and JIT only on exactly X.Y.
@pytest.mark.parametrize(
    ("target", "cap", "ok"),
    [
        ("sm_90a", H200, True),  # observed on H200
        ("sm_121a", GB10, True),
        ("sm_120a", GB10, False),
        ("sm_100a", B300, False),
    ],
)
def test_arch_specific_is_exact_only(target: str, cap: Capability, ok: bool) -> None:
    assert sass_runs_on(t(target), cap) is ok
    assert ptx_jits_for(t(target).as_ptx(), cap) is ok


def test_arch_specific_ptx_never_jits_for_a_newer_device() -> None:
    assert not ptx_jits_for(t("compute_90a"), GB10)
    assert ptx_jits_for(t("compute_90"), GB10)


# Row 4: family-specific targets serve their family: 100f -> 10.0, 10.3; 120f -> 12.0, 12.1.
@pytest.mark.parametrize(
    ("target", "cap", "ok"),
    [
        ("sm_100f", B200, True),
        ("sm_100f", B300, True),
        ("sm_100f", THOR, False),
        ("sm_120f", RTX50, True),
        ("sm_120f", GB10, True),
        ("sm_121f", GB10, True),
        ("sm_121f", RTX50, False),
        ("sm_103f", B200, False),
    ],
)
def test_family_specific_rule(target: str, cap: Capability, ok: bool) -> None:
    assert sass_runs_on(t(target), cap) is ok


def test_unknown_future_family_falls_back_to_same_major_higher_minor() -> None:
    members = family_members(t("sm_130f"))
    assert Capability(13, 0) in members
    assert Capability(13, 5) in members
    assert Capability(14, 0) not in members


# PTX ISA -> minimum driver: every row of the table, plus the 9.x extrapolation.
@pytest.mark.parametrize(
    ("isa", "driver"),
    [
        ("7.8", "11.8"),
        ("8.0", "12.0"),
        ("8.1", "12.1"),
        ("8.2", "12.2"),
        ("8.3", "12.3"),
        ("8.4", "12.4"),
        ("8.5", "12.5"),
        ("8.6", "12.7"),
        ("8.7", "12.8"),
        ("8.8", "12.9"),
        ("9.0", "13.0"),
        ("9.1", "13.1"),
        ("9.2", "13.2"),
    ],
)
def test_ptx_isa_minimum_driver(isa: str, driver: str) -> None:
    assert min_driver(Version.parse(isa)) == Version.parse(driver)


def test_unknown_old_isa_has_no_claimed_driver() -> None:
    assert min_driver(Version(5, 0)) is None


def test_torch_like_library_on_gb10_runs_from_sm120_sass() -> None:
    sass = (t("sm_75"), t("sm_80"), t("sm_86"), t("sm_90"), t("sm_100"), t("sm_120"))
    r = route(sass, (), GB10)
    assert r.path is Path.COMPATIBLE_SASS
    assert r.target == t("sm_120")
    assert route(sass, (), Capability(13, 0)).path is Path.NONE  # no PTX: nothing to JIT


def test_route_prefers_exact_sass_then_ptx_with_min_driver() -> None:
    assert route((t("sm_90"),), (), H200).path is Path.EXACT_SASS
    jit = route((t("sm_80"),), ((t("compute_80"), Version(8, 8)),), H200)
    assert jit.path is Path.PTX_JIT
    assert jit.min_driver == Version(12, 9)
    assert "driver >= 12.9" in jit.describe()


def test_family_sass_route_on_gb10() -> None:
    r = route((t("sm_120f"),), (), GB10)
    assert r.path is Path.FAMILY_SASS
    assert not route((t("sm_120a"),), (), GB10).path.is_native


HUGE = "1" * 5000


@pytest.mark.parametrize(
    ("parse", "text", "words"),
    [
        (Target.parse, f"sm_{HUGE}", "not a CUDA target"),
        (Target.parse, "sm_9\u0660", "not a CUDA target"),  # an Arabic-Indic digit
        (Target.parse, "sm_\u00b2\u00b2", "not a CUDA target"),
        (Capability.parse, f"{HUGE}.0", "compute capability"),
        (Capability.parse, f"9.{HUGE}", "compute capability"),
        (Capability.parse, "9.10", "compute capability"),  # SM numbers have one-digit minors
        (Capability.parse, HUGE, "compute capability"),
        (Version.parse, f"{HUGE}.0", "MAJOR.MINOR"),
        (Version.parse, "1\u00b2.0", "MAJOR.MINOR"),
        (parse_target_or_capability, f"compute_{HUGE}", "compute capability"),
    ],
)
def test_absurd_numbers_are_one_short_config_error(parse: object, text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        parse(text)  # type: ignore[operator]
    line = info.value.one_line()
    assert "\n" not in line
    assert len(line) < 200


def test_device_option_with_absurd_number_exits_with_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gate.cli import main
    from gate.errors import ExitCode

    with pytest.raises(SystemExit) as stopped:
        main(["inspect", "--device", HUGE, "--no-detect", __file__])
    assert stopped.value.code == ExitCode.USAGE
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("cuda-gate inspect: error: argument --device: not a compute capability")
