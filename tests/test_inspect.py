"""`cuda-gate inspect` on the golden binaries: routes per device, JSON schema, bad input."""

from __future__ import annotations

import json
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.cli import main
from gate.errors import ExitCode

GOLDEN = Path(__file__).parent / "golden"

pytestmark = pytest.mark.unit


def _schema() -> dict[str, Any]:
    text = resources.files("gate").joinpath("schemas/inspect.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _inspect_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["inspect", "--json", *args])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, _schema())
    return code, doc


def _routes(art: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    return {
        d["capability"]: (d["verdict"], [r["route"] for r in d["routes"]]) for d in art["devices"]
    }


def test_routes_per_device_with_kernel_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _inspect_json(
        capsys, str(GOLDEN / "libkernels.so"), "--names",
        "--device", "12.1", "--device", "9.0", "--device", "8.6", "--device", "sm_80",
    )  # fmt: skip
    assert code == 0
    (art,) = doc["artifacts"]
    assert art["targets"] == {"sass": ["sm_80", "sm_120"], "ptx": ["compute_80"], "lto": []}
    assert art["kernels"] == 3
    assert art["missing_kernels"] == {}
    assert _routes(art) == {
        "12.1": ("native", ["compatible SASS (sm_120)"]),
        "9.0": ("runs only through PTX JIT", ["PTX JIT (compute_80, ISA 9.0, driver >= 13.0)"]),
        "8.6": ("native", ["compatible SASS (sm_80)"]),
        "8.0": ("native", ["exact SASS (sm_80)"]),
    }
    assert doc["devices"] == ["12.1", "9.0", "8.6", "8.0"]


def test_a_and_f_targets_route_only_where_they_run(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = _inspect_json(
        capsys, str(GOLDEN / "multi.o"), "--device", "12.1", "--device", "10.3", "--device", "10.0"
    )
    (art,) = doc["artifacts"]
    assert art["targets"]["sass"] == ["sm_90", "sm_120f", "sm_100a"]
    routes = _routes(art)
    assert routes["12.1"][1] == ["family SASS (sm_120f)"]
    assert routes["10.0"][1] == ["exact SASS (sm_100a)"]
    # sm_100a runs only on 10.0; compute_100a JITs only there too: 10.3 falls back to compute_90.
    assert routes["10.3"][1] == ["PTX JIT (compute_90, ISA 9.0, driver >= 13.0)"]
    assert not art["devices"][0]["per_kernel"]


def test_an_arch_specific_build_has_nothing_for_a_newer_major(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # sm_90a, no PTX: its kernels are built for 9.0 only, so not expected on 10.0 at all.
    _, doc = _inspect_json(capsys, str(GOLDEN / "sm_90a.cubin"), "--names", "--device", "10.0")
    (art,) = doc["artifacts"]
    verdict = "nothing built for this device (3 kernels only for others)"
    assert _routes(art) == {"10.0": (verdict, ["only for other devices"])}
    assert art["devices"][0]["routes"][0]["kernel_names"] == [
        "_Z11write_valuePi", "_Z5twicePi", "_Z7add_onePi",
    ]  # fmt: skip


def test_wheel_and_bad_artifacts_exit_non_zero_after_reading_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = tmp_path / "demo-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(GOLDEN / "libkernels.so", "demo/lib/libkernels.so")
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF" + b"\xff" * 10)
    code, doc = _inspect_json(capsys, str(junk), str(wheel), "--device", "12.0")
    assert code == ExitCode.BAD_INPUT
    assert [a["path"] for a in doc["artifacts"]] == [str(junk), f"{wheel}!demo/lib/libkernels.so"]
    assert len(doc["errors"]) == 1
    assert doc["errors"][0].startswith(str(junk))
    assert _routes(doc["artifacts"][1])["12.0"] == ("native", ["exact SASS (sm_120)"])


def test_console_table_and_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.fatbin"
    bad.write_bytes((GOLDEN / "debug.fatbin").read_bytes()[:100])
    code = main(["inspect", str(GOLDEN / "multi.o"), str(bad), "--names", "--device", "9.0"])
    out, err = capsys.readouterr()
    assert code == ExitCode.BAD_INPUT
    assert "sm_120f" in out
    assert "device 9.0: native: 3 kernels from exact SASS (sm_90)\n" in out
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"cuda-gate: error: {bad}: ")
    assert lines[-1] == f"cuda-gate: error: 1 of 2 artifacts could not be read: {bad}"
    assert "Traceback" not in err


def test_output_file_is_written_atomically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "inspect.json"
    code = main(["inspect", str(GOLDEN / "debug.fatbin"), "--no-detect", "--output", str(target)])
    assert code == 0
    doc = json.loads(target.read_text())
    jsonschema.validate(doc, _schema())
    assert doc["devices"] == []
    assert [p.name for p in tmp_path.iterdir()] == ["inspect.json"]
    assert "debug.fatbin" in capsys.readouterr().out


def _one_kernel_report(*, names: bool) -> Any:
    from gate.reader.listing import DeviceEntry, Kind, Listing
    from gate.reader.read import ArtifactReport
    from gate.rules.targets import Target

    kernels = ("_Z3onePi",) if names else ()
    listing = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), kernels),
            DeviceEntry(Kind.SASS, Target.parse("sm_80"), ()),
        )
    )
    return ArtifactReport("one.so", "ELF", 64, "x86-64", listing, names)


def test_counts_agree_with_their_nouns() -> None:
    from gate.render.inspect import artifact_json, console
    from gate.rules.targets import Capability

    text = console(artifact_json(_one_kernel_report(names=True), [Capability(9, 0)]))
    assert ", 1 kernel\n" in text
    assert "device 9.0: native: 1 kernel from exact SASS (sm_90)\n" in text
    assert "1 kernels" not in text
    text = console(artifact_json(_one_kernel_report(names=True), [Capability(10, 0)]))
    assert "device 10.0: no code for its 1 kernel\n" in text  # said once, no "nothing:"


