"""A distribution's kernels on a device, by route (gate.rules.shares), row by row.

Each table is written from the module's numbered steps (and docs/environments.md): the
shares, their order (majority first, those only for other devices last), whether the
kernels run, run partly or not at all; every branch and boundary a row, so that a flipped
comparison or a dropped condition fails one.
"""

from __future__ import annotations

import pytest

from gate.rules.routes import Path, Route
from gate.rules.shares import Reach, Share, Shares, combine, meets, reach, reach_of, tally
from gate.rules.targets import Target, Version

pytestmark = pytest.mark.unit

EXACT = Route(Path.EXACT_SASS, Target.parse("sm_90"))
EXACT_A = Route(Path.EXACT_SASS, Target.parse("sm_121a"))
COMPATIBLE = Route(Path.COMPATIBLE_SASS, Target.parse("sm_120"))
OLDER = Route(Path.COMPATIBLE_SASS, Target.parse("sm_80"))
PTX_OK = Route(Path.PTX_JIT, Target.parse("compute_80"), Version(9, 0), Version(13, 0))
PTX_NEW = Route(Path.PTX_JIT, Target.parse("compute_90"), Version(9, 2), Version(13, 2))
NONE = Route(Path.NONE)
OTHER = Route(Path.OTHER_DEVICES)
DRIVER = Version(13, 0)  # JITs ISA 9.0, not 9.2


def _names(shares: Shares) -> list[tuple[Route, tuple[str, ...]]]:
    return [(s.route, s.kernels) for s in shares.shares]


# --- Step 1: kernels grouped by route, majority first --------------------------------
# (groups as the listings give them, the driver, the shares in order)
TALLY_ROWS = [
    ([], None, []),
    # Equal routes of two groups (two files) merge; a name in both counts twice, and
    # makes the merged share the larger.
    (
        [(EXACT, ("k",)), (NONE, ("b1", "c1")), (EXACT, ("k", "a"))],
        None,
        [(EXACT, ("a", "k", "k")), (NONE, ("b1", "c1"))],
    ),
    # Each share's kernels sorted by name.
    ([(NONE, ("c1", "b1"))], None, [(NONE, ("b1", "c1"))]),
    # The largest share first, whatever the route.
    (
        [(EXACT_A, ("x",)), (COMPATIBLE, ("a", "b"))],
        None,
        [(COMPATIBLE, ("a", "b")), (EXACT_A, ("x",))],
    ),
    # Of equal shares the better route first: by path, then the newer target ...
    ([(COMPATIBLE, ("a",)), (EXACT, ("b",))], None, [(EXACT, ("b",)), (COMPATIBLE, ("a",))]),
    ([(EXACT, ("b",)), (COMPATIBLE, ("a",))], None, [(EXACT, ("b",)), (COMPATIBLE, ("a",))]),
    ([(OLDER, ("a",)), (COMPATIBLE, ("b",))], None, [(COMPATIBLE, ("b",)), (OLDER, ("a",))]),
    ([(NONE, ("a",)), (PTX_OK, ("b",))], None, [(PTX_OK, ("b",)), (NONE, ("a",))]),
    # ... and usable with the driver before unusable, a better path or not.
    ([(PTX_NEW, ("a",)), (NONE, ("b",))], DRIVER, [(PTX_NEW, ("a",)), (NONE, ("b",))]),
    ([(PTX_NEW, ("a",)), (OLDER, ("b",))], DRIVER, [(OLDER, ("b",)), (PTX_NEW, ("a",))]),
    # Only for other devices last, however many.
    (
        [(OTHER, ("x", "y", "z")), (NONE, ("a",))],
        None,
        [(NONE, ("a",)), (OTHER, ("x", "y", "z"))],
    ),
    # A group without kernels adds no share.
    ([(EXACT, ()), (NONE, ("a",))], None, [(NONE, ("a",))]),
]


@pytest.mark.parametrize(("groups", "driver", "expected"), TALLY_ROWS)
def test_kernels_are_shared_by_route_majority_first(
    groups: list[tuple[Route, tuple[str, ...]]],
    driver: Version | None,
    expected: list[tuple[Route, tuple[str, ...]]],
) -> None:
    shares = tally(groups, driver)
    assert _names(shares) == expected
    assert shares.driver == driver


def test_a_share_counts_its_kernels_and_the_shares_count_them_all() -> None:
    assert Share(NONE, ("a", "b")).count == 2
    shares = tally([(EXACT, ("a",)), (NONE, ("b", "c")), (OTHER, ("d",))])
    assert shares.total == 4
    assert tally([]).total == 0


