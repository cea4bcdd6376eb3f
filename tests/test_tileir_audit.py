"""Tile IR in the environment and artifact audit (issue 44): a file whose routed code is Tile
IR is judged by its Tile IR route (the driver's Tile IR compiler at load time, not the PTX
JIT), with the rules' minimum driver, and ``unknown`` where the driver's support is unknown,
never "runs" nor "LTO IR only".

The real inputs are NVIDIA's (tests/tileir_inputs.py): a Tile-IR-only fatbin and one with an
sm_90a cuTile cubin beside the Tile IR. Before, the audit said a Tile-IR-only file was "LTO
IR only ()", phrased a Tile IR route as "PTX JIT needs a newer driver", and the environment
audit stopped on a KeyError (no category for the Tile IR path).
"""

from __future__ import annotations

import json
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.audit import artifact
from gate.audit.verdicts import outcome
from gate.cli import main
from gate.errors import ToolError
from gate.reader.listing import DevicePrediction, KernelPrediction
from gate.reader.read import ArtifactReport, read_buffer
from gate.rules.environment import Category
from gate.rules.routes import Path as RoutePath
from gate.rules.routes import Route
from gate.rules.targets import Capability, Target, Version
from tests.tileir_inputs import inputs

V134 = Version(13, 4)
TILE = Route(RoutePath.TILE_IR, None, V134, V134)
H100 = Capability(9, 0)
GB10 = Capability(12, 1)
UNKNOWN = "unknown: Tile IR runs only where the driver compiles its bytecode version"


@pytest.fixture(scope="module")
def made() -> Path:
    try:
        return inputs()
    except ToolError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot make the cuTile inputs: {e.one_line()}")
        pytest.skip(f"cannot make the cuTile inputs: {e.one_line()}")


def _report(path: Path, *, names: bool) -> ArtifactReport:
    data = path.read_bytes()
    return read_buffer(data, 0, len(data), path.name, names=names)


@pytest.mark.integration
@pytest.mark.parametrize("names", [False, True])
def test_a_tile_ir_only_file_is_routed_through_tile_ir(made: Path, names: bool) -> None:
    report = _report(made / "tile_only.fatbin", names=names)
    assert artifact.targets_text(report) == "Tile IR 13.4"
    assert artifact.needs_device(report)
    for cap in (H100, GB10):
        assert artifact.routes(report, cap) == (TILE,)
        verdict = artifact.verdict(report, artifact.predict(report, cap))
        assert verdict == f"{UNKNOWN}: {TILE.describe()}"
        assert "LTO" not in verdict
        assert "PTX" not in verdict
        # The rules' minimum driver decides where the driver is known.
        known = artifact.verdict(report, artifact.predict(report, cap, V134))
        assert known == "runs only through Tile IR: Tile IR (bytecode 13.4, driver >= 13.4)"
        old = artifact.verdict(report, artifact.predict(report, cap, Version(13, 0)))
        assert old == f"Tile IR needs a newer driver: {TILE.describe()}"


@pytest.mark.integration
@pytest.mark.parametrize("names", [False, True])
def test_a_required_device_is_not_met_where_tile_ir_support_is_unknown(
    made: Path, names: bool
) -> None:
    report = _report(made / "tile_only.fatbin", names=names)
    why = artifact.unmet(report, H100)
    assert why is not None
    assert f"nothing in it runs on 9.0: {UNKNOWN}" in why
    assert artifact.unmet(report, H100, driver=V134) is None
    assert artifact.unmet(report, H100, driver=Version(13, 0)) is not None
    found = outcome(report, H100)
    assert (found.category, found.route, found.passes) == (Category.TILE_IR, TILE, False)
    assert outcome(report, H100, driver=V134).passes


@pytest.mark.integration
@pytest.mark.parametrize("names", [False, True])
def test_a_cubin_and_tile_ir_run_the_cubin_where_it_runs_and_tile_ir_elsewhere(
    made: Path, names: bool
) -> None:
    # Without names too the cuTile cubin is sm_90a: not for 12.1, where Tile IR is the route.
    report = _report(made / "cubin_tile.fatbin", names=names)
    assert artifact.targets_text(report) == "SASS sm_90a, Tile IR 13.4"
    native = outcome(report, H100)
    assert native.category is Category.NATIVE
    assert native.passes
    assert artifact.verdict(report, artifact.predict(report, H100)) == "native"
    tile = outcome(report, GB10)
    assert (tile.category, tile.route, tile.passes) == (Category.TILE_IR, TILE, False)
    assert artifact.verdict(report, artifact.predict(report, GB10)).startswith(UNKNOWN)
    assert outcome(report, GB10, driver=V134).passes


