"""The environment audit's decisions, row by row (gate.rules.environment, gate.rules.variants).

What answers for an artifact on a device, whether it fails a required device, which
artifacts count, how a set of runtime-selected builds is answered and a distribution's
category: each table written from the rule's sentences (docs/environments.md,
``inspect --help`` for ``--require-device`` and ``--strict``), every branch and boundary
a row, so that a flipped comparison or a dropped condition fails one.
"""

from __future__ import annotations

import pytest

from gate.rules.environment import (
    Category,
    DeviceVerdict,
    Outcome,
    Part,
    Shortfall,
    Unmet,
    answer,
    category,
    kernels_of,
    needs_device,
    outcome,
    overall,
    rank,
    set_part,
    shortfalls,
    unmet,
)
from gate.rules.routes import Path, Route, route
from gate.rules.shares import Shares, tally
from gate.rules.targets import Capability, Target, Version
from gate.rules.variants import RULES, Selector, Variant, VariantSet, find_sets

pytestmark = pytest.mark.unit


def t(text: str) -> Target:
    return Target.parse(text)


def sass(text: str, cap: str) -> Route:
    """The route SASS ``text`` gives on ``cap``, as the rule says it."""
    return route((t(text),), (), Capability.parse(cap))


def ptx(text: str, isa: str, cap: str) -> Route:
    """The route PTX ``text`` of ISA ``isa`` gives on ``cap``."""
    return route((), ((t(text), Version.parse(isa)),), Capability.parse(cap))


NONE = Route(Path.NONE)
OTHER = Route(Path.OTHER_DEVICES)
DRIVER_13_0 = Version(13, 0)  # JITs ISA 9.0, not 9.2 (it needs 13.2)


# --- A route's category, and the order of categories ------------------------------------
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (Path.EXACT_SASS, Category.NATIVE),
        (Path.FAMILY_SASS, Category.FAMILY),
        (Path.COMPATIBLE_SASS, Category.COMPATIBLE),
        (Path.PTX_JIT, Category.PTX_JIT),
        (Path.TILE_IR, Category.TILE_IR),
        (Path.OTHER_DEVICES, Category.OTHER_DEVICES),
        (Path.NONE, Category.NOTHING),
    ],
)
def test_each_path_answers_with_its_category(path: Path, expected: Category) -> None:
    assert category(path) is expected


def test_categories_rank_best_first() -> None:
    order = [
        Category.NATIVE,
        Category.FAMILY,
        Category.COMPATIBLE,
        Category.PTX_JIT,
        Category.TILE_IR,
        Category.OTHER_DEVICES,
        Category.NOTHING,
        Category.MIXED,
        Category.NO_DEVICE_CODE,
        Category.UNREADABLE,
    ]
    assert [rank(c) for c in order] == list(range(len(order)))


# --- 1. The route that answers for an artifact ------------------------------------------
FAMILY_101F = "family SASS (sm_101f)"
# (routes of its kernels or targets, device, strict, driver, the answer)
ANSWER_ROWS = [
    # No kernel to route: no answer.
    ((), "12.1", False, None, None),
    ((), "12.1", True, None, None),
    # The best usable route, by the rule over their targets: a family build of the newest
    # minor over plain SASS of an older one (10.3: sm_101f over sm_100), whatever the order.
    ((sass("sm_100", "10.3"), sass("sm_101f", "10.3")), "10.3", False, None, FAMILY_101F),
    ((sass("sm_101f", "10.3"), sass("sm_100", "10.3")), "10.3", False, None, FAMILY_101F),
    # SASS before PTX; a kernel with nothing there does not make the library "nothing".
    ((ptx("compute_86", "7.1", "8.6"), sass("sm_80", "8.6")), "8.6", False, None,
     "compatible SASS (sm_80)"),
    ((NONE, sass("sm_90", "9.0")), "9.0", False, None, "exact SASS (sm_90)"),
    ((OTHER, ptx("compute_80", "9.0", "12.1")), "12.1", False, None,
     "PTX JIT (compute_80, ISA 9.0, driver >= 13.0)"),
    # Among PTX, the newest that JITs: compute_90 over compute_80 with no driver known...
    ((ptx("compute_80", "9.0", "12.1"), ptx("compute_90", "9.2", "12.1")), "12.1", False, None,
     "PTX JIT (compute_90, ISA 9.2, driver >= 13.2)"),
    # ... but PTX a 13.0 driver cannot JIT (ISA 9.2) is passed over for PTX it can.
    ((ptx("compute_90", "9.2", "12.1"), ptx("compute_80", "9.0", "12.1")), "12.1", False,
     DRIVER_13_0, "PTX JIT (compute_80, ISA 9.0, driver >= 13.0)"),
    # Routes are ranked for the device asked: SASS of another device runs nowhere here and
    # is never taken for PTX.
    ((sass("sm_80", "8.6"),), "9.0", False, None, "nothing"),
    # Nothing usable: the worst route among kernels expected here, not those built only for
    # other devices; all only for other devices: that.
    ((NONE, OTHER), "12.1", False, None, "nothing"),
    ((OTHER, NONE), "12.1", False, None, "nothing"),
    ((OTHER,), "12.1", False, None, "only for other devices"),
    ((OTHER, OTHER), "12.1", True, None, "only for other devices"),
    ((ptx("compute_90", "9.2", "12.1"),), "12.1", False, DRIVER_13_0,
     "PTX JIT (compute_90, ISA 9.2, driver >= 13.2)"),
    # --strict: the worst expected route, usable or not.
    ((sass("sm_90", "9.0"), NONE), "9.0", True, None, "nothing"),
    ((sass("sm_90", "9.0"), ptx("compute_80", "9.0", "9.0")), "9.0", True, None,
     "PTX JIT (compute_80, ISA 9.0, driver >= 13.0)"),
    ((sass("sm_100", "10.3"), sass("sm_101f", "10.3")), "10.3", True, None,
     "compatible SASS (sm_100)"),
    ((sass("sm_90", "9.0"), OTHER), "9.0", True, None, "exact SASS (sm_90)"),
    ((sass("sm_90", "9.0"),), "9.0", True, None, "exact SASS (sm_90)"),
]  # fmt: skip


