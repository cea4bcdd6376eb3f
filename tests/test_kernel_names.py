"""The name a person reads for a kernel (gate.rules.kernels.readable), and the places that
say it: the baseline's changes, the diff's lines, the phrases of gate.render.wording.

Demangled; an ``extern "C"`` name, or one that cannot be demangled, as it is; the symbol in
brackets only where two kernels of one listing would read alike."""

from __future__ import annotations

import pytest

from gate.baseline.comparison import diff_from_json, diff_json
from gate.render import diff as diff_view
from gate.render.wording import some_names
from gate.rules import kernels
from gate.rules.baseline import Change, CodeFacts, Diff, Level, Row, Rule, TargetCode, compare
from gate.rules.targets import Target

pytestmark = pytest.mark.unit

SCALE_F, SCALE_D = "_Z5scalePfi", "_Z5scalePdi"  # scale(float*, int), scale(double*, int)
# Two spellings of one C++ name: a substitution (S_) and the type written out again.
F_SUB, F_OUT = "_Z1fPcS_", "_Z1fPcPc"  # both f(char*, char*)
ANON_1, ANON_2 = "_ZN12_GLOBAL__N_11kEv", "_ZN12_GLOBAL__N_21kEv"  # (anonymous namespace)::k()


def no_demangler(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without libstdc++: only simple mangled names are read."""
    monkeypatch.setattr(kernels, "demangle", lambda name: name)


@pytest.mark.parametrize(
    ("symbols", "expected"),
    [
        pytest.param((SCALE_F,), {SCALE_F: "scale(float*, int)"}, id="demangled"),
        pytest.param(
            (SCALE_F, SCALE_D),
            {SCALE_F: "scale(float*, int)", SCALE_D: "scale(double*, int)"},
            id="overloads-read-apart",
        ),
        pytest.param(("scale_c",), {"scale_c": "scale_c"}, id="extern-c-as-it-is"),
        pytest.param(("_Zbad",), {"_Zbad": "_Zbad"}, id="not-demangled-as-it-is"),
        pytest.param(
            (F_SUB, F_OUT),
            {F_SUB: f"f(char*, char*) [{F_SUB}]", F_OUT: f"f(char*, char*) [{F_OUT}]"},
            id="alike-bracketed",
        ),
        pytest.param(
            (ANON_1, ANON_2, SCALE_F),
            {
                ANON_1: f"(anonymous namespace)::k() [{ANON_1}]",
                ANON_2: f"(anonymous namespace)::k() [{ANON_2}]",
                SCALE_F: "scale(float*, int)",
            },
            id="only-the-alike-bracketed",
        ),
        pytest.param((SCALE_F, SCALE_F), {SCALE_F: "scale(float*, int)"}, id="one-symbol-twice"),
    ],
)
def test_a_kernel_reads_demangled_with_its_symbol_only_where_two_read_alike(
    symbols: tuple[str, ...], expected: dict[str, str]
) -> None:
    assert kernels.readable(symbols) == expected
    if len(expected) == 1:
        assert kernels.readable_name(symbols[0]) == expected[symbols[0]]


def test_without_a_demangler_overloads_read_alike_and_get_their_symbols(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_demangler(monkeypatch)
    assert kernels.readable([SCALE_F, SCALE_D]) == {
        SCALE_F: f"scale [{SCALE_F}]",
        SCALE_D: f"scale [{SCALE_D}]",
    }
    # An extern "C" kernel of the same name is its own name; the mangled one is bracketed.
    assert kernels.readable(["scale", SCALE_F]) == {"scale": "scale", SCALE_F: f"scale [{SCALE_F}]"}
    assert kernels.readable([SCALE_F]) == {SCALE_F: "scale"}


def test_short_names_fall_back_to_whole_names_for_overloads() -> None:
    short = kernels.readable([SCALE_F, SCALE_D, "_Z5shiftPf", "scale"], short=True)
    assert short == {
        SCALE_F: "scale(float*, int)",
        SCALE_D: "scale(double*, int)",
        "_Z5shiftPf": "shift",
        "scale": "scale",  # extern "C": its own name, whatever else reads like it
    }
    assert kernels.readable([F_SUB, F_OUT], short=True) == {
        F_SUB: f"f(char*, char*) [{F_SUB}]",
        F_OUT: f"f(char*, char*) [{F_OUT}]",
    }
    assert some_names([SCALE_F, SCALE_D, "_Z5shiftPf"]) == (
        "scale(float*, int), scale(double*, int), shift"
    )
    assert some_names([SCALE_F, "_Z5shiftPf"]) == "scale, shift"


def test_a_matched_requirement_names_its_kernels_plainly() -> None:
    assert kernels.describe((SCALE_F,)) == "scale(float*, int)"
    assert kernels.describe((F_SUB, F_OUT)) == (
        f"f(char*, char*) [{F_SUB}], f(char*, char*) [{F_OUT}]"
    )


# --- the baseline and the diff --------------------------------------------------------------
def code(label: str, *symbols: str, size: int = 100) -> TargetCode:
    target = Target.parse(label)
    return TargetCode(target.virtual, target, frozenset(symbols), None, size)


def test_a_kernel_dropped_from_the_source_is_one_regression_named_demangled() -> None:
    was = CodeFacts("libk.so", (code("sm_90", SCALE_F, "shift"), code("compute_90", SCALE_F)))
    now = CodeFacts("libk.so", (code("sm_90", "shift", size=80), code("compute_90", size=80)))
    diff = compare([was], [now])
    assert diff.failed == (
        Change(
            "libk.so",
            Level.FAIL,
            "lost kernel scale(float*, int) from sm_90, compute_90",
            Rule.DROPPED_KERNEL,
            SCALE_F,
        ),
    )
    assert diff_view.losses(diff) == [
        "FAIL libk.so: lost kernel scale(float*, int) from sm_90, compute_90"
    ]
    # The sizes went down too: reported, counted apart from the one regression, once.
    assert diff_view.closing(diff, "v1") == (
        "1 regression against v1; 2 more changes reported, not judged"
    )
    assert diff_view.console(diff, "v1", total=120).splitlines()[-2:] == [
        "FAIL libk.so: lost kernel scale(float*, int) from sm_90, compute_90",
        "1 regression against v1; 2 more changes reported, not judged",
    ]


def test_kernels_that_read_alike_in_an_artifact_carry_their_symbols() -> None:
    # The kept F_OUT reads like the lost F_SUB: the loss says which one went.
    was = CodeFacts("a.so", (code("sm_90", F_SUB, F_OUT, SCALE_F),))
    now = CodeFacts("a.so", (code("sm_90", F_OUT, SCALE_D),))
    changes = compare([was], [now]).changes
    kernel_changes = [(c.level, c.what, c.kernel) for c in changes if c.kernel]
    assert kernel_changes == [
        (Level.FAIL, f"lost kernel f(char*, char*) [{F_SUB}] from sm_90", F_SUB),
        (Level.FAIL, "lost kernel scale(float*, int) from sm_90", SCALE_F),
        (Level.INFO, "gained kernel scale(double*, int) in sm_90", SCALE_D),
    ]


def test_the_closing_line_counts_each_change_once() -> None:
    rows = (Row("a.so", "q", "", "", "x"),)
    info = Change("a.so", Level.INFO, "sm_100 added")
    lost = Change("a.so", Level.FAIL, "sm_90 dropped", Rule.DROPPED_TARGET)
    warned = Change("a.so", Level.WARN, "sm_80 dropped", Rule.DROPPED_TARGET)
    assert diff_view.closing(Diff(rows, ()), "v1") == "no regression against v1"
    assert diff_view.closing(Diff(rows, (info, info)), "v1") == (
        "no regression against v1; 2 changes reported, not judged"
    )
    assert diff_view.closing(Diff(rows, (warned, info)), "v1") == (
        "no regression against v1 (1 warning); 1 more change reported, not judged"
    )
    assert diff_view.closing(Diff(rows, (lost, lost, info)), "v1") == (
        "2 regressions against v1; 1 more change reported, not judged"
    )
    assert diff_view.closing(Diff(rows, (lost,)), "v1") == "1 regression against v1"


def test_the_json_keeps_the_symbol_beside_the_sentence() -> None:
    change = Change("a.so", Level.FAIL, "lost kernel scale(float*, int) from sm_90",
                    Rule.DROPPED_KERNEL, SCALE_F)  # fmt: skip
    diff = Diff((Row("a.so", "sm_90 kernels", "1", "0", "-1"),), (change,))
    doc = diff_json(diff)
    assert doc["changes"] == [
        {
            "artifact": "a.so",
            "level": "fail",
            "rule": "dropped_kernel",
            "what": "lost kernel scale(float*, int) from sm_90",
            "kernel": SCALE_F,
        }
    ]
    assert diff_from_json(doc) == diff
    # A record from before result.json 7 has no 'kernel': read as None.
    del doc["changes"][0]["kernel"]
    assert diff_from_json(doc).changes[0].kernel is None
