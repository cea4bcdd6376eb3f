"""compat.json as validated records, and every target of CUDA-FACTS.md on every device.

The expectations are written here from CUDA-FACTS.md's sentences, not from the code:
the table below is the rule stated once more, independently, and the code must agree
on every (target, device) pair.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gate.errors import ConfigError
from gate.rules.compat import DATA, FamilyRule, load, ptx_jits_for, rules, sass_runs_on
from gate.rules.routes import min_driver
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit

# CUDA 13.0's --list-gpu-code on x86-64, plus the a/f variants named in CUDA-FACTS.md.
PLAIN = ["75", "80", "86", "87", "88", "89", "90", "100", "103", "110", "120", "121"]
ARCH = ["90a", "100a", "103a", "110a", "120a", "121a"]
FAMILY = ["100f", "103f", "110f", "120f", "121f"]
DEVICES = {
    "RTX 20xx (7.5)": Capability(7, 5),
    "A100 (8.0)": Capability(8, 0),
    "RTX 30xx (8.6)": Capability(8, 6),
    "Orin (8.7)": Capability(8, 7),
    "8.8": Capability(8, 8),
    "RTX 40xx (8.9)": Capability(8, 9),
    "H200 (9.0)": Capability(9, 0),
    "B200 (10.0)": Capability(10, 0),
    "B300 (10.3)": Capability(10, 3),
    "Thor (11.0)": Capability(11, 0),
    "RTX 50xx (12.0)": Capability(12, 0),
    "GB10 / DGX Spark (12.1)": Capability(12, 1),
}
# Family members as CUDA-FACTS.md lists them (100f -> 10.0 and 10.3; 120f -> 12.0 and 12.1).
FAMILIES = {
    100: {(10, 0), (10, 3)},
    103: {(10, 3)},
    110: {(11, 0)},
    120: {(12, 0), (12, 1)},
    121: {(12, 1)},
}


def _sass_rule(number: int, variant: str, cap: Capability) -> bool:
    major, minor = divmod(number, 10)
    if variant == "a":  # runs only on exactly X.Y
        return (cap.major, cap.minor) == (major, minor)
    if variant == "f":  # the members of its family
        return (cap.major, cap.minor) in FAMILIES[number]
    return cap.major == major and cap.minor >= minor  # same major, minor >= Y


def _ptx_rule(number: int, variant: str, cap: Capability) -> bool:
    if variant:  # a/f PTX JITs only where its SASS would run
        return _sass_rule(number, variant, cap)
    return cap.number >= number  # forward across majors


CASES = [
    (f"{prefix}_{t}", device)
    for t in PLAIN + ARCH + FAMILY
    for prefix in ("sm", "compute")
    for device in DEVICES
]


@pytest.mark.parametrize(("text", "device"), CASES)
def test_every_target_on_every_device(text: str, device: str) -> None:
    target, cap = Target.parse(text), DEVICES[device]
    number, variant = target.number, target.variant.value
    if target.virtual:
        assert ptx_jits_for(target, cap) is _ptx_rule(number, variant, cap)
    else:
        assert sass_runs_on(target, cap) is _sass_rule(number, variant, cap)


@pytest.mark.parametrize(
    ("text", "cap", "runs"),
    [
        ("sm_80", Capability(9, 0), False),  # observed on H200
        ("sm_90a", Capability(9, 0), True),  # observed on H200
        ("sm_120", Capability(12, 1), True),  # torch's sm_120 SASS serves GB10
        ("sm_110", Capability(11, 0), True),  # Thor, renamed from sm_101 in CUDA 13.0
        ("sm_121a", Capability(12, 0), False),
    ],
)
def test_observed_and_named_devices(text: str, cap: Capability, runs: bool) -> None:
    assert sass_runs_on(Target.parse(text), cap) is runs


def test_ptx_observed_on_h200() -> None:
    assert ptx_jits_for(Target.parse("compute_75"), Capability(9, 0))
    assert not ptx_jits_for(Target.parse("compute_120"), Capability(9, 0))


def test_isa_rows_series_and_no_claim_past_them() -> None:
    compat = rules()
    assert compat is rules()  # loaded once
    assert compat.isa_table[Version(8, 6)] == Version(12, 7)  # 12.6 shipped no new ISA
    assert min_driver(Version(9, 2)) == Version(13, 2)  # the 9.x series rule
    assert min_driver(Version(10, 0)) is None  # no series: no claim
    assert min_driver(Version(5, 0)) is None
    assert compat.unlisted_family is FamilyRule.SAME_MAJOR_AT_OR_ABOVE
    assert set(compat.families) == set(FAMILIES)


def _doc() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def _broken(change: str) -> dict[str, Any]:
    doc = _doc()
    if change == "version":
        doc["version"] = 1
    elif change == "isa":
        doc["ptx_isa_min_driver"]["table"]["8.9"] = "12.0"
    elif change == "isa text":
        doc["ptx_isa_min_driver"]["table"]["eight"] = "12.0"
    elif change == "series":
        doc["ptx_isa_min_driver"]["series"][0]["driver_major"] = 14
    elif change == "family member":
        doc["families"]["listed"]["sm_120f"] = ["12.0", "13.0"]
    elif change == "family target":
        doc["families"]["listed"]["sm_120a"] = ["12.0"]
    elif change == "rule":
        doc["families"]["unlisted"] = "any"
    elif change == "source":
        doc["families"]["source"] = "rumour"
    elif change == "field":
        doc["families"]["extra"] = 1
    return doc


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("version", "version 1"),
        ("isa", "needs an older driver"),
        ("isa text", "MAJOR.MINOR"),
        ("series", "disagrees with the row"),
        ("family member", "sm_120f: lists capabilities outside the family: 13.0"),
        ("family target", "not an sm_XYf target"),
        ("rule", "unknown rule"),
        ("source", "cites source 'rumour'"),
        ("field", "unknown field(s) extra"),
    ],
)
def test_a_broken_rules_file_is_refused_with_one_line(change: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(json.dumps(_broken(change)), "compat.json")
    line = info.value.one_line()
    assert line.startswith("compat.json: ")
    assert words in line


def test_the_shipped_file_loads() -> None:
    assert load(DATA.read_text(encoding="utf-8")) == rules()