# --- Steps 2 and 3: majority, runs, partly ----------------------------------------
# (groups, driver, majority route, expected shares' routes, missing routes, runs, partly)
ANSWER_ROWS = [
    # Nothing to count.
    ([], None, None, [], [], False, False),
    # The library on 9.0: a1 from sm_90, b1 and c1 with no code.
    ([(EXACT, ("a1",)), (NONE, ("b1", "c1"))], None, NONE, [NONE, EXACT], [NONE], False, True),
    # Every kernel runs: one route, or several.
    ([(EXACT, ("a",))], None, EXACT, [EXACT], [], True, False),
    (
        [(COMPATIBLE, ("a", "b")), (EXACT_A, ("c",))],
        None,
        COMPATIBLE,
        [COMPATIBLE, EXACT_A],
        [],
        True,
        False,
    ),
    # No kernel has code: not partly.
    ([(NONE, ("a", "b"))], None, NONE, [NONE], [NONE], False, False),
    # PTX the driver cannot JIT has no usable code; with no driver known it may.
    ([(PTX_NEW, ("a",)), (OLDER, ("b",))], DRIVER, OLDER, [OLDER, PTX_NEW], [PTX_NEW], False, True),
    ([(PTX_NEW, ("a",)), (OLDER, ("b",))], None, OLDER, [OLDER, PTX_NEW], [], True, False),
    # Kernels only for other devices are not expected: they neither run nor fail ...
    ([(EXACT, ("a",)), (OTHER, ("x", "y"))], None, EXACT, [EXACT], [], True, False),
    ([(NONE, ("a",)), (OTHER, ("x", "y"))], None, NONE, [NONE], [NONE], False, False),
    # ... and where every kernel is one, nothing is expected here: it does not run.
    ([(OTHER, ("x",))], None, OTHER, [], [], False, False),
]


@pytest.mark.parametrize(
    ("groups", "driver", "majority", "expected", "missing", "runs", "partly"), ANSWER_ROWS
)
def test_the_majority_and_whether_the_kernels_run(  # noqa: PLR0917  (one row's columns)
    groups: list[tuple[Route, tuple[str, ...]]],
    driver: Version | None,
    majority: Route | None,
    expected: list[Route],
    missing: list[Route],
    runs: bool,
    partly: bool,
) -> None:
    shares = tally(groups, driver)
    assert (shares.majority.route if shares.majority else None) == majority
    assert [s.route for s in shares.expected] == expected
    assert [s.route for s in shares.missing] == missing
    assert (shares.runs, shares.partly) == (runs, partly)


# --- Step 4: what the line says first ----------------------------------------------
# (groups, whether every part passes, the reach)
REACH_ROWS = [
    ([(EXACT, ("a",))], True, Reach.RUNS),
    # Every kernel runs, yet some library has nothing built for this device.
    ([(EXACT, ("a",))], False, Reach.PARTLY),
    ([(EXACT, ("a",)), (NONE, ("b",))], False, Reach.PARTLY),
    ([(EXACT, ("a",)), (NONE, ("b",))], True, Reach.PARTLY),  # kernels decide, not parts
    ([(NONE, ("b",))], False, Reach.NONE),
    ([(NONE, ("b",))], True, Reach.NONE),
    ([(OTHER, ("x",))], False, Reach.NONE),
    ([(OTHER, ("x",))], True, Reach.NONE),
]


@pytest.mark.parametrize(("groups", "passes", "expected"), REACH_ROWS)
def test_a_line_says_first_whether_it_runs_partly_or_not(
    groups: list[tuple[Route, tuple[str, ...]]], passes: bool, expected: Reach
) -> None:
    assert reach(tally(groups), passes=passes) is expected


# Tile IR whose driver support is unknown (no driver known, or a bytecode version the
# rules do not hold) is neither "runs" nor "does not run": unknown, where it is all that
# lacks usable code.
TILE = Route(Path.TILE_IR, None, Version(13, 4), Version(13, 4))
TILE_NEW = Route(Path.TILE_IR, None, Version(99, 0), None)  # a version the table lacks
# (groups, driver, whether every part passes, the reach)
TILE_REACH_ROWS = [
    ([(TILE, ("a",))], None, False, Reach.UNKNOWN),
    ([(TILE, ("a",))], None, True, Reach.UNKNOWN),
    ([(TILE, ("a",))], Version(13, 4), True, Reach.RUNS),  # known to compile it
    ([(TILE, ("a",))], Version(13, 3), False, Reach.NONE),  # known not to
    ([(TILE_NEW, ("a",))], Version(13, 4), False, Reach.UNKNOWN),
    ([(EXACT, ("a",)), (TILE, ("b",))], None, False, Reach.UNKNOWN),
    ([(EXACT, ("a",)), (TILE, ("b",))], Version(13, 3), False, Reach.PARTLY),
    ([(TILE, ("a",)), (OTHER, ("x",))], None, True, Reach.UNKNOWN),
    # A kernel with no code at all is known not to run: no longer unknown, and the Tile
    # IR kernel may run, so not "does not run" either.
    ([(TILE, ("a",)), (NONE, ("b",))], None, False, Reach.PARTLY),
    ([(TILE, ("a",)), (NONE, ("b",))], Version(13, 3), False, Reach.NONE),
    ([(PTX_NEW, ("a",))], DRIVER, False, Reach.NONE),  # not Tile IR: decided
]