@pytest.mark.parametrize(("routes", "cap", "strict", "driver", "expected"), ANSWER_ROWS)
def test_the_route_that_answers_for_an_artifact(
    routes: tuple[Route, ...], cap: str, strict: bool, driver: Version | None, expected: str | None
) -> None:
    got = answer(routes, Capability.parse(cap), strict=strict, driver=driver)
    assert (got.describe() if got else None) == expected


def test_the_best_route_is_the_rule_s_own_route_for_the_device() -> None:
    # Re-ranked by the rule, the answer is the route the rule gives for those targets.
    cap = Capability(9, 0)
    routes = (sass("sm_90a", "9.0"), sass("sm_90", "9.0"))
    rule = route((t("sm_90a"), t("sm_90")), (), cap)
    assert answer(routes, cap, strict=False, driver=None) == rule


NEW_PTX = ptx("compute_90", "9.2", "12.1")  # a 13.0 driver cannot JIT it
OLD_PTX = ptx("compute_80", "9.0", "12.1")
# (routes, strict, driver, why, the outcome's category and route)
OUTCOME_ROWS = [
    ((), False, None, None, Category.NOTHING, None),
    ((), True, None, "lib.so: LTO IR only", Category.NOTHING, None),
    ((sass("sm_121", "12.1"),), False, None, None, Category.NATIVE, sass("sm_121", "12.1")),
    ((OTHER,), False, None, "why", Category.OTHER_DEVICES, OTHER),
    ((NONE, sass("sm_121", "12.1")), True, None, "why", Category.NOTHING, NONE),
    ((NEW_PTX, OLD_PTX), False, None, None, Category.PTX_JIT, NEW_PTX),
    ((NEW_PTX, OLD_PTX), False, DRIVER_13_0, None, Category.PTX_JIT, OLD_PTX),  # the driver's
]


@pytest.mark.parametrize(("routes", "strict", "driver", "why", "cat", "chosen"), OUTCOME_ROWS)
def test_an_outcome_is_its_answer_s_category_and_the_reason_handed_in(  # noqa: PLR0917  (one row's columns)
    routes: tuple[Route, ...],
    strict: bool,
    driver: Version | None,
    why: str | None,
    cat: Category,
    chosen: Route | None,
) -> None:
    got = outcome(routes, Capability(12, 1), strict=strict, driver=driver, why=why)
    assert (got.category, got.route, got.why, got.passes) == (cat, chosen, why, why is None)


# --- An outcome: passes, its reason, equality -------------------------------------------
def test_an_outcome_passes_when_nothing_says_why_not() -> None:
    assert Outcome(Category.NATIVE, None, None).passes
    assert not Outcome(Category.NATIVE, None, "why").passes
    assert not Outcome(Category.NATIVE, None, lambda: "why").passes
    assert not Outcome(Category.NOTHING, None, "").passes  # an empty reason is still one


def test_an_outcome_words_its_reason_once_when_asked() -> None:
    calls: list[int] = []

    def words() -> str:
        calls.append(1)
        return "lib.so: nothing in it runs on 12.1"

    lazy = Outcome(Category.NOTHING, None, words)
    assert calls == []
    assert lazy.reason == "lib.so: nothing in it runs on 12.1"
    assert lazy.reason == "lib.so: nothing in it runs on 12.1"
    assert calls == [1]
    assert Outcome(Category.NOTHING, None, "said").reason == "said"
    assert Outcome(Category.NATIVE, None, None).reason is None


