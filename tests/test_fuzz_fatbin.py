"""Property: whatever bytes a real fatbin, wheel or archive is mutated into, reading it gives
a report or a one-line BadInputError naming the file; never another exception, a hang or
unbounded memory, and a good file beside a bad one is still read. Through the command
(`cuda-gate inspect`), every exit 6 prints one line per unreadable artifact naming it (an
archive's member as ``lib.a(member.o)``, a wheel's as ``x.whl!path``) and its problem.

Thousands of cases over the golden binaries and the repro wheels (the corpus is
tests/golden and tests/repro; runs are derandomized, so every run tries the same cases):
byte overwrites in the header regions that matter most, random flips anywhere,
truncations, and spliced size fields. Each case has a deadline (hypothesis), and the
traced memory of the whole run is bounded.
"""

from __future__ import annotations

import io
import re
import resource
import struct
import zipfile
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.cli import main
from gate.errors import BadInputError, ExitCode
from gate.reader import fatbin
from gate.reader.limits import MB, Limits
from gate.reader.read import read_buffer
from gate.scan.cache import ENV_DIR
from gate.scan.walk import read_paths

GOLDEN = Path(__file__).parent / "golden"
REPRO = Path(__file__).parent / "repro"
# Smaller bounds than the defaults: a mutated size field reaches them in a few ms,
# and the memory check below then holds whatever the mutation claims.
LIMITS = Limits(entry=16 << 20, artifact=64 << 20, member=32 << 20, ratio=200)
MEMORY = 256 << 20
SEEDS = {
    name: (GOLDEN / name).read_bytes()
    for name in ("debug.fatbin", "multi.o", "libkernels.so", "sm_90a.cubin")
}
# Fields whose corruption matters most: container and entry headers.
SIZES = [0, 1, 7, 8, 16, 63, 64, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, 1 << 40, (1 << 64) - 1]
# Entry kinds written over an entry's own: the known ones (a cubin's payload read as Tile IR
# or PTX), and kinds no reader knows, which are listed, never a reason to refuse the file.
KINDS = [0, 1, 2, 3, 8, fatbin.KIND_TILEIR, 4096, 0xFFFF]

pytestmark = pytest.mark.unit


def _hot_offsets(data: bytes) -> list[int]:
    """Offsets of container and entry headers, where mutations are most interesting."""
    hot = []
    pos = data.find(fatbin.CONTAINER_PREFIX)
    while pos >= 0:
        hot.append(pos)
        try:
            container = fatbin.parse_container(data, pos, len(data), "seed")
        except BadInputError:
            break
        hot += [e.offset for e in container.entries]
        pos = data.find(fatbin.CONTAINER_PREFIX, pos + 16)
    return hot or [0]


HOT = {name: _hot_offsets(data) for name, data in SEEDS.items()}


def _mutate(
    draw: st.DrawFn,
    data: bytearray,
    hot: list[int],
    *,
    rounds: int,
    reach: int,
    widths: list[int],
) -> bytes:
    """Up to ``rounds`` mutations: a byte or a size field near a hot offset (within
    ``reach``), any byte, or a truncation; size fields are ``widths`` bytes wide."""
    for _ in range(draw(st.integers(1, rounds))):
        how = draw(st.sampled_from(["hot-byte", "hot-size", "hot-kind", "any-byte", "truncate"]))
        if not data:
            break
        if how == "hot-kind":
            at = draw(st.sampled_from(hot))
            if at + 2 <= len(data):
                struct.pack_into("<H", data, at, draw(st.sampled_from(KINDS)))
            continue
        if how == "truncate":
            del data[draw(st.integers(0, len(data) - 1)) :]
            continue
        if how == "any-byte":
            at = draw(st.integers(0, len(data) - 1))
        else:
            at = draw(st.sampled_from(hot)) + draw(st.integers(0, reach))
        if at >= len(data):
            continue
        if how == "hot-size" and at + 8 <= len(data):
            value = draw(st.sampled_from(SIZES))
            width = draw(st.sampled_from(widths))
            fmt = {2: "<H", 4: "<I", 8: "<Q"}[width]
            struct.pack_into(fmt, data, at, value & ((1 << width * 8) - 1))
        else:
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(SEEDS)))
    data = bytearray(SEEDS[name])
    return name, _mutate(draw, data, HOT[name], rounds=4, reach=79, widths=[4, 8])