@pytest.mark.parametrize(("groups", "driver", "passes", "expected"), TILE_REACH_ROWS)
def test_tile_ir_of_unknown_driver_support_reads_unknown(
    groups: list[tuple[Route, tuple[str, ...]]],
    driver: Version | None,
    passes: bool,
    expected: Reach,
) -> None:
    shares = tally(groups, driver)
    assert reach(shares, passes=passes) is expected
    assert [s.route for s in shares.undecided] == [
        s.route for s in shares.shares if s.route.undecided(driver)
    ]


@pytest.mark.parametrize(
    ("route", "driver", "expected"),
    [
        (TILE, None, True),
        (TILE, Version(13, 4), False),
        (TILE, Version(13, 3), False),
        (TILE_NEW, Version(13, 4), True),
        (TILE_NEW, Version(12, 0), False),  # older than any Tile IR support
        (PTX_NEW, None, False),  # PTX of unknown support is judged usable, not undecided
        (NONE, None, False),
        (EXACT, None, False),
    ],
)
def test_only_tile_ir_of_unknown_driver_support_is_undecided(
    route: Route, driver: Version | None, expected: bool
) -> None:
    assert route.undecided(driver) is expected


# --- Step 5: how far one artifact runs, from its kernels' (or targets') routes ----------
# (routes, driver, the reach)
REACH_OF_ROWS = [
    ((), None, Reach.NONE),  # nothing expected here
    ((EXACT,), None, Reach.RUNS),
    ((EXACT, COMPATIBLE), None, Reach.RUNS),
    # The item-3 library on 9.0: a1 by sm_90, b1 and c1 with no code.
    ((EXACT, NONE), None, Reach.PARTLY),
    ((NONE, EXACT, NONE), None, Reach.PARTLY),
    ((NONE,), None, Reach.NONE),
    ((NONE, NONE), None, Reach.NONE),
    # Only for other devices: not expected here, neither running nor failing ...
    ((EXACT, OTHER), None, Reach.RUNS),
    ((NONE, OTHER), None, Reach.NONE),
    # ... and with nothing else, nothing runs here.
    ((OTHER,), None, Reach.NONE),
    # PTX the driver cannot JIT has no usable code; with no driver known it may.
    ((PTX_NEW,), DRIVER, Reach.NONE),
    ((PTX_NEW,), None, Reach.RUNS),
    ((OLDER, PTX_NEW), DRIVER, Reach.PARTLY),
    ((PTX_OK, PTX_NEW), Version(13, 2), Reach.RUNS),
]


@pytest.mark.parametrize(("routes", "driver", "expected"), REACH_OF_ROWS)
def test_how_far_an_artifact_runs_on_a_device(
    routes: tuple[Route, ...], driver: Version | None, expected: Reach
) -> None:
    assert reach_of(routes, driver) is expected
    assert reach_of(iter(routes), driver) is expected  # read once: any iterable


# --- Step 6: whether that meets --require-device ------------------------------------------
# (reach, strict, passes): one rule for a file alone and for a distribution's library.
MEETS_ROWS = [
    (Reach.RUNS, False, True),
    (Reach.RUNS, True, True),
    # A vendor library that picks its kernels per device runs partly: it passes, and
    # fails only where every kernel is judged.
    (Reach.PARTLY, False, True),
    (Reach.PARTLY, True, False),
    (Reach.NONE, False, False),
    (Reach.NONE, True, False),
]


@pytest.mark.parametrize(("how", "strict", "expected"), MEETS_ROWS)
def test_what_meets_a_required_device(how: Reach, strict: bool, expected: bool) -> None:
    assert meets(how, strict=strict) is expected


# (each library's groups, the driver, the shares as one)
COMBINE_ROWS = [
    ([], None, []),
    ([[(EXACT, ("a1",)), (NONE, ("b1", "c1"))]], None, [(NONE, ("b1", "c1")), (EXACT, ("a1",))]),
    # Equal routes of two libraries merge; one name in both counts twice.
    (
        [[(EXACT, ("k",))], [(EXACT, ("k",)), (NONE, ("b",))]],
        None,
        [(EXACT, ("k", "k")), (NONE, ("b",))],
    ),
    # Re-ordered as one: the larger share first, those for other devices last.
    (
        [[(OTHER, ("x", "y", "z")), (EXACT, ("a",))], [(NONE, ("b", "c"))]],
        DRIVER,
        [(NONE, ("b", "c")), (EXACT, ("a",)), (OTHER, ("x", "y", "z"))],
    ),
]


@pytest.mark.parametrize(("libraries", "driver", "expected"), COMBINE_ROWS)
def test_libraries_shares_combine_as_one(
    libraries: list[list[tuple[Route, tuple[str, ...]]]],
    driver: Version | None,
    expected: list[tuple[Route, tuple[str, ...]]],
) -> None:
    combined = combine([tally(groups, driver) for groups in libraries], driver)
    assert _names(combined) == expected
    assert combined.driver == driver
    assert combined == tally([g for groups in libraries for g in groups], driver)