def test_outcomes_are_equal_by_category_route_and_reason() -> None:
    r = sass("sm_90", "9.0")
    one = Outcome(Category.NATIVE, r, lambda: "why")
    same = Outcome(Category.NATIVE, r, "why")
    assert one == same
    assert hash(one) == hash(same) == hash((Category.NATIVE, r, "why"))
    assert len({one, same}) == 1
    assert one != Outcome(Category.FAMILY, r, "why")
    assert one != Outcome(Category.NATIVE, sass("sm_90a", "9.0"), "why")
    assert one != Outcome(Category.NATIVE, r, "other")
    assert one != Outcome(Category.NATIVE, r, None)
    assert one != (Category.NATIVE, r, "why")  # never equal to its key


# --- 2. Whether an artifact fails a required device -------------------------------------
# (routes, driver, readable, names, strict, why it fails or None)
UNMET_ROWS = [
    # An unreadable file is not judged here: its error is said, and fails the command.
    ((), None, False, True, True, None),
    ((NONE,), None, False, False, False, None),
    # Nothing to route (no device code, LTO IR only, no kernels): it fails.
    ((), None, True, False, False, Unmet.NOTHING_TO_ROUTE),
    ((), None, True, True, True, Unmet.NOTHING_TO_ROUTE),
    # As a whole: something must run. A library that runs partly (the item-3 library,
    # cuBLAS's kernels built only for sm_75) passes, names read or not.
    ((NONE, sass("sm_90", "9.0")), None, True, True, False, None),
    ((sass("sm_90", "9.0"), NONE, NONE), None, True, True, False, None),
    ((NONE,), None, True, True, False, Unmet.NOTHING_RUNS),
    ((OTHER, NONE), None, True, False, False, Unmet.NOTHING_RUNS),
    ((ptx("compute_90", "9.2", "12.1"),), DRIVER_13_0, True, True, False, Unmet.NOTHING_RUNS),
    ((ptx("compute_90", "9.2", "12.1"),), None, True, True, False, None),  # no driver known
    # Strict, with names: every kernel expected here needs code (only-for-other-devices
    # kernels are not expected), and one must be expected.
    ((NONE, sass("sm_90", "9.0")), None, True, True, True, Unmet.KERNEL_WITHOUT_CODE),
    ((sass("sm_90", "9.0"), ptx("compute_90", "9.0", "9.0")), DRIVER_13_0, True, True, True,
     None),
    ((NONE,), None, True, True, True, Unmet.KERNEL_WITHOUT_CODE),
    ((OTHER, sass("sm_90", "9.0")), None, True, True, True, None),
    ((OTHER,), None, True, True, True, Unmet.KERNEL_WITHOUT_CODE),
    ((sass("sm_90", "9.0"), ptx("compute_90", "9.2", "9.0")), DRIVER_13_0, True, True, True,
     Unmet.KERNEL_WITHOUT_CODE),
    # Strict without names: the targets stand for every kernel, judged as a whole.
    ((NONE, sass("sm_90", "9.0")), None, True, False, True, None),
    ((NONE,), None, True, False, True, Unmet.NOTHING_RUNS),
]  # fmt: skip


@pytest.mark.parametrize(
    ("routes", "driver", "readable", "names", "strict", "expected"), UNMET_ROWS
)
def test_why_an_artifact_fails_a_required_device(  # noqa: PLR0917  (one row's columns)
    routes: tuple[Route, ...],
    driver: Version | None,
    readable: bool,
    names: bool,
    strict: bool,
    expected: Unmet | None,
) -> None:
    got = unmet(routes, driver, readable=readable, names=names, strict=strict)
    assert got is expected


# --- 3. Which artifacts a device must run -----------------------------------------------
# (has device code, names read, some entry holds a kernel, LTO IR, needs a device)
NEEDS_ROWS = [
    (False, False, False, False, False),  # no device code
    (False, True, True, True, False),  # unreadable or empty, whatever else
    (True, False, False, False, True),  # without names a cubin's kernels are unknown
    (True, True, False, False, False),  # kernel-less cubins (libcufftw.so's sm_52)
    (True, True, True, False, True),
    (True, True, False, True, True),  # LTO IR runs once device-linked: judged
    (True, True, True, True, True),
]


@pytest.mark.parametrize(("code", "names", "kernels", "lto", "expected"), NEEDS_ROWS)
def test_which_artifacts_need_a_device(
    code: bool, names: bool, kernels: bool, lto: bool, expected: bool
) -> None:
    assert needs_device(has_code=code, names=names, kernels=kernels, lto=lto) is expected