def _environment(made: Path, tmp_path: Path, *names: str) -> Path:
    """An environment folder holding one distribution (``pkg/``) of the named inputs."""
    folder = tmp_path / "env" / "pkg"
    folder.mkdir(parents=True)
    for name in names:
        shutil.copy(made / name, folder / name)
    return tmp_path / "env"


def _audit_json(args: list[str], env: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``inspect ARGS --json ENV``: exit 0 and a document valid against the schema."""
    code = main([*args, "--json", str(env)])
    out = capsys.readouterr().out
    assert code == 0, out
    doc: dict[str, Any] = json.loads(out)
    text = resources.files("gate").joinpath("schemas/environment.schema.json").read_text("utf-8")
    jsonschema.validate(doc, json.loads(text))
    assert "Tile IR" in out
    return doc


@pytest.mark.integration
def test_the_environment_audit_of_tile_ir_says_tile_ir_and_validates(
    made: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _environment(made, tmp_path, "tile_only.fatbin", "cubin_tile.fatbin")
    args = ["inspect", "--no-detect", "--by-distribution", "--device", "9.0", "--names"]
    assert _audit_json(args, env, capsys)["version"] == 5
    code = main([*args, "--require-device", "12.1", str(env)])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert "Tile IR (bytecode 13.4, driver >= 13.4)" in out
    assert "LTO" not in out + err


@pytest.mark.integration
@pytest.mark.parametrize("names", [False, True])
def test_the_environment_audit_says_unknown_where_tile_ir_support_is_unknown(
    made: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], names: bool
) -> None:
    # No driver known (--no-detect): whether the Tile IR compiles is unknown, and no line
    # may say "does not run" or count it among those that cannot run.
    env = _environment(made, tmp_path, "tile_only.fatbin", "cubin_tile.fatbin", "cubin120.fatbin")
    args = ["inspect", "--no-detect", "--by-distribution", "--device", "9.0", "--device", "12.1"]
    args += ["--names"] if names else []
    code = main([*args, "--require-device", "12.1", str(env)])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    rows = [line for line in out.splitlines() if "9.0 " in line or "12.1 " in line]
    verdicts = [r for r in rows if "unknown:" in r]
    assert len(verdicts) == 2, out
    assert "does not run" not in out + err
    assert "that do not run" not in out
    header = next(line for line in out.splitlines() if line.startswith("summary"))
    assert header.endswith("unknown  cannot run"), out
    for cap in ("9.0", "12.1"):
        row = next(line for line in out.splitlines() if line.startswith(f"{cap} "))
        assert row.split()[-2:] == ["1", "0"], out
    assert "pkg/ -: is not known to run on 12.1" in err
    assert "not known to run on a required device (12.1)" in err
    (dist,) = _audit_json(args, env, capsys)["distributions"]
    for dev in dist["devices"]:
        assert (dev["passes"], dev["undecided"]) == (False, True), dev
        assert "unknown" in dev["verdict"], dev
        assert "does not run" not in dev["verdict"], dev
        if names:
            assert dev["kernels"]["reach"] == "unknown", dev


def _prediction(*routes: Route, driver: Version | None = None) -> DevicePrediction:
    kernels = tuple(KernelPrediction(f"k{i}", r) for i, r in enumerate(routes))
    return DevicePrediction(H100, kernels, driver)


SASS = Route(RoutePath.EXACT_SASS, Target.parse("sm_90"))
PTX_OK = Route(RoutePath.PTX_JIT, Target.parse("compute_90"), Version(8, 0), Version(12, 0))
PTX_NEW = Route(RoutePath.PTX_JIT, Target.parse("compute_90"), Version(9, 9), None)
TILE_NEW = Route(RoutePath.TILE_IR, None, Version(99, 0), None)
ELSEWHERE = Route(RoutePath.OTHER_DEVICES)
NOTHING = Route(RoutePath.NONE)
SAID = TILE.describe()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("routes", "driver", "expected"),
    [
        # Every kernel through Tile IR the driver is known to compile.
        ((TILE,), V134, f"runs only through Tile IR: {SAID}"),
        ((TILE, ELSEWHERE), V134,
         f"runs only through Tile IR: {SAID}; 1 kernel only for other devices"),
        # Some native, some through Tile IR; some through PTX JIT too.
        ((SASS, TILE), V134, f"partly through Tile IR: {SAID}"),
        ((PTX_OK, TILE), V134, f"partly through Tile IR and PTX JIT: {SAID}"),
        ((SASS, PTX_OK, TILE), V134, f"partly through Tile IR and PTX JIT: {SAID}"),
        # A driver older than the rule; one the rules know nothing of; no driver at all.
        ((TILE,), Version(13, 3), f"Tile IR needs a newer driver: {SAID}"),
        ((TILE,), Version(12, 0), f"Tile IR needs a newer driver: {SAID}"),
        ((TILE,), None, f"{UNKNOWN}: {SAID}"),
        ((TILE_NEW,), V134, f"{UNKNOWN}: {TILE_NEW.describe()}"),
        # One version too new for the driver decides, whatever the others.
        ((TILE, TILE_NEW), Version(13, 0),
         f"Tile IR needs a newer driver: {SAID}; {TILE_NEW.describe()}"),
        ((TILE, TILE_NEW), V134, f"{UNKNOWN}: {SAID}; {TILE_NEW.describe()}"),
        # Tile IR compiles but a PTX kernel's ISA is past the driver: the PTX is what fails.
        ((PTX_NEW, TILE), V134, "PTX JIT needs a newer driver"),
        # No Tile IR route: the phrases there were before.
        ((PTX_OK,), V134, "runs only through PTX JIT"),
        ((SASS, PTX_OK), V134, "partly through PTX JIT"),
        ((PTX_NEW,), V134, "PTX JIT needs a newer driver"),
        ((SASS,), None, "native"),
        # A kernel without code is said before Tile IR.
        ((NOTHING, TILE), V134, "no code for 1 of 2 kernels (k0)"),
    ],
)  # fmt: skip
def test_the_tile_ir_phrase(
    routes: tuple[Route, ...], driver: Version | None, expected: str
) -> None:
    assert artifact.phrase(_prediction(*routes, driver=driver)) == expected


@pytest.mark.unit
def test_tile_ir_versions_are_said_oldest_first_and_unknown_last() -> None:
    from gate.reader.entries import DeviceEntry, Kind
    from gate.reader.listing import Listing

    def tile(version: Version | None) -> DeviceEntry:
        return DeviceEntry(Kind.TILEIR, Target.parse("sm_80"), ptx_isa=version)

    listing = Listing((tile(V134), tile(None), tile(Version(13, 1)), tile(V134)))
    assert artifact.tile_versions(listing) == "13.1, 13.4, version unknown"
    report = ArtifactReport("x.fatbin", "fatbin", listing=listing, names=False)
    assert artifact.targets_text(report) == "Tile IR 13.1, 13.4, version unknown"
    # Without names, the route the listing's Tile IR gives stands for every kernel.
    assert artifact.routes(report, H100) == (
        Route(RoutePath.TILE_IR, None, Version(13, 1), Version(13, 1)),
    )
    assert artifact.predict(report, H100).kernels == (
        KernelPrediction(artifact.ALL_KERNELS, artifact.routes(report, H100)[0]),
    )


@pytest.mark.unit
def test_a_file_of_unknown_kinds_only_is_said_so_not_lto_ir() -> None:
    from gate.reader.entries import DeviceEntry, Kind
    from gate.reader.listing import Listing

    unknown = Listing((DeviceEntry(Kind.UNKNOWN, Target.parse("sm_80")),))
    report = ArtifactReport("x.fatbin", "fatbin", listing=unknown, names=False)
    assert artifact.routes(report, H100) == ()
    assert artifact.predict(report, H100).kernels == ()
    why = artifact.unmet(report, H100)
    assert why == (
        "x.fatbin: only entries of a kind this version of cuda-gate does not understand: "
        "nothing in it runs on 9.0"
    )
    lto = Listing((DeviceEntry(Kind.LTOIR, Target.parse("sm_90")),))
    report = ArtifactReport("y.fatbin", "fatbin", listing=lto, names=False)
    assert "LTO IR only (lto_90)" in (artifact.unmet(report, H100) or "")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("routes", "driver", "expected"),
    [
        # Tile IR the driver compiles answers where nothing better runs.
        ((TILE,), V134, TILE),
        ((TILE, ELSEWHERE), V134, TILE),
        # SASS and PTX that run come before it.
        ((TILE, SASS), V134, SASS),
        ((TILE, PTX_OK), V134, PTX_OK),
        # Of two Tile IR routes that run, the oldest bytecode (it needs the oldest driver).
        ((TILE, Route(RoutePath.TILE_IR, None, Version(13, 1), Version(13, 1))), V134,
         Route(RoutePath.TILE_IR, None, Version(13, 1), Version(13, 1))),
        # Unknown support is not usable: the worst expected route answers.
        ((TILE,), None, TILE),
        ((TILE, NOTHING), None, NOTHING),
        ((TILE, ELSEWHERE), None, TILE),
    ],
)  # fmt: skip
def test_the_route_that_answers_with_tile_ir(
    routes: tuple[Route, ...], driver: Version | None, expected: Route
) -> None:
    from gate.rules.environment import answer

    assert answer(routes, H100, strict=False, driver=driver) == expected
