"""The phrases counts and routes are said in: English, the number agreeing, nothing doubled."""

from __future__ import annotations

import pytest

from gate.audit.artifact import phrase
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.render.wording import (
    kernels_by,
    library_on,
    no_code_for,
    plural,
    short_name,
    some_names,
)
from gate.rules.routes import Path, Route
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit

K12 = tuple(f"k{i}" for i in range(1, 13))  # extern "C" kernels: their symbols are their names


@pytest.mark.parametrize(
    ("missing", "expected", "said"),
    [
        (("k1",), 1, "no code for its 1 kernel"),
        (("k1", "k2"), 2, "no code for any of its 2 kernels"),
        (K12, 12, "no code for any of its 12 kernels"),
        (("k2",), 2, "no code for 1 of 2 kernels (k2)"),
        (("k1", "k2", "k3"), 12, "no code for 3 of 12 kernels (k1, k2, k3)"),
        (K12[:5], 12, "no code for 5 of 12 kernels (k1, k2, k3 and 2 more)"),
        (K12[:11], 1_200, "no code for 11 of 1,200 kernels (k1, k2, k3 and 8 more)"),
        ((), 12, "code for all 12 kernels"),
        ((), 1, "code for its 1 kernel"),
        ((), 0, "no kernels"),
    ],
)
def test_no_code_for_says_how_many_and_which(
    missing: tuple[str, ...], expected: int, said: str
) -> None:
    assert no_code_for(missing, expected) == said


@pytest.mark.parametrize(
    ("path", "count", "route", "said"),
    [
        (Path.EXACT_SASS, 1, "exact SASS (sm_90)", "1 kernel from exact SASS (sm_90)"),
        (
            Path.COMPATIBLE_SASS, 3, "compatible SASS (sm_120)",
            "3 kernels from compatible SASS (sm_120)",
        ),
        (Path.FAMILY_SASS, 2, "family SASS (sm_120f)", "2 kernels from family SASS (sm_120f)"),
        (
            Path.PTX_JIT, 1, "PTX JIT (compute_80, ISA 9.0, driver >= 13.0)",
            "1 kernel through PTX JIT (compute_80, ISA 9.0, driver >= 13.0)",
        ),
        (Path.PTX_JIT, 1_500, None, "1,500 kernels through PTX JIT"),
        (Path.NONE, 1, "nothing", "1 kernel with no code"),
        (Path.NONE, 4, None, "4 kernels with no code"),
        (Path.OTHER_DEVICES, 1, "only for other devices", "1 kernel only for other devices"),
    ],
)  # fmt: skip
def test_each_route_reads_as_what_the_kernels_do(
    path: Path, count: int, route: str | None, said: str
) -> None:
    assert kernels_by(path, count, route) == said


def test_counts_agree_with_their_nouns() -> None:
    assert [plural(n, "kernel") for n in (0, 1, 2, 12_000)] == [
        "0 kernels", "1 kernel", "2 kernels", "12,000 kernels",
    ]  # fmt: skip
    assert plural(1, "library", "libraries") == "1 library"
    assert plural(37, "library", "libraries") == "37 libraries"


def test_kernels_are_named_short_and_the_rest_counted() -> None:
    assert short_name("_Z5scalePf") == "scale"  # the function, not its parameters
    assert short_name("_ZN2ns4siluIfEEvPT_") == "silu<float>"  # template instances differ
    assert short_name("k" * 80) == "k" * 57 + "..."
    assert some_names(("k1",)) == "k1"
    assert some_names(("k1", "k2", "k3")) == "k1, k2, k3"
    assert some_names(K12) == "k1, k2, k3 and 9 more"


def test_a_verdict_never_says_1_of_1_or_nothing() -> None:
    one = Listing((DeviceEntry(Kind.SASS, Target.parse("sm_80"), ("_Z3onePi",)),))
    assert phrase(one.predict(Capability(9, 0))) == "no code for its 1 kernel"
    two = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), ("_Z1av", "_Z1bv")),
            DeviceEntry(Kind.SASS, Target.parse("sm_80"), ("_Z1cv",)),
        )
    )
    assert phrase(two.predict(Capability(9, 0))) == "no code for 1 of 3 kernels (c)"
    assert phrase(two.predict(Capability(7, 5))) == "no code for any of its 3 kernels"


H200 = Capability(9, 0)
SM90 = Route(Path.EXACT_SASS, Target.parse("sm_90"))
JIT = Route(Path.PTX_JIT, Target.parse("compute_80"), Version(9, 2), Version(13, 2))


@pytest.mark.parametrize(
    ("route", "runs", "has_ptx", "said"),
    [
        (SM90, True, True, "runs from exact SASS (sm_90)"),
        (
            SM90, True, False,
            "runs from exact SASS (sm_90); no PTX for 9.0: forced JIT cannot run its kernels",
        ),
        (JIT, True, True, "runs through PTX JIT (compute_80, ISA 9.2, driver >= 13.2)"),
        (Route(Path.NONE), False, False, "NOTHING RUNS HERE (no code for 9.0)"),
        (
            Route(Path.OTHER_DEVICES), False, False,
            "NOTHING RUNS HERE (only a/f builds for other devices)",
        ),
        (
            JIT, False, True,
            (
                "NOTHING RUNS HERE (its PTX needs a newer driver: PTX JIT (compute_80, ISA 9.2, "
                "driver >= 13.2))"
            ),
        ),
        # The project's library, judged per kernel: its best target runs, not every kernel.
        (SM90, False, False, "NOTHING RUNS HERE (not every kernel has code for 9.0)"),
    ],
)  # fmt: skip
def test_a_loaded_library_says_how_it_runs_or_why_nothing_does(
    route: Route, runs: bool, has_ptx: bool, said: str
) -> None:
    assert library_on(route, H200, runs=runs, has_ptx=has_ptx) == said