# --- 4. A set of runtime-selected builds ------------------------------------------------
def _runtime_set() -> VariantSet:
    (s,) = find_sets(["q/libq_cuda118.so", "q/libq_cuda128.so", "q/libq_cpu.so"])
    return s


def _gpu_set() -> VariantSet:
    (s,) = find_sets(["k/sm90/ops.so", "k/sm100/ops.so"])
    return s


NATIVE = Outcome(Category.NATIVE, sass("sm_90", "9.0"), None)
COMPATIBLE = Outcome(Category.COMPATIBLE, sass("sm_80", "8.6"), None)
OLDER = Outcome(Category.COMPATIBLE, sass("sm_86", "8.9"), None)  # as good, not equal
PTX_OK = Outcome(Category.PTX_JIT, ptx("compute_80", "9.0", "9.0"), None)
FAILS_NATIVE = Outcome(Category.NATIVE, sass("sm_90", "9.0"), "cuda118.so: a kernel lacks code")
NOTHING = Outcome(Category.NOTHING, NONE, "cuda128.so: nothing in it runs on 9.0")
NOTHING_TOO = Outcome(Category.NOTHING, NONE, "cuda118.so: nothing in it runs on 9.0")

# (set, builds by label, CUDA runtime, the answer's outcome, the labels that give it)
SET_ROWS = [
    # Every loadable build with code competes; the best category wins...
    ("runtime", {"cuda118": PTX_OK, "cuda128": NATIVE}, None, NATIVE, ("cuda128",)),
    ("runtime", {"cuda118": NATIVE, "cuda128": PTX_OK}, None, NATIVE, ("cuda118",)),
    # ... a passing build before a failing one, whatever their categories...
    ("runtime", {"cuda118": FAILS_NATIVE, "cuda128": PTX_OK}, None, PTX_OK, ("cuda128",)),
    # ... every build giving the same outcome is named; among equals, the first.
    ("runtime", {"cuda118": NATIVE, "cuda128": NATIVE}, None, NATIVE, ("cuda118", "cuda128")),
    ("runtime", {"cuda118": COMPATIBLE, "cuda128": OLDER}, None, COMPATIBLE, ("cuda118",)),
    ("runtime", {"cuda118": OLDER, "cuda128": COMPATIBLE}, None, OLDER, ("cuda118",)),
    # Failing builds differ by their reasons: the first is the answer.
    ("runtime", {"cuda118": NOTHING_TOO, "cuda128": NOTHING}, None, NOTHING_TOO, ("cuda118",)),
    # A build with no device code is no candidate.
    ("runtime", {"cuda118": None, "cuda128": PTX_OK}, None, PTX_OK, ("cuda128",)),
    # A CUDA runtime loads the build named for it, and only that one.
    ("runtime", {"cuda118": PTX_OK, "cuda128": NATIVE}, Version(11, 8), PTX_OK, ("cuda118",)),
    ("runtime", {"cuda118": NATIVE, "cuda128": NOTHING}, Version(12, 8), NOTHING, ("cuda128",)),
    # A GPU's build is picked per device: a runtime selects nothing there.
    ("gpu", {"sm90": NATIVE, "sm100": PTX_OK}, Version(12, 8), NATIVE, ("sm90",)),
    ("gpu", {"sm90": NOTHING, "sm100": PTX_OK}, None, PTX_OK, ("sm100",)),
]
_SETS = {"runtime": _runtime_set, "gpu": _gpu_set}


@pytest.mark.parametrize(("kind", "outcomes", "runtime", "best", "chosen"), SET_ROWS)
def test_a_set_is_answered_by_its_best_loadable_build(
    kind: str,
    outcomes: dict[str, Outcome | None],
    runtime: Version | None,
    best: Outcome,
    chosen: tuple[str, ...],
) -> None:
    s = _SETS[kind]()
    builds = tuple((v.label, outcomes.get(v.label)) for v in s.variants)
    part = set_part(s, builds, runtime)
    assert part is not None
    assert part.outcome is best
    assert (part.name, part.targets, part.variants, part.builds) == (s.family, "", s, builds)
    assert part.chosen == chosen


# (builds by label, runtime, why the set fails)
NO_BUILD_ROWS = [
    # A runtime with no build named for it: the distribution does not run.
    ({"cuda118": NATIVE, "cuda128": PTX_OK}, Version(12, 4),
     "q/libq_cuda*.so: no build for CUDA runtime 12.4 among none"),
    # The build named for it has no device code.
    ({"cuda118": None, "cuda128": PTX_OK}, Version(11, 8),
     "q/libq_cuda*.so: no build for CUDA runtime 11.8 among cuda118"),
    # Only another backend's build has code: no build a CUDA device can get.
    ({"cuda118": None, "cuda128": None, "cpu": NATIVE}, None,
     "q/libq_cuda*.so: no build for this device among cuda118, cuda128"),
]  # fmt: skip