@settings(
    max_examples=3000,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(case=mutated(), names=st.booleans())
def test_mutated_fatbins_read_or_fail_with_one_line(
    traced: None, case: tuple[str, bytes], names: bool
) -> None:
    name, data = case
    try:
        report = read_buffer(data, 0, len(data), name, names=names, limits=LIMITS)
    except BadInputError as e:
        line = e.one_line()
        assert line.startswith(f"{name}: ")
        assert "\n" not in line
        return
    if names:  # decompressed entries passed the bound; headers alone are only listed
        for entry in report.listing.entries:
            decoded = entry.kind.routed  # LTO IR and unknown kinds are listed, never decoded
            assert entry.size <= LIMITS.entry or entry.compression == "none" or not decoded
    for entry in report.listing.unknown():  # listed with its kind number, never refused
        assert entry.number not in fatbin.KNOWN_KINDS


def _wheel_seed() -> bytes:
    """A deflated wheel of the golden library, its cubin and fatbin (fixed dates: same bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for member, source in (
            ("demo/libkernels.so", "libkernels.so"),
            ("demo/k.cubin", "sm_90a.cubin"),
            ("demo/d.fatbin", "debug.fatbin"),
        ):
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, (GOLDEN / source).read_bytes())
        z.writestr("demo-1.0.dist-info/RECORD", "")
    return out.getvalue()


CONTAINERS = {
    "demo.whl": _wheel_seed(),
    "repro-demo.whl": (REPRO / "demo-0.1-py3-none-any.whl").read_bytes(),
    "libkernels.a": (GOLDEN / "libkernels.a").read_bytes(),
}


def _zip_hot(data: bytes) -> list[int]:
    """Local headers, central directory records and the end record of a zip."""
    hot = []
    for magic in (b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"):
        pos = data.find(magic)
        while pos >= 0:
            hot.append(pos)
            pos = data.find(magic, pos + 4)
    return hot


def _ar_hot(data: bytes) -> list[int]:
    """Every member header of an ar archive."""
    hot, pos = [], 8
    while pos + 60 <= len(data):
        hot.append(pos)
        size = data[pos + 48 : pos + 58].strip()
        if not size.isdigit():
            break
        pos += 60 + int(size) + (int(size) & 1)
    return hot


CONTAINER_HOT = {
    name: (_ar_hot(data) if name.endswith(".a") else _zip_hot(data)) or [0]
    for name, data in CONTAINERS.items()
}


@st.composite
def mutated_container(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(CONTAINERS)))
    data = bytearray(CONTAINERS[name])
    hot = CONTAINER_HOT[name]
    return name, _mutate(draw, data, hot, rounds=3, reach=59, widths=[2, 4, 8])


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def traced() -> Iterator[None]:
    """The process's peak memory grows by less than MEMORY over the whole fuzz run.

    The high-water mark (rusage), not tracemalloc: tracing every allocation would slow
    thousands of cases several-fold, and a claimed size that got allocated would show
    in the peak either way.
    """
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert grown < MEMORY, f"peak memory grew by {grown} bytes"


@settings(
    max_examples=1500,
    deadline=3000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(case=mutated_container(), names=st.booleans())
def test_mutated_wheels_and_archives_give_one_line_per_bad_file(
    folder: Path, traced: None, case: tuple[str, bytes], names: bool
) -> None:
    name, data = case
    bad = folder / f"mutated-{name}"
    bad.write_bytes(data)
    good = GOLDEN / "multi.o"
    reports = list(read_paths([bad, good], names=names, limits=LIMITS))
    assert reports[-1].path == str(good)
    assert reports[-1].error is None  # the good file beside the bad one is still read
    for report in reports[:-1]:
        assert report.path.startswith(str(bad))
        if report.error is not None:
            assert report.error.startswith(str(bad))
            assert "\n" not in report.error
            assert len(report.error) < 1000


# Every seed, archives and fatbins among them, mutated at its own hot offsets: an
# archive's member headers and the fatbin containers inside its members both.
EVERY_SEED = {**SEEDS, **CONTAINERS}
EVERY_HOT = {
    name: sorted({*HOT.get(name, ()), *CONTAINER_HOT.get(name, ()), *_hot_offsets(data)})
    for name, data in EVERY_SEED.items()
}
# The bounds of LIMITS, as the command takes them.
LIMIT_OPTIONS = (
    "--max-entry-mb", str(LIMITS.entry // MB), "--max-artifact-mb", str(LIMITS.artifact // MB),
    "--max-member-mb", str(LIMITS.member // MB), "--max-ratio", str(LIMITS.ratio),
)  # fmt: skip
# The last line of an exit 6 over several artifacts: how many could not be read, and the
# first of them (gate.commands.inspect); a lone artifact's own line is the last line.
SUMMARY = re.compile(
    r"cuda-gate: error: (?:(?P<some>[\d,]+) of [\d,]+ artifacts could not be read"
    r"|none of the (?P<all>[\d,]+) artifacts could be read)"
    r": (?P<first>.+?)(?: and (?P<more>[\d,]+) more)?"
)
NOTHING = "no file to inspect (no ELF file, archive, wheel or fatbin)"
# After the file's path: its member, if any (``(member.o)``, ``!lib/x.so``), then the problem.
PROBLEM = re.compile(r"(?:\(.*?\)|!.*?)?: (?P<problem>\S.*)")


@st.composite
def mutated_input(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(EVERY_SEED)))
    data = bytearray(EVERY_SEED[name])
    return name, _mutate(draw, data, EVERY_HOT[name], rounds=3, reach=79, widths=[2, 4, 8])


@pytest.fixture(scope="module")
def cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The inspection cache (``--names`` uses it) in a folder of the test's own."""
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_DIR, str(folder))
        yield folder


