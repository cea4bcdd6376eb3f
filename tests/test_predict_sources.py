"""Which device code stands behind an entry point, and what the summary says was proved."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.config import EntryPoint
from gate.proc import Result
from gate.reader.hostelf import Dependency, HostFormat
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.causes import ExecPath, classify
from gate.rules.routes import Path as RoutePath
from gate.rules.routes import Route
from gate.rules.targets import Capability, Target, Version
from gate.stages import predict
from gate.stages.inspected import Inspected
from gate.stages.libraries import Judged, Library
from gate.stages.runs import Run

pytestmark = pytest.mark.unit

H200 = Capability(9, 0)
KERNEL = "_Z1kPi"
HOST = HostFormat("ELF 64-bit", 64, 62, "x86-64", "executable", None, (), (), ())


def listing(*, sass: str = "sm_90", ptx: str | None = "compute_90") -> Listing:
    entries = [DeviceEntry(Kind.SASS, Target.parse(sass), (KERNEL,))]
    if ptx:
        entries.append(DeviceEntry(Kind.PTX, Target.parse(ptx), (KERNEL,), ptx_isa=Version(9, 0)))
    return Listing(tuple(entries))


def artifact(
    path: Path, lst: Listing, *, sha: str = "a" * 64, needs: tuple[str, ...] = ()
) -> Inspected:
    path.write_bytes(b"\x7fELF")
    deps = tuple(Dependency(n, path.name, None) for n in needs)
    return Inspected(path.name, path.resolve(), sha, 4, HOST, deps, lst, (), False, "")


def library(path: Path, lst: Listing, sha: str, *, art: Inspected | None = None) -> Library:
    route = Route(RoutePath.EXACT_SASS, Target.parse("sm_90"))
    return Library(path, sha, lst, ("app",), art, False, route, True, "loaded/x/")


def judged(*libraries: Library) -> Judged:
    return Judged(tuple(libraries), {"app": tuple(libraries)}, {}, ())


def test_the_program_itself_and_what_it_loaded_are_its_sources(tmp_path: Path) -> None:
    app = artifact(tmp_path / "app", listing(), needs=("libvendor.so",))
    vendor = library(tmp_path / "libvendor.so", listing(ptx=None), "b" * 64)
    other = library(tmp_path / "libother.so", listing(ptx=None), "c" * 64)
    found = predict.sources_of("app", "app", str(tmp_path), [app], judged(vendor, other))
    assert [(s.name, s.own, s.linked) for s in found] == [
        ("app", True, False),
        ("libvendor.so", False, True),  # the project links against it
        ("libother.so", False, False),  # loaded some other way (dlopen)
    ]
    # An absolute program path finds the same artifact; another program does not.
    absolute = predict.sources_of("app", str(tmp_path / "app"), None, [app], judged())
    assert [s.name for s in absolute] == ["app"]
    assert predict.sources_of("app", "./missing", str(tmp_path), [app], judged()) == ()
    # Each names its record in result.json, where the diagnosis's clauses point.
    first = artifact(tmp_path / "first", listing())
    found = predict.sources_of("app", "app", str(tmp_path), [first, app], judged(vendor, other))
    assert [s.where for s in found] == [
        "/artifacts/1",
        "/loaded_libraries/0",
        "/loaded_libraries/1",
    ]


def test_a_loaded_library_that_is_an_artifact_counts_once_under_the_artifact_s_name(
    tmp_path: Path,
) -> None:
    lib = artifact(tmp_path / "libk.so", listing())
    loaded = library(tmp_path / "copy" / "libk.so", listing(), lib.sha256, art=lib)
    found = predict.sources_of("app", "true", str(tmp_path), [lib], judged(loaded, loaded))
    assert [(s.name, s.own) for s in found] == [("libk.so", True)]


def test_a_program_without_kernels_is_not_a_source(tmp_path: Path) -> None:
    host_only = artifact(tmp_path / "app", Listing())
    assert predict.sources_of("app", "app", str(tmp_path), [host_only], judged()) == ()


def run(path: ExecPath, rc: int, output: str = "PASS\n", cwd: Path | None = None) -> Run:
    entry = EntryPoint("app", ("./app",), cwd=str(cwd) if cwd else None)
    result = Result(("./app",), rc, output, "", 0.1)
    failure = None if rc == 0 else classify(output)
    return Run(entry, path, result, path.log_name, "PASS" in output, True, failure)


def test_one_prediction_per_entry_point_with_its_runtime_compilers(tmp_path: Path) -> None:
    app = artifact(tmp_path / "app", listing())
    runs = [run(ExecPath.NATIVE, 0, cwd=tmp_path), run(ExecPath.JIT, 0, cwd=tmp_path)]
    compiled = Judged((), {}, {"app": ("NVRTC",)}, ())
    (found,) = predict.predict_all(runs, [app], compiled, H200, Version(13, 0))
    assert (found.entry, found.capability, found.compilers) == ("app", H200, ("NVRTC",))
    assert found.native.can_run is True
    assert found.jit.can_run is True
    assert found.expected(ExecPath.JIT) is found.jit


def _proved(lst: Listing, *, vendor: Listing | None = None) -> predict.Prediction:
    sources = [predict.Source("libext.so", lst, own=True)]
    if vendor is not None:
        sources.append(predict.Source("libtorch_cuda.so", vendor, own=False))
    return predict.Prediction(
        "app",
        H200,
        tuple(sources),
        predict.expect_native(sources, H200),
        predict.expect_jit(sources, H200, Version(13, 0)),
        (),
    )


NO_IMAGE = "no kernel image is available for execution on the device\n"


@pytest.mark.parametrize(
    ("vendor", "jit", "proved", "says"),
    [
        (
            None,
            (0, "PASS\n"),
            frozenset(),
            "app: native proved; forced JIT proved for the whole program",
        ),
        (None, (1, NO_IMAGE), frozenset(), "app: native proved; forced JIT NOT proved"),
        (
            listing(ptx=None),
            (1, NO_IMAGE),
            frozenset({"libext.so"}),
            (
                "app: native proved; whole-program forced JIT cannot run (libtorch_cuda.so ships "
                "no PTX for 9.0); the project's own PTX (libext.so) proved by driver module load"
            ),
        ),
        (
            listing(ptx=None),
            (1, NO_IMAGE),
            frozenset(),
            (
                "app: native proved; whole-program forced JIT cannot run (libtorch_cuda.so ships "
                "no PTX for 9.0); the project's PTX NOT proved by module load"
            ),
        ),
        (
            listing(ptx=None),
            (0, "PASS\n"),
            frozenset({"libext.so"}),
            (
                "app: native proved; forced JIT proved for the whole program; it launched no "
                "kernel of the libraries that block it (libtorch_cuda.so ships no PTX for 9.0); "
                "the project's own PTX (libext.so) proved by driver module load"
            ),
        ),
    ],
)
def test_the_paths_proved_say_which_path_was_proved_for_which_code(
    vendor: Listing | None, jit: tuple[int, str], proved: frozenset[str], says: str
) -> None:
    runs = [run(ExecPath.NATIVE, 0), run(ExecPath.JIT, *jit)]
    assert predict.paths_proved(runs, [_proved(listing(), vendor=vendor)], proved) == [says]


def test_own_ptx_proved_by_recorded_jit_launches_says_so() -> None:
    runs = [run(ExecPath.NATIVE, 0), run(ExecPath.JIT, 0)]
    blocked = [_proved(listing(), vendor=listing(ptx=None))]
    both = frozenset({"libext.so"})
    (said,) = predict.paths_proved(runs, blocked, both, by_launches=both)
    assert said.endswith(
        "the project's own PTX (libext.so) proved by its kernels' recorded forced-JIT launches"
    )
    # Proved by launches but not among the proved (a module of it failed): not proved.
    (unproved,) = predict.paths_proved(runs, blocked, frozenset(), by_launches=both)
    assert unproved.endswith("the project's PTX NOT proved by module load")


def test_without_the_native_run_native_is_not_proved_and_no_own_code_says_so() -> None:
    only_vendor = predict.Prediction(
        "app",
        H200,
        (predict.Source("libtorch_cuda.so", listing(ptx=None), own=False),),
        predict.expect_native([], H200),
        predict.expect_jit([predict.Source("v", listing(ptx=None), own=False)], H200, None),
        (),
    )
    assert predict.paths_proved([run(ExecPath.JIT, 1, NO_IMAGE)], [only_vendor], frozenset()) == [
        (
            "app: native NOT proved; whole-program forced JIT cannot run (v ships no PTX for 9.0); "
            "no project device code to prove"
        )
    ]


def test_a_loaded_artifact_keeps_the_artifact_s_name_and_the_library_s_listing(
    tmp_path: Path,
) -> None:
    lib = artifact(tmp_path / "libk.so", listing())
    (tmp_path / "site").mkdir()
    loaded_listing = listing(ptx=None)
    loaded = library(tmp_path / "site" / "libk.so.1", loaded_listing, lib.sha256, art=lib)
    (found,) = predict.sources_of("app", "true", str(tmp_path), [lib], judged(loaded))
    where = "/loaded_libraries/0"  # its record, for the clauses that name it
    assert found == predict.Source("libk.so", loaded_listing, own=True, linked=False, where=where)


def test_a_relative_program_without_a_folder_is_found_from_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = artifact(tmp_path / "app", listing())
    monkeypatch.chdir(tmp_path)
    (found,) = predict.sources_of("app", "app", None, [app], judged())
    assert (found.name, found.own) == ("app", True)


def test_the_program_loaded_as_a_library_counts_once(tmp_path: Path) -> None:
    app = artifact(tmp_path / "app", listing())
    again = library(tmp_path / "app", listing(), app.sha256, art=app)
    found = predict.sources_of("app", "app", str(tmp_path), [app], judged(again))
    assert [(s.name, s.own) for s in found] == [("app", True)]


def test_each_prediction_gets_its_entry_point_s_sources_driver_and_compilers(
    tmp_path: Path,
) -> None:
    newer = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), (KERNEL,)),
            DeviceEntry(Kind.PTX, Target.parse("compute_90"), (KERNEL,), ptx_isa=Version(9, 2)),
        )
    )
    vendor = library(tmp_path / "libvendor.so", newer, "b" * 64)
    runs = [run(ExecPath.NATIVE, 0, cwd=tmp_path), run(ExecPath.JIT, 0, cwd=tmp_path)]
    loaded = Judged((vendor,), {"app": (vendor,)}, {"other": ("NVRTC",)}, ())
    (found,) = predict.predict_all(runs, [], loaded, H200, Version(13, 0))
    where = "/loaded_libraries/0"
    assert found.sources == (predict.Source("libvendor.so", newer, own=False, where=where),)
    assert found.compilers == ()
    assert found.jit.basis == (
        "libvendor.so needs driver CUDA >= 13.2 for its PTX (this driver is CUDA 13.0)"
    )
    (newer_driver,) = predict.predict_all(runs, [], loaded, H200, Version(13, 2))
    assert newer_driver.jit.can_run is True