@pytest.mark.parametrize(("outcomes", "runtime", "why"), NO_BUILD_ROWS)
def test_a_set_with_no_loadable_build_fails_and_says_which_could_load(
    outcomes: dict[str, Outcome | None], runtime: Version | None, why: str
) -> None:
    s = _runtime_set()
    builds = tuple((v.label, outcomes.get(v.label)) for v in s.variants)
    part = set_part(s, builds, runtime)
    assert part == Part(s.family, Outcome(Category.NOTHING, None, why), "", s, builds, ())
    assert not part.outcome.passes


def test_a_set_whose_builds_have_no_device_code_is_no_part() -> None:
    s = _runtime_set()
    builds = tuple((v.label, None) for v in s.variants)
    assert set_part(s, builds, None) is None
    assert set_part(s, builds, Version(11, 8)) is None


# --- 5. A distribution on a device ------------------------------------------------------
def _part(found: Outcome, name: str = "lib.so") -> Part:
    return Part(name, found)


# (parts' outcomes, errors reading some file, the category)
OVERALL_ROWS = [
    ((), False, Category.NO_DEVICE_CODE),
    ((), True, Category.UNREADABLE),
    ((NATIVE,), False, Category.NATIVE),
    ((NATIVE,), True, Category.NATIVE),  # the parts read answer; the errors are said
    ((NATIVE, NATIVE), False, Category.NATIVE),
    ((COMPATIBLE, OLDER), False, Category.COMPATIBLE),  # one category, two routes
    ((NATIVE, PTX_OK), False, Category.MIXED),
    ((NOTHING, NOTHING_TOO), False, Category.NOTHING),
]


@pytest.mark.parametrize(("outcomes", "errors", "expected"), OVERALL_ROWS)
def test_a_distribution_s_category_on_a_device(
    outcomes: tuple[Outcome, ...], errors: bool, expected: Category
) -> None:
    assert overall([_part(o) for o in outcomes], errors=errors) is expected


# (parts' outcomes, the kernels' groups, the category): where kernels were counted, the
# route most of them take answers, whatever the parts' categories.
SM_90 = sass("sm_90", "9.0")
JIT_80 = ptx("compute_80", "9.0", "9.0")
KERNELS_ROWS = [
    ((NATIVE,), [(NONE, ("b1", "c1")), (SM_90, ("a1",))], Category.NOTHING),
    ((NATIVE, PTX_OK), [(JIT_80, ("a", "b")), (SM_90, ("c",))], Category.PTX_JIT),
    ((NOTHING,), [(SM_90, ("a",))], Category.NATIVE),
    # No kernel counted: the parts answer, as without names.
    ((NATIVE, PTX_OK), [], Category.MIXED),
    # No part: no device code, counted kernels or not.
    ((), [(SM_90, ("a",))], Category.NO_DEVICE_CODE),
]


@pytest.mark.parametrize(("outcomes", "groups", "expected"), KERNELS_ROWS)
def test_counted_kernels_give_a_distribution_the_category_of_their_majority(
    outcomes: tuple[Outcome, ...],
    groups: list[tuple[Route, tuple[str, ...]]],
    expected: Category,
) -> None:
    kernels = tally(groups)
    assert overall([_part(o) for o in outcomes], errors=False, kernels=kernels) is expected


def test_a_distribution_passes_a_device_when_every_part_does() -> None:
    cap = Capability(9, 0)
    assert DeviceVerdict(cap, Category.NO_DEVICE_CODE, ()).passes
    assert DeviceVerdict(cap, Category.NATIVE, (_part(NATIVE), _part(PTX_OK))).passes
    assert not DeviceVerdict(cap, Category.MIXED, (_part(NATIVE), _part(NOTHING))).passes
    assert not DeviceVerdict(cap, Category.MIXED, (_part(NOTHING), _part(NATIVE))).passes


TILE_UNKNOWN = Outcome(
    Category.TILE_IR, Route(Path.TILE_IR, None, Version(13, 4), Version(13, 4)), "tile.fatbin"
)
ELSEWHERE = Outcome(Category.OTHER_DEVICES, OTHER, "sm120a.cubin: only for other devices")