def _inspect(*args: str) -> tuple[int, str, str]:
    """``cuda-gate inspect`` in this process: its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["inspect", "--no-detect", *LIMIT_OPTIONS, *args])
    return code, out.getvalue(), err.getvalue()


def _assert_each_named(bad: Path, err: str) -> None:
    """Every line of an exit 6 names ``bad`` (or its member): one line per artifact that
    could not be read, with its problem, then (over several artifacts) the count and the
    first of them; or, where nothing in it was an artifact (an archive whose members all
    lost their ELF magic), the one line saying so."""
    if err == f"cuda-gate: error: {bad}: {NOTHING}\n":
        return
    *named, last = err.splitlines()
    counted = SUMMARY.fullmatch(last)
    if counted is None:
        named = [last]  # the only artifact: its own line is the error
    else:
        assert counted["first"].startswith(str(bad)), last
        failed = int((counted["some"] or counted["all"]).replace(",", ""))
        assert int((counted["more"] or "0").replace(",", "")) == failed - 1, last
        assert len(named) == failed, err
    for line in named:
        prefix = f"cuda-gate: error: {bad}"
        assert line.startswith(prefix), line
        found = PROBLEM.fullmatch(line.removeprefix(prefix))
        assert found is not None, line
        assert "could not be read" not in found["problem"], line


@settings(
    max_examples=600,
    deadline=3000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(
    case=mutated_input(),
    options=st.lists(st.sampled_from(["--names", "--json", "--no-scan"]), unique=True),
    beside=st.booleans(),
)
@pytest.mark.usefixtures("cache_folder", "traced")
def test_every_unreadable_input_is_named_with_its_problem(
    folder: Path, case: tuple[str, bytes], options: list[str], beside: bool
) -> None:
    name, data = case
    bad = folder / f"inspected-{name}"
    bad.write_bytes(data)
    good = GOLDEN / "multi.o"
    code, out, err = _inspect(*options, str(bad), *([str(good)] if beside else []))
    if beside:
        assert str(good) in out  # the good file beside the bad one is still listed
    if code == ExitCode.OK:
        return
    assert code == ExitCode.BAD_INPUT, err
    _assert_each_named(bad, err)
