"""The ranking of a library's routes on one device (gate.rules.routes.rank, best_route).

What ``inspect`` calls a library's best route: a usable route before one that is not
(PTX whose ISA the driver cannot JIT, or no code), then the better path (exact SASS,
compatible, family, PTX JIT, nothing, only for other devices), then the newest target;
the first of equals. Each row puts the route that must win after one that a flipped
comparison would pick.
"""

from __future__ import annotations

import pytest

from gate.rules.routes import Path, Route, best_route, min_driver, rank
from gate.rules.targets import Target, Version

pytestmark = pytest.mark.unit


def sass(path: Path, target: str) -> Route:
    return Route(path, Target.parse(target))


def ptx(target: str, isa: str) -> Route:
    version = Version.parse(isa)
    return Route(Path.PTX_JIT, Target.parse(target), version, min_driver(version))


EXACT_90 = sass(Path.EXACT_SASS, "sm_90")
EXACT_90A = sass(Path.EXACT_SASS, "sm_90a")
COMPATIBLE_80 = sass(Path.COMPATIBLE_SASS, "sm_80")
COMPATIBLE_86 = sass(Path.COMPATIBLE_SASS, "sm_86")
COMPATIBLE_120 = sass(Path.COMPATIBLE_SASS, "sm_120")
FAMILY_100F = sass(Path.FAMILY_SASS, "sm_100f")
FAMILY_103F = sass(Path.FAMILY_SASS, "sm_103f")
PTX_90_ISA_80 = ptx("compute_90", "8.0")  # needs driver 12.0
PTX_120_ISA_88 = ptx("compute_120", "8.8")  # needs driver 12.9
NOTHING = Route(Path.NONE)
ELSEWHERE = Route(Path.OTHER_DEVICES)
CUDA_12_8 = Version(12, 8)
CUDA_13_0 = Version(13, 0)
CUDA_13_4 = Version(13, 4)
TILE_134 = Route(Path.TILE_IR, None, Version(13, 4), Version(13, 4))  # cuTile 13.4 bytecode

# (routes, driver, the best)
BEST_ROWS = [
    # The better path, whatever the target: exact before a newer compatible build, ...
    ([COMPATIBLE_120, EXACT_90], None, EXACT_90),
    # ... compatible before a newer family build, family before newer PTX.
    ([FAMILY_103F, COMPATIBLE_80], None, COMPATIBLE_80),
    ([PTX_120_ISA_88, FAMILY_100F], CUDA_13_0, FAMILY_100F),
    ([ELSEWHERE, NOTHING], None, NOTHING),
    ([NOTHING, PTX_90_ISA_80], CUDA_12_8, PTX_90_ISA_80),
    # Usable first: PTX the driver cannot JIT loses to older PTX it can ...
    ([PTX_120_ISA_88, PTX_90_ISA_80], CUDA_12_8, PTX_90_ISA_80),
    # ... and, the driver new enough (or not known: not refused), the newer one wins.
    ([PTX_90_ISA_80, PTX_120_ISA_88], CUDA_13_0, PTX_120_ISA_88),
    ([PTX_90_ISA_80, PTX_120_ISA_88], None, PTX_120_ISA_88),
    # Unusable PTX still ranks before no code at all.
    ([NOTHING, PTX_120_ISA_88], CUDA_12_8, PTX_120_ISA_88),
    # The same path: the newest target.
    ([COMPATIBLE_80, COMPATIBLE_86], None, COMPATIBLE_86),
    ([COMPATIBLE_86, COMPATIBLE_80], None, COMPATIBLE_86),
    # Equals (one SM number, one path): the first.
    ([EXACT_90, EXACT_90A], None, EXACT_90),
    ([EXACT_90A, EXACT_90], None, EXACT_90A),
    ([ELSEWHERE], CUDA_12_8, ELSEWHERE),
]


@pytest.mark.parametrize(("routes", "driver", "best"), BEST_ROWS)
def test_the_best_route_of_a_library(
    routes: list[Route], driver: Version | None, best: Route
) -> None:
    assert best_route(iter(routes), driver) is best


# (route, driver, its sort key): usable 0 / not 1, the path's place, minus the SM number.
RANK_ROWS = [
    (EXACT_90, None, (0, 0, -90)),
    (COMPATIBLE_86, CUDA_12_8, (0, 1, -86)),
    (FAMILY_100F, None, (0, 2, -100)),
    (PTX_90_ISA_80, CUDA_12_8, (0, 3, -90)),
    (PTX_120_ISA_88, CUDA_12_8, (1, 3, -120)),
    (TILE_134, CUDA_13_4, (0, 4, 0)),  # Tile IR: after PTX JIT, no target
    (TILE_134, CUDA_13_0, (1, 4, 0)),  # a driver before its bytecode: not usable
    (TILE_134, None, (1, 4, 0)),  # driver unknown: never counted as running
    (NOTHING, None, (1, 5, 0)),  # no target: counted as target 0
    (ELSEWHERE, CUDA_13_0, (1, 6, 0)),
]


@pytest.mark.parametrize(("route", "driver", "key"), RANK_ROWS)
def test_a_routes_rank(route: Route, driver: Version | None, key: tuple[int, int, int]) -> None:
    assert rank(route, driver) == key


def test_the_ranking_follows_the_order_paths_are_listed_in() -> None:
    assert [rank(Route(p), None)[1] for p in Path] == list(range(len(Path)))


def test_no_routes_have_no_best() -> None:
    with pytest.raises(ValueError, match="empty"):
        best_route((), None)