@pytest.mark.parametrize(
    ("outcomes", "driver", "undecided"),
    [
        ((TILE_UNKNOWN,), None, True),
        ((NATIVE, TILE_UNKNOWN), None, True),
        ((TILE_UNKNOWN, ELSEWHERE), None, True),  # as its kernels' shares count it
        ((TILE_UNKNOWN,), Version(13, 3), False),  # known not to compile 13.4
        ((TILE_UNKNOWN, NOTHING), None, False),  # a part known not to run decides
        ((ELSEWHERE,), None, False),
        ((NATIVE,), None, False),  # passes: nothing undecided
        ((), None, False),
    ],
)
def test_a_device_fails_undecided_only_by_tile_ir_of_unknown_support(
    outcomes: tuple[Outcome, ...], driver: Version | None, undecided: bool
) -> None:
    parts = tuple(_part(o, f"lib{i}.so") for i, o in enumerate(outcomes))
    dev = DeviceVerdict(Capability(9, 0), Category.MIXED, parts, None, driver)
    assert dev.undecided is undecided
    unknown = driver is None  # TILE_UNKNOWN's 13.4 is known to the rules: the driver decides
    assert dev.undecided_parts == tuple(
        f"lib{i}.so" for i, o in enumerate(outcomes) if o is TILE_UNKNOWN and unknown
    )
    # What --require-device says of it: "is not known to run" only where undecided.
    said = shortfalls((dev,), (Capability(9, 0),), frozenset())
    assert [s.undecided for s in said] == ([] if dev.passes else [undecided])


def test_a_device_s_parts_are_counted_per_category_best_first() -> None:
    parts = (_part(NOTHING), _part(PTX_OK), _part(NATIVE), _part(NOTHING_TOO), _part(OLDER))
    counts = DeviceVerdict(Capability(9, 0), Category.MIXED, parts).counts()
    assert list(counts.items()) == [
        (Category.NATIVE, 1),
        (Category.COMPATIBLE, 1),
        (Category.PTX_JIT, 1),
        (Category.NOTHING, 2),
    ]
    assert DeviceVerdict(Capability(9, 0), Category.NO_DEVICE_CODE, ()).counts() == {}


# --- Runtime-selected builds: which files are alternatives, which one loads -------------
# (paths in one distribution, the sets: family, selector, labels in order)
SETS_ROWS = [
    # bitsandbytes: ordered by the runtime's number, other backends last (by name).
    (
        ["b/libb_cuda132.so", "b/libb_rocm64.so", "b/libb_cuda118.so", "b/libb_cpu.so",
         "b/libb_cuda121.so"],
        [("b/libb_cuda*.so", Selector.CUDA_RUNTIME,
          ["cuda118", "cuda121", "cuda132", "cpu", "rocm64"])],
    ),
    # sgl-kernel: by SM number, not as text (sm100 after sm90), a/f builds by their key.
    (
        ["s/sm100/ops.so", "s/sm90a/ops.so", "s/sm90/ops.so"],
        [("s/sm*/ops.so", Selector.GPU, ["sm90", "sm90a", "sm100"])],
    ),
    # Files that match no rule are in no set (moved here from tests/test_environment.py).
    (
        ["bnb/libbitsandbytes_cuda118.so", "bnb/libbitsandbytes_cuda128.so",
         "bnb/libbitsandbytes_cpu.so", "bnb/libbitsandbytes_rocm64.so", "bnb/other.so"],
        [("bnb/libbitsandbytes_cuda*.so", Selector.CUDA_RUNTIME,
          ["cuda118", "cuda128", "cpu", "rocm64"])],
    ),
    (
        ["sgl/sm90/common_ops.so", "sgl/sm100/common_ops.so", "sgl/x.so"],
        [("sgl/sm*/common_ops.so", Selector.GPU, ["sm90", "sm100"])],
    ),
    (["bnb/libbitsandbytes_cuda128.so", "bnb/libbitsandbytes_cpu.so"], []),
    (["a/sm90/x.so", "b/sm100/x.so"], []),
    # Two sets in one distribution, each of its own library.
    (
        ["a/libx_cuda118.so", "a/libx_cuda128.so", "a/liby_cuda118.so", "a/liby_cuda128.so"],
        [("a/libx_cuda*.so", Selector.CUDA_RUNTIME, ["cuda118", "cuda128"]),
         ("a/liby_cuda*.so", Selector.CUDA_RUNTIME, ["cuda118", "cuda128"])],
    ),
    # A file in a set of one rule is in no set of another: the sm90/ builds are the
    # runtime rule's; the lone sm100/ build is no choice, by either rule.
    (
        ["p/sm90/libx_cuda118.so", "p/sm90/libx_cuda128.so", "p/sm100/libx_cuda118.so"],
        [("p/sm90/libx_cuda*.so", Selector.CUDA_RUNTIME, ["cuda118", "cuda128"])],
    ),
    # Whatever comes first in the distribution: a file of no rule, a file taken by a set of
    # the first rule, a library of one build; every set after it is found.
    (
        ["b/other.so", "b/libb_cuda118.so", "b/libb_cuda128.so"],
        [("b/libb_cuda*.so", Selector.CUDA_RUNTIME, ["cuda118", "cuda128"])],
    ),
    (
        ["a/libx_cuda118.so", "a/libx_cuda128.so", "g/sm90/ops.so", "g/sm100/ops.so"],
        [("a/libx_cuda*.so", Selector.CUDA_RUNTIME, ["cuda118", "cuda128"]),
         ("g/sm*/ops.so", Selector.GPU, ["sm90", "sm100"])],
    ),
    (
        ["x/libx_cuda118.so", "y/liby_cuda118.so", "y/liby_cuda128.so"],
        [("y/liby_cuda*.so", Selector.CUDA_RUNTIME, ["cuda118", "cuda128"])],
    ),
    # Fewer than two builds a CUDA device can get is no choice.
    (["b/libb_cuda128.so"], []),
    (["b/libb_cuda128.so", "b/libb_cpu.so", "b/libb_rocm64.so"], []),
    (["b/libb_cuda128.so", "c/libb_cuda118.so"], []),  # different folders
    (["s/sm90/ops.so", "s/sm100/other.so"], []),  # different libraries
    (["lib/libcudart.so.12", "lib/libcuda118_helper.so", "lib/libx_cuda1.so"], []),
]  # fmt: skip


