"""How a distribution's kernels on a device are said (gate.render.shares): the majority
first, counted of the whole; every share without code named; a few routes, then a count."""

from __future__ import annotations

import pytest

from gate.render.shares import share_words, shares_text
from gate.rules.routes import Path, Route
from gate.rules.shares import Reach, Share, tally
from gate.rules.targets import Target, Version

pytestmark = pytest.mark.unit

EXACT = Route(Path.EXACT_SASS, Target.parse("sm_90"))
EXACT_A = Route(Path.EXACT_SASS, Target.parse("sm_121a"))
COMPATIBLE = Route(Path.COMPATIBLE_SASS, Target.parse("sm_120"))
FAMILY = Route(Path.FAMILY_SASS, Target.parse("sm_120f"))
PTX = Route(Path.PTX_JIT, Target.parse("compute_80"), Version(9, 0), Version(13, 0))
NONE = Route(Path.NONE)
OTHER = Route(Path.OTHER_DEVICES)


@pytest.mark.parametrize(
    ("share", "of", "expected"),
    [
        (Share(EXACT, ("a",)), None, "exact SASS (sm_90) for 1"),
        (Share(EXACT, ("a", "b")), 3, "exact SASS (sm_90) for 2 of 3 kernels"),
        (Share(NONE, ("_Z2b1Pf", "_Z2c1Pf")), 3, "no code for 2 of 3 kernels (b1, c1)"),
        (Share(NONE, ("a", "b", "c", "d")), None, "no code for 4 (a, b, c and 1 more)"),
        (Share(OTHER, ("x",) * 1200), None, "1,200 only for other devices"),
        # A name in two files is two kernels, named once.
        (Share(NONE, ("a", "a", "b")), None, "no code for 3 (a, b)"),
        (Share(OTHER, ("x",)), 1, "1 of 1 kernel only for other devices"),
    ],
)
def test_one_share_is_said_with_its_count(share: Share, of: int | None, expected: str) -> None:
    assert share_words(share, of) == expected


@pytest.mark.parametrize(
    ("groups", "how", "expected"),
    [
        # The library on 9.0.
        (
            [(EXACT, ("_Z2a1Pf",)), (NONE, ("_Z2b1Pf", "_Z2c1Pf"))],
            Reach.PARTLY,
            "partly: no code for 2 of 3 kernels (b1, c1); exact SASS (sm_90) for 1",
        ),
        # One route runs every kernel: said as before, with the count.
        ([(EXACT, ("a", "b", "c"))], Reach.RUNS, "native: exact SASS (sm_90) for all 3 kernels"),
        ([(COMPATIBLE, ("a",))], Reach.RUNS, "compatible SASS (sm_120) for its 1 kernel"),
        # torch on 12.1: the majority first, not the best route.
        (
            [(EXACT_A, ("k",) * 12), (COMPATIBLE, ("k",) * 2988)],
            Reach.RUNS,
            (
                "runs: compatible SASS (sm_120) for 2,988 of 3,000 kernels; "
                "exact SASS (sm_121a) for 12"
            ),
        ),
        # One route, but the line does not run: said with its reach.
        ([(NONE, ("a",))], Reach.NONE, "does not run: no code for 1 of 1 kernel (a)"),
        ([(EXACT, ("a",))], Reach.PARTLY, "partly: exact SASS (sm_90) for 1 of 1 kernel"),
        # Past three routes the ones that run are counted; those without code are said.
        (
            [
                (COMPATIBLE, ("a",) * 5),
                (FAMILY, ("b",) * 4),
                (PTX, ("c",) * 3),
                (EXACT_A, ("d",) * 2),
                (OTHER, ("e",) * 2),
                (NONE, ("f",)),
            ],
            Reach.PARTLY,
            (
                "partly: compatible SASS (sm_120) for 5 of 17 kernels; family SASS (sm_120f) "
                "for 4; PTX JIT (compute_80, ISA 9.0, driver >= 13.0) for 3; no code for 1 (f); "
                "4 by other routes"
            ),
        ),
    ],
)
def test_a_distribution_s_kernels_are_said_majority_first(
    groups: list[tuple[Route, tuple[str, ...]]], how: Reach, expected: str
) -> None:
    assert shares_text(tally(groups), how) == expected
