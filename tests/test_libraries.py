"""Loaded libraries judged the way they work: vendors by what runs, the project per kernel."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gate.config import Config, EntryPoint
from gate.evidence import EvidenceDir
from gate.proc import Result
from gate.rules.causes import Cause, ExecPath
from gate.rules.targets import Capability, Version
from gate.stages import libraries
from gate.stages.runs import Run

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).resolve().parent / "golden" / "libkernels.so"  # sm_80+PTX, sm_120


def ran(name: str, *loaded: Path) -> Run:
    result = Result(("./app",), 0, "PASS\n", "", 0.1)
    return Run(
        EntryPoint(name, ("./app",)), ExecPath.NATIVE, result, "x.log", True, True, None, loaded
    )


def judged(tmp_path: Path, cap: str, *runs: Run, config: Config | None = None) -> libraries.Judged:
    evidence = EvidenceDir.create(tmp_path / "ev")
    found = libraries.judge(
        evidence,
        runs=runs,
        artifacts=(),
        cap=Capability.parse(cap),
        driver=Version(13, 0),
        config=config or Config(project_dir=tmp_path),
    )
    libraries.write_views(evidence, found)
    return found


@pytest.mark.parametrize(
    ("cap", "route", "runs"),
    [
        ("12.1", "compatible SASS (sm_120)", True),
        ("9.0", "PTX JIT (compute_80, ISA 9.0, driver >= 13.0)", True),
        ("7.5", "nothing", False),
    ],
)
def test_a_vendor_library_fails_only_when_nothing_in_it_runs(
    tmp_path: Path, cap: str, route: str, runs: bool
) -> None:
    found = judged(tmp_path, cap, ran("app", GOLDEN))
    [library] = found.libraries
    assert (library.route.describe(), library.runs, library.own) == (route, runs, False)
    [check] = found.checks
    assert check.ok is runs
    assert check.message.startswith(route if runs else "nothing in it runs on this device")
    if not runs:
        assert check.cause is Cause.LOADED_LIBRARY
    if cap == "9.0":
        assert "runs only through PTX JIT" in check.message  # a torch wheel reaching 12.1 by PTX
    assert (tmp_path / "ev" / "loaded" / "libkernels.so" / "device-code.txt").is_file()


def test_libraries_read_ahead_are_judged_as_if_read_then(tmp_path: Path) -> None:
    # The execute stage reads what each run loaded while the next one runs.
    copy = tmp_path / "copy" / "libkernels.so"
    copy.parent.mkdir()
    shutil.copy(GOLDEN, copy)
    plain = tmp_path / "libplain.so"
    plain.write_bytes(b"\x7fELF not really")
    with libraries.Prefetch(cap=Capability.parse("9.0")) as prefetch:
        prefetch.add([GOLDEN, plain])  # the first run's; copy is asked for only by judge
        evidence = EvidenceDir.create(tmp_path / "ev")
        found = libraries.judge(
            evidence,
            runs=(ran("a", GOLDEN, plain), ran("b", copy)),
            artifacts=(),
            cap=Capability.parse("9.0"),
            driver=Version(13, 0),
            config=Config(project_dir=tmp_path),
            prefetch=prefetch,
        )
    expected = judged(tmp_path / "again", "9.0", ran("a", GOLDEN, plain), ran("b", copy))
    assert [lib.record() for lib in found.libraries] == [lib.record() for lib in expected.libraries]
    assert [c.message for c in found.checks] == [c.message for c in expected.checks]
    text = (tmp_path / "ev" / "loaded-libraries.txt").read_text(encoding="utf-8")
    assert f"{plain}  [not readable" in text or f"{plain}  [no device code]" in text
    # Its evidence files were rendered while the runs went on, and say what a render now says.
    libraries.write_views(evidence, found)
    for name in ("device-code.txt", "device-code.json"):
        ahead = tmp_path / "ev" / "loaded" / "libkernels.so" / name
        now = tmp_path / "again" / "ev" / "loaded" / "libkernels.so" / name
        assert ahead.read_bytes() == now.read_bytes()


def test_a_view_rendered_ahead_for_another_device_is_rendered_again(tmp_path: Path) -> None:
    with libraries.Prefetch(cap=Capability.parse("9.0")) as prefetch:
        prefetch.add([GOLDEN])
        _, read = prefetch.get(GOLDEN)
        assert read is not None
        report, digest = read
        assert prefetch.view(digest, report, Capability.parse("9.0")) == libraries.render_view(
            report, Capability.parse("9.0")
        )
        for_spark = prefetch.view(digest, report, Capability.parse("12.1"))
    assert for_spark == libraries.render_view(report, Capability.parse("12.1"))
    assert for_spark != libraries.render_view(report, Capability.parse("9.0"))


def test_the_same_file_through_a_symlink_is_one_library(tmp_path: Path) -> None:
    link = tmp_path / "libkernels.so.1"
    link.symlink_to(GOLDEN)
    copy = tmp_path / "copy" / "libkernels.so"
    copy.parent.mkdir()
    shutil.copy(GOLDEN, copy)
    found = judged(tmp_path, "12.1", ran("a", GOLDEN, link), ran("b", copy))
    [library] = found.libraries
    assert library.entry_points == ("a", "b")
    listed = (tmp_path / "ev" / "loaded-libraries.txt").read_text(encoding="utf-8")
    # Every path is listed, each with how it runs here; judged once.
    assert listed.count("[device code: runs from compatible SASS (sm_120)]") == 3


def test_a_strict_library_is_judged_per_kernel(tmp_path: Path) -> None:
    config = Config(project_dir=tmp_path, strict_libraries=("libkernels*",))
    # On 9.0 every kernel has a route (compute_80 PTX): a strict library passes too ...
    assert all(
        c.ok for c in judged(tmp_path / "a", "9.0", ran("app", GOLDEN), config=config).checks
    )
    # ... and on 7.5 nothing runs: named as a strict library, with the kernel count.
    [check] = judged(tmp_path / "b", "7.5", ran("app", GOLDEN), config=config).checks
    assert not check.ok
    assert check.message.startswith("strict library: no code for")


def test_runtime_compilers_are_named(tmp_path: Path) -> None:
    nvrtc = tmp_path / "libnvrtc.so.13"
    nvrtc.write_bytes(b"\x7fELF not really")
    found = judged(tmp_path, "9.0", ran("cupy-demo", nvrtc))
    assert found.compilers == {"cupy-demo": ("NVRTC",)}
    [check] = found.checks
    assert check.name == "cupy-demo: code generated at run time"
    assert "invisible to inspection" in check.message