@pytest.mark.parametrize(("paths", "expected"), SETS_ROWS)
def test_alternative_builds_are_found_by_their_names(
    paths: list[str], expected: list[tuple[str, Selector, list[str]]]
) -> None:
    found = [(s.family, s.rule.selector, [v.label for v in s.variants]) for s in find_sets(paths)]
    assert found == expected


def test_each_set_is_its_rule_s() -> None:
    by_name = {r.name: r for r in RULES}
    (runtime,) = find_sets(["libx_cuda118.so", "libx_cuda128.so"])
    (gpu,) = find_sets(["sm90/x.so", "sm100/x.so"])
    assert runtime.rule is by_name["cuda-runtime-suffix"]
    assert gpu.rule is by_name["gpu-folder"]


# (key, selector, other backend: the build's label and the runtime it is named for)
VARIANT_ROWS = [
    ("118", Selector.CUDA_RUNTIME, False, "cuda118", Version(11, 8)),
    ("132", Selector.CUDA_RUNTIME, False, "cuda132", Version(13, 2)),
    ("100", Selector.CUDA_RUNTIME, False, "cuda100", Version(10, 0)),
    ("cpu", Selector.CUDA_RUNTIME, True, "cpu", None),
    ("rocm64", Selector.CUDA_RUNTIME, True, "rocm64", None),
    ("100", Selector.GPU, False, "sm100", None),
    ("90a", Selector.GPU, False, "sm90a", None),
]


@pytest.mark.parametrize(("key", "selector", "other", "label", "runtime"), VARIANT_ROWS)
def test_a_build_s_label_and_runtime(
    key: str, selector: Selector, other: bool, label: str, runtime: Version | None
) -> None:
    build = Variant(f"lib_{key}.so", key, selector, other)
    assert (build.label, build.runtime) == (label, runtime)


# (CUDA runtime, the builds it may load)
LOADED_ROWS = [
    (None, ["cuda118", "cuda121", "cuda132"]),  # unknown: any build a CUDA device gets
    (Version(12, 1), ["cuda121"]),
    (Version(13, 2), ["cuda132"]),
    (Version(12, 4), []),  # none named for it
    (Version(11, 9), []),
]


@pytest.mark.parametrize(("runtime", "loaded"), LOADED_ROWS)
def test_a_cuda_runtime_loads_the_build_named_for_it(
    runtime: Version | None, loaded: list[str]
) -> None:
    (s,) = find_sets([f"libx_cuda{n}.so" for n in ("132", "118", "121")] + ["libx_cpu.so"])
    assert [v.label for v in s.loaded(runtime)] == loaded
    assert [v.label for v in s.selectable] == ["cuda118", "cuda121", "cuda132"]
    assert [str(v.runtime) for v in s.selectable] == ["11.8", "12.1", "13.2"]


@pytest.mark.parametrize("runtime", [None, Version(12, 8)])
def test_a_gpu_s_builds_may_all_load_whatever_the_runtime(runtime: Version | None) -> None:
    (s,) = find_sets(["k/sm90/x.so", "k/sm100/x.so"])
    assert [v.label for v in s.loaded(runtime)] == ["sm90", "sm100"]


# --- 6. What fails --require-device -----------------------------------------------------
H100, GB10, A100 = Capability(9, 0), Capability(12, 1), Capability(8, 0)


def _device(cap: Capability, *parts: tuple[str, Outcome]) -> DeviceVerdict:
    return DeviceVerdict(cap, Category.MIXED, tuple(_part(o, name) for name, o in parts))


PASSES = _device(H100, ("a.so", NATIVE), ("b.so", PTX_OK))
FAILS = _device(H100, ("a.so", NATIVE), ("b.so", NOTHING), ("c.so", FAILS_NATIVE))
ALL_REQUIRED = (H100, GB10, A100)

