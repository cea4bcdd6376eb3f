"""How one library is answered on one device in an environment audit (gate.audit.verdicts).

A library's route is the best route any of its kernels takes (with --strict, the worst):
cuBLAS carries kernels built only for sm_75 beside its sm_90 and sm_121 ones, and reading
its kernel names must not turn its route into "nothing for this device". Whether it
passes is the rule a file alone is judged by (``inspect --require-device``): as a whole,
as the run judges vendor libraries (something runs: cuBLAS passes 9.0 and 12.1, names
read or not; issue 42 item 3 only counts its kernels without code); with --strict every
kernel built for the device needs code there.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.audit.artifact import unmet
from gate.audit.verdicts import judge_group, outcome
from gate.reader.distributions import Distribution, Group, Owner
from gate.reader.listing import DeviceEntry, Kind, Listing, clear_cache
from gate.reader.read import ArtifactReport
from gate.render.environment import detail
from gate.rules.environment import Category
from gate.rules.routes import judge
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit


def _sass(target: str, *kernels: str) -> DeviceEntry:
    return DeviceEntry(Kind.SASS, Target.parse(target), kernels)


def _ptx(target: str, isa: Version, *kernels: str) -> DeviceEntry:
    return DeviceEntry(Kind.PTX, Target.parse(target), kernels, isa)


def _report(*entries: DeviceEntry, names: bool = True) -> ArtifactReport:
    if not names:
        entries = tuple(
            DeviceEntry(e.kind, e.target, (), e.ptx_isa) for e in entries
        )  # a headers-only read: targets, no kernels
    return ArtifactReport("lib.so", "ELF", 64, "x86-64", Listing(tuple(entries)), names)


CUBLAS_LIKE = (
    _sass("sm_75", "turing_only", "gemm"),
    _sass("sm_90", "gemm"),
    _sass("sm_121", "gemm"),
)


@pytest.mark.parametrize(
    ("entries", "cap", "driver", "plain", "strict"),
    [
        # Kernels only for sm_75 do not make cuBLAS "nothing" on 12.1 or 9.0, nor fail
        # it; with --strict they do (each is built for every device, and has no code there).
        (CUBLAS_LIKE, "12.1", None, ("exact SASS (sm_121)", True), ("nothing", False)),
        (CUBLAS_LIKE, "9.0", None, ("exact SASS (sm_90)", True), ("nothing", False)),
        # Exact SASS for one SM number: the plain build before the 'a' one, as the rule.
        (
            (_sass("sm_90a", "wgmma"), _sass("sm_90", "plain")),
            "9.0",
            None,
            ("exact SASS (sm_90)", True),
            ("exact SASS (sm_90)", True),
        ),
        # Between compatible builds the rule takes the newest minor, a family build too
        # (sm_101f, a target of CUDA 12.8, over plain sm_100 on 10.3): so does the audit,
        # not "compatible before family"; the worst of the two is the compatible one.
        (
            (_sass("sm_100", "a"), _sass("sm_101f", "b")),
            "10.3",
            None,
            ("family SASS (sm_101f)", True),
            ("compatible SASS (sm_100)", True),
        ),
        # Nothing runs: kernels built for this device with nothing here are the answer,
        # not the ones built only for other devices.
        (
            (_sass("sm_75", "old"), _sass("sm_120a", "blackwell")),
            "12.1",
            None,
            ("nothing", False),
            ("nothing", False),
        ),
        (
            (_sass("sm_120a", "blackwell"),),
            "12.1",
            None,
            ("only for other devices", False),
            ("only for other devices", False),
        ),
        # PTX a 13.0 driver cannot JIT (ISA 9.2) is passed over for PTX it can; the
        # kernel only in the newer PTX has no usable code, which only --strict fails.
        (
            (_ptx("compute_90", Version(9, 2), "new"), _ptx("compute_80", Version(9, 0), "old")),
            "12.1",
            Version(13, 0),
            ("PTX JIT (compute_80, ISA 9.0, driver >= 13.0)", True),
            ("PTX JIT (compute_90, ISA 9.2, driver >= 13.2)", False),
        ),
    ],
)
def test_a_library_is_answered_by_its_best_route_and_with_strict_by_its_worst(
    entries: tuple[DeviceEntry, ...],
    cap: str,
    driver: Version | None,
    plain: tuple[str, bool],
    strict: tuple[str, bool],
) -> None:
    clear_cache()
    report = _report(*entries)
    device = Capability.parse(cap)
    got = outcome(report, device, driver=driver)
    assert (detail(got), got.passes) == plain
    got_strict = outcome(report, device, strict=True, driver=driver)
    assert (detail(got_strict), got_strict.passes) == strict


TARGETS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_90a", "sm_100f", "sm_103f", "sm_120"]
TARGETS += ["sm_121", "sm_121a", "sm_100"]
PTX = ["compute_75", "compute_90", "compute_100a", "compute_120"]
CAPS = ["12.1", "9.0", "10.3", "8.6", "10.0"]


@st.composite
def kernel_entries(draw: st.DrawFn) -> list[DeviceEntry]:
    entries = []
    for _ in range(draw(st.integers(1, 6))):
        kernels = tuple(
            draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3))
        )
        if draw(st.booleans()):
            entries.append(_sass(draw(st.sampled_from(TARGETS)), *kernels))
        else:
            isa = draw(st.sampled_from([Version(8, 0), Version(9, 0)]))
            entries.append(_ptx(draw(st.sampled_from(PTX)), isa, *kernels))
    return entries


@settings(max_examples=300, deadline=None)
@given(kernel_entries(), st.sampled_from(CAPS))
def test_reading_kernel_names_does_not_change_a_library_s_answer(
    entries: list[DeviceEntry], cap: str
) -> None:
    # Where every entry holds a kernel, the best target holds one: the answer with names
    # is the answer from the targets alone, pass or fail (a library is judged as a whole).
    # With --strict every kernel built for the device needs code there; the per-file
    # rule (gate.audit.artifact.unmet) says the same, strict or not.
    clear_cache()
    device = Capability.parse(cap)
    report = _report(*entries)
    with_names = outcome(report, device)
    headers = outcome(_report(*entries, names=False), device)
    assert (with_names.category, with_names.route) == (headers.category, headers.route)
    assert with_names.passes == headers.passes
    assert with_names.passes is (unmet(report, device) is None)
    strict = outcome(report, device, strict=True)
    every = judge(report.listing.kernel_routes(device), None, per_kernel=True)
    assert strict.passes is every is (unmet(report, device, strict=True) is None)


def _group(*members: tuple[str, ArtifactReport]) -> Group:
    dist = Distribution("cufft-like", "1.0", Owner.DIST_INFO, "cufft_like-1.0.dist-info")
    return Group(dist, tuple(r for _, r in members), tuple(m for m, _ in members))


def test_a_library_whose_cubins_hold_no_kernel_needs_no_device() -> None:
    # libcufftw.so carries one kernel-less sm_52 cubin (nvcc builds one per target for
    # host code): read with names, it is no part of the answer, and cuFFT runs on 12.1.
    clear_cache()
    lib = _report(_sass("sm_120", "fft"), _sass("sm_90", "fft"))
    stub = _report(_sass("sm_52"))
    (verdict,) = judge_group(
        _group(("lib/libcufft.so", lib), ("lib/libcufftw.so", stub)), [Capability(12, 1)]
    ).devices
    assert verdict.passes
    assert [p.name for p in verdict.parts] == ["lib/libcufft.so"]
    assert verdict.category is Category.COMPATIBLE
    # Alone, it needs no device either; without names its sm_52 target is judged.
    (alone,) = judge_group(_group(("lib/libcufftw.so", stub)), [Capability(12, 1)]).devices
    assert (alone.passes, alone.category) == (True, Category.NO_DEVICE_CODE)
    headers = _report(_sass("sm_52"), names=False)
    (judged,) = judge_group(_group(("lib/libcufftw.so", headers)), [Capability(12, 1)]).devices
    assert (judged.passes, judged.category) == (False, Category.NOTHING)
    # LTO IR with no kernel names is still judged (it runs nowhere until device-linked).
    lto = _report(DeviceEntry(Kind.LTOIR, Target.parse("sm_90")))
    (linked,) = judge_group(_group(("lib/libx.a", lto)), [Capability(12, 1)]).devices
    assert not linked.passes