def test_without_names_no_per_kernel_count_is_invented(capsys: pytest.CaptureFixture[str]) -> None:
    # sm_90a.cubin has 3 kernels, built for 9.0 only; headers alone cannot count them.
    code = main(["inspect", str(GOLDEN / "sm_90a.cubin"), "--device", "10.0"])
    out = capsys.readouterr().out
    assert code == 0
    verdict = "nothing built for this device (only a/f builds for other devices)"
    assert f"device 10.0: {verdict}\n" in out  # not again as "only for other devices"
    # What a route stands for is said once per artifact, not on every device line.
    assert out.count("routes per target, each standing for every kernel (--names: per kernel)") == 1
    assert " of 1 kernel" not in out
    _, doc = _inspect_json(capsys, str(GOLDEN / "sm_90a.cubin"), "--device", "10.0")
    (device,) = doc["artifacts"][0]["devices"]
    assert (device["verdict"], device["per_kernel"]) == (verdict, False)
    assert device["routes"][0]["kernels"] is None
    assert device["routes"][0]["path"] == "only for other devices"


def test_missing_kernels_are_shown_demangled_and_kept_mangled_in_json() -> None:
    from gate.reader.listing import DeviceEntry, Kind, Listing
    from gate.reader.read import ArtifactReport
    from gate.render.inspect import artifact_json, console
    from gate.rules.targets import Target

    listing = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), ("_Z1av", "_Z1bv")),
            DeviceEntry(Kind.SASS, Target.parse("sm_120"), ("_Z1av",)),
        )
    )
    art = artifact_json(ArtifactReport("two.so", "ELF", listing=listing), [])
    assert art["missing_kernels"] == {"sm_120": ["_Z1bv"]}
    assert "sm_120 lacks 1 kernel: b()" in console(art)
    # The names are the caller's to give (a list in, each name out).
    text = console(art, names=lambda ks: {k: k.upper() for k in ks})
    assert "sm_120 lacks 1 kernel: _Z1BV" in text


# scale(float*, int), scale(double*, int); f(char*, char*) spelt two ways (S_ and again).
SCALE_F, SCALE_D, F_SUB, F_OUT = "_Z5scalePfi", "_Z5scalePdi", "_Z1fPcS_", "_Z1fPcPc"


def _listing_lacking(*kernels: str) -> str:
    from gate.reader.listing import DeviceEntry, Kind, Listing
    from gate.reader.read import ArtifactReport
    from gate.render.inspect import artifact_json, console
    from gate.rules.targets import Target

    listing = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), ("_Z4keepv", *kernels)),
            DeviceEntry(Kind.SASS, Target.parse("sm_120"), ("_Z4keepv",)),
        )
    )
    return console(artifact_json(ArtifactReport("o.so", "ELF", listing=listing), []))


def test_an_overload_pair_in_an_inspect_listing_reads_apart_by_its_c_plus_plus_names() -> None:
    # Demangled, the overloads already read apart: no symbol is added.
    assert "sm_120 lacks 2 kernels: scale(double*, int); scale(float*, int)\n" in (
        _listing_lacking(SCALE_F, SCALE_D)
    )
    # Two symbols of one C++ name read alike: each gets its symbol, in brackets.
    assert (
        f"sm_120 lacks 2 kernels: f(char*, char*) [{F_OUT}]; f(char*, char*) [{F_SUB}]\n"
    ) in _listing_lacking(F_SUB, F_OUT)


def test_without_a_demangler_an_overload_pair_in_an_inspect_listing_gets_its_symbols(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gate.rules import kernels

    monkeypatch.setattr(kernels, "demangle", lambda name: name)  # as without libstdc++
    assert (f"sm_120 lacks 2 kernels: scale [{SCALE_D}]; scale [{SCALE_F}]\n") in _listing_lacking(
        SCALE_F, SCALE_D
    )


def test_a_long_name_is_cut_before_the_symbol_that_tells_it_apart() -> None:
    from gate.render.inspect import _short

    alike = "n" * 70 + "(char*, char*)"
    cut = _short(f"{alike} [{F_SUB}]")
    assert cut == f"{'n' * 57}... [{F_SUB}]"
    assert _short("m" * 70) == "m" * 57 + "..."
    assert _short("short [x]") == "short [x]"


@pytest.mark.parametrize(
    ("args", "code", "reason"),
    [
        (["--require-device", "9.0"], 0, None),
        (["--require-device", "10.0"], 1, "nothing in it runs on 10.0: nothing built for this"),
        (["--require-device", "10.0", "--names"], 1, "(3 kernels only for others)"),
        (["--require-device", "9.0", "--require-device", "sm_121", "--names"], 1, "on 12.1"),
    ],
)
def test_require_device_fails_with_one_line_per_artifact(
    capsys: pytest.CaptureFixture[str], args: list[str], code: int, reason: str | None
) -> None:
    cubin = str(GOLDEN / "sm_90a.cubin")
    result = main(["inspect", "--no-detect", cubin, str(GOLDEN / "libkernels.so"), *args])
    captured = capsys.readouterr()
    assert result == code
    lines = captured.err.strip().splitlines()
    if reason is None:
        assert lines == []
        return
    assert result == ExitCode.NOT_ACCEPTED
    (line, summary) = lines
    assert line.startswith(f"cuda-gate: error: {cubin}: ")
    assert reason in line
    assert summary.startswith("cuda-gate: error: 1 artifact/device pair without code")
    assert "device " in captured.out  # the required device is shown like --device