# (the devices, the required ones, members read without names, the shortfalls)
SHORTFALL_ROWS = [
    ((), ALL_REQUIRED, (), ()),
    ((PASSES,), ALL_REQUIRED, (), ()),  # a passing device is no shortfall
    ((FAILS,), (GB10,), (), ()),  # a failing device nobody requires is none either
    ((FAILS,), (), ("b.so",), ()),
    ((FAILS,), (H100,), (), (Shortfall(H100, ("b.so", "c.so"), False),)),
    # Judged by targets only where a failing part was read without names.
    ((FAILS,), (H100,), ("a.so",), (Shortfall(H100, ("b.so", "c.so"), False),)),
    ((FAILS,), (H100,), ("c.so",), (Shortfall(H100, ("b.so", "c.so"), True),)),
    ((FAILS,), (H100,), ("b.so", "c.so"), (Shortfall(H100, ("b.so", "c.so"), True),)),
    # Every required device that fails, in the devices' order, past one that passes.
    (
        (PASSES, _device(GB10, ("x.so", NOTHING)), _device(A100, ("y.so", NOTHING_TOO))),
        ALL_REQUIRED,
        ("y.so",),
        (Shortfall(GB10, ("x.so",), False), Shortfall(A100, ("y.so",), True)),
    ),
    (
        (_device(GB10, ("x.so", NOTHING)), _device(A100, ("y.so", NOTHING_TOO))),
        (A100,),
        (),
        (Shortfall(A100, ("y.so",), False),),
    ),
]


@pytest.mark.parametrize(("devices", "required", "unnamed", "expected"), SHORTFALL_ROWS)
def test_what_fails_a_required_device(
    devices: tuple[DeviceVerdict, ...],
    required: tuple[Capability, ...],
    unnamed: tuple[str, ...],
    expected: tuple[Shortfall, ...],
) -> None:
    assert shortfalls(devices, required, frozenset(unnamed)) == expected


PARTLY_90 = tally([(NONE, ("b1", "c1")), (SM_90, ("a1",))])  # the item-3 library on 9.0
NONE_90 = tally([(NONE, ("x", "y"))])
RUNS_90 = tally([(SM_90, ("k",))])
PASSES_PARTLY = Outcome(Category.NATIVE, SM_90, None)  # as a whole: something runs

# (parts: (name, outcome, its kernels), the kernels the shortfall carries): those of the
# failing parts alone (a library that passes partly lends it none of its kernels without
# code), counted only where every failing part's were.
SHORTFALL_KERNELS_ROWS = [
    ((("x.so", FAILS_NATIVE, PARTLY_90),), PARTLY_90),
    ((("a.so", PASSES_PARTLY, PARTLY_90), ("b.so", NOTHING, NONE_90)), NONE_90),
    ((("a.so", NATIVE, RUNS_90), ("b.so", NOTHING, NONE_90), ("c.so", FAILS_NATIVE, PARTLY_90)),
     tally([(NONE, ("x", "y", "b1", "c1")), (SM_90, ("a1",))])),
    ((("a.so", NATIVE, RUNS_90), ("b.so", NOTHING, None)), None),  # b.so read without names
    ((("b.so", NOTHING, NONE_90), ("c.so", NOTHING_TOO, None)), None),
]  # fmt: skip


@pytest.mark.parametrize(("parts", "expected"), SHORTFALL_KERNELS_ROWS)
def test_a_shortfall_carries_the_failing_parts_kernels_where_they_were_counted(
    parts: tuple[tuple[str, Outcome, Shares | None], ...], expected: Shares | None
) -> None:
    built = tuple(Part(name, o, kernels=k) for name, o, k in parts)
    (short,) = shortfalls((DeviceVerdict(H100, Category.MIXED, built),), (H100,), frozenset())
    assert short.failing == tuple(p.name for p in built if not p.outcome.passes)
    assert short.kernels == expected


# (parts' kernels, the distribution's): every part's as one, only where each was counted.
KERNELS_OF_ROWS = [
    ((), None),
    ((RUNS_90,), RUNS_90),
    ((RUNS_90, PARTLY_90), tally([(SM_90, ("a1", "k")), (NONE, ("b1", "c1"))])),
    ((RUNS_90, None), None),
    ((None, RUNS_90), None),
]


@pytest.mark.parametrize(("kernels", "expected"), KERNELS_OF_ROWS)
def test_a_distribution_s_kernels_are_its_parts_as_one(
    kernels: tuple[Shares | None, ...], expected: Shares | None
) -> None:
    parts = [Part(f"{i}.so", NATIVE, kernels=k) for i, k in enumerate(kernels)]
    assert kernels_of(parts) == expected
    assert DeviceVerdict(H100, Category.NATIVE, ()).kernels is None
