"""Environments read by distribution: RECORD ownership, runtime-selected builds, verdicts.

Real nvcc-built golden binaries (tests/golden) laid out as installed distributions and
wheels in temporary folders; `inspect` run in process.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.audit.artifact import unmet
from gate.audit.verdicts import judge_all
from gate.cli import main
from gate.errors import ExitCode
from gate.reader.distributions import Owner, is_environment
from gate.reader.locks import read_lock, target
from gate.rules.targets import Capability, Version
from gate.scan.audit import audit_root

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
# What each golden file carries (tests/golden/make_golden.sh):
SM120 = GOLDEN / "libkernels.so"  # sm_80, sm_120 SASS, compute_80 PTX
SM90_PTX = GOLDEN / "debug.fatbin"  # sm_90 SASS, compute_90 PTX
SM90A = GOLDEN / "sm_90a.cubin"  # sm_90a only
HOST_ONLY = Path(shutil.which("true") or "/bin/true")  # an ELF file with no device code


def test_pinned_requirements() -> None:
    text = (
        "# lock\nbitsandbytes==0.50.2 \\\n  --hash=sha256:ab\n"
        "foo[x]===1.0 ; python_version>'3'\nbar>=2\n"
    )
    lock = read_lock(text, "lock", target("x86_64-unknown-linux-gnu", "3.12"))
    assert [(p.text, p.hashes) for p in lock.pins] == [
        ("bitsandbytes==0.50.2", ("sha256:ab",)),
        ("foo===1.0", ()),
    ]


def _install(site: Path, name: str, version: str, files: dict[str, Path]) -> None:
    """A distribution as pip installs it: files, METADATA and a RECORD naming them."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    rows = []
    for rel, source in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, site / rel)
        rows.append(f"{rel},sha256=x,1")
    rows.append(f"{info.name}/METADATA,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


@pytest.fixture(autouse=True)
def _console_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines of names end at the console's width: the one a log gets, whatever the
    caller's terminal."""
    monkeypatch.setenv("COLUMNS", "100")


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    root = tmp_path / "venv"
    site = root / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    _install(site, "fastlib", "1.0", {"fastlib/libk.so": SM120, "fastlib/libk2.so": SM120})
    _install(
        site,
        "quant",
        "2.0",
        {
            "quant/libquant_cuda118.so": SM90_PTX,
            "quant/libquant_cuda128.so": SM120,
            "quant/libquant_cpu.so": HOST_ONLY,
        },
    )
    _install(site, "hopper", "3.0", {"hopper/libh.so": SM90A, "hopper/libk.so": SM120})
    _install(site, "puresrc", "0.1", {})
    (site / "stray").mkdir()
    shutil.copyfile(SM90_PTX, site / "stray" / "k.fatbin")
    return root


def _verdicts(root: Path, *caps: str, runtime: Version | None = None) -> dict[str, list[str]]:
    audit = audit_root(root)
    found = judge_all(audit.groups, [Capability.parse(c) for c in caps], runtime=runtime)
    return {
        v.group.distribution.name: [
            f"{d.category.value}{'' if d.passes else '!'}" for d in v.devices
        ]
        for v in found
    }


def test_files_are_grouped_by_the_distribution_whose_record_lists_them(venv: Path) -> None:
    assert is_environment(venv)
    assert is_environment(venv / "lib" / "python3.12" / "site-packages")
    audit = audit_root(venv)
    groups = {g.distribution.name: g for g in audit.groups}
    assert groups["fastlib"].distribution.version == "1.0"
    assert groups["fastlib"].members == ("fastlib/libk.so", "fastlib/libk2.so")
    assert groups["puresrc"].reports == ()
    stray = groups["lib/python3.12/site-packages/stray/"]
    assert stray.distribution.owner is Owner.FOLDER
    assert stray.members == ("lib/python3.12/site-packages/stray/k.fatbin",)


@pytest.mark.parametrize(
    ("caps", "runtime", "expected"),
    [
        (
            ("12.1", "9.0"),
            None,
            {
                "fastlib": ["compatible SASS", "PTX JIT"],
                # the best build: cuda128 on 12.1, cuda118 (sm_90) on 9.0
                "quant": ["compatible SASS", "native"],
                # a library built only for Hopper makes the answer mixed, and fails 12.1
                "hopper": ["mixed!", "mixed"],
                "puresrc": ["no device code", "no device code"],
                "lib/python3.12/site-packages/stray/": ["PTX JIT", "native"],
            },
        ),
        (("12.1",), Version(11, 8), {"quant": ["PTX JIT"]}),
        (("12.1",), Version(12, 4), {"quant": ["nothing!"]}),  # it ships no build for 12.4
        (("7.5",), None, {"fastlib": ["nothing!"], "quant": ["nothing!"]}),
    ],
)
def test_each_distribution_gets_one_answer_per_device(
    venv: Path, caps: tuple[str, ...], runtime: Version | None, expected: dict[str, list[str]]
) -> None:
    found = _verdicts(venv, *caps, runtime=runtime)
    assert {k: found[k] for k in expected} == expected


def _schema() -> dict[str, Any]:
    text = resources.files("gate").joinpath("schemas/environment.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def test_inspect_prints_one_line_per_distribution_and_a_summary(
    venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", "--no-detect", "--device", "12.1", str(venv)]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out if line.split() and line.split()[0] in
            ("fastlib", "quant", "hopper")}  # fmt: skip
    # Read without kernel names, each distribution's line says it was judged by targets.
    by_target = "; by target only (--names: per kernel)"
    assert rows["fastlib"].endswith("12.1    compatible SASS (sm_120)" + by_target)
    assert rows["quant"].endswith("compatible SASS (sm_120) with CUDA runtime 12.8" + by_target)
    # A mixed answer says its bottom line first, then the libraries behind each route.
    assert rows["hopper"].endswith(
        "12.1    partly: 1 of 2 libraries by compatible SASS (sm_120); 1 only for other devices"
        + by_target
    )
    assert "    12.1 only for other devices: 1 file: hopper/libh.so" in out
    assert any(line.startswith("no device code (") and "puresrc 0.1" in line for line in out)
    assert "alternatives loaded by CUDA runtime" in "\n".join(out)
    header = next(i for i, line in enumerate(out) if line.startswith("summary"))
    assert out[header + 1].split()[0] == "12.1"


def test_require_device_fails_exactly_the_distributions_that_cannot_run(
    venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["inspect", "--no-detect", "--require-device", "12.1", str(venv)])
    err = capsys.readouterr().err.splitlines()
    assert code == ExitCode.NOT_ACCEPTED
    failed = [line.split(": ")[2].split()[0] for line in err if "does not run on" in line]
    assert failed == ["hopper"]
    code = main(["inspect", "--no-detect", "--require-device", "12.1", "--cuda-runtime", "12.4",
                 str(venv)])  # fmt: skip
    captured = capsys.readouterr()
    assert "quant 2.0: does not run on 12.1" in captured.err
    assert (
        "      12.1 (CUDA runtime 12.4 loads no build): compatible SASS (sm_120): cuda128; "
        "PTX JIT (compute_90, ISA 9.0, driver >= 13.0): cuda118; no device code: cpu\n"
    ) in captured.out
    assert main(["inspect", "--no-detect", "--device", "12.1", "--cuda-runtime", "11.8",
                 str(venv)]) == 0  # fmt: skip
    rows = capsys.readouterr().out.splitlines()
    assert any(r.startswith("quant ") and "with CUDA runtime 11.8; by target" in r for r in rows)
    assert any(r.startswith("      12.1 (CUDA runtime 11.8 loads cuda118): ") for r in rows)


def test_a_failure_judged_by_targets_alone_says_so(
    venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hopper/libh.so (sm_90a only) fails 12.1 either way; read without kernel names its
    # failure line says it was judged by targets, with names it does not.
    hint = "(judged by targets: --names tells cubins without kernels apart)"
    assert main(["inspect", "--no-detect", "--require-device", "12.1", str(venv)]) == 1
    headers = [line for line in capsys.readouterr().err.splitlines() if "hopper 3.0" in line]
    expected = "cuda-gate: error: hopper 3.0: does not run on 12.1: nothing runs there in"
    assert headers == [f"{expected} hopper/libh.so {hint}"]
    assert main(["inspect", "--no-detect", "--no-cache", "--names", "--require-device", "12.1",
                 str(venv)]) == 1  # fmt: skip
    named = [line for line in capsys.readouterr().err.splitlines() if "hopper 3.0" in line]
    assert named == [
        "cuda-gate: error: hopper 3.0: does not run on 12.1: nothing runs there in hopper/libh.so"
    ]


def test_json_keeps_the_grouping_and_validates(
    venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", "--no-detect", "--json", "--device", "12.1", str(venv)]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, _schema())
    by = {d["name"]: d for d in doc["distributions"]}
    assert by["fastlib"]["groups"] == [
        {
            "count": 2,
            "targets": "SASS sm_80..sm_120 (2), PTX compute_80",
            "routes": ["compatible SASS (sm_120)"],
            "members": ["fastlib/libk.so", "fastlib/libk2.so"],
        }
    ]
    (s,) = by["quant"]["variant_sets"]
    assert [b["label"] for b in s["builds"]] == ["cuda118", "cuda128", "cpu"]
    assert doc["summary"]["12.1"]["compatible SASS"] == 2


def test_json_says_why_each_failing_file_fails_in_the_rule_s_words(
    venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The reasons are worded only when shown (a text report prints none of them): the
    # document still carries each one, as the require-device rule words it for that file.
    assert main(["inspect", "--no-detect", "--json", "--device", "12.1", "--device", "9.0",
                 str(venv)]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    parts = {
        (d["name"], dev["capability"], p["name"]): p
        for d in doc["distributions"]
        for dev in d["devices"]
        for p in dev["parts"]
    }
    libh = next(r for r in audit_root(venv).groups if r.distribution.name == "hopper")
    report = dict(zip(libh.members, libh.reports, strict=True))["hopper/libh.so"]
    failing = parts["hopper", "12.1", "hopper/libh.so"]
    assert failing["passes"] is False
    assert failing["reason"] == unmet(report, Capability(12, 1))
    assert failing["reason"].endswith(
        "hopper/libh.so: nothing in it runs on 12.1: nothing built for this device "
        "(only a/f builds for other devices)"
    )
    assert parts["hopper", "9.0", "hopper/libh.so"]["reason"] is None
    assert parts["hopper", "9.0", "hopper/libh.so"]["passes"] is True


def test_a_folder_of_wheels_and_a_lock_are_read_by_distribution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, version, lib in (("fast", "1.0", SM120), ("old", "0.9", SM90A)):
        with zipfile.ZipFile(tmp_path / f"{name}-{version}-py3-none-any.whl", "w") as z:
            z.write(lib, f"{name}/lib{name}.so")
            z.writestr(
                f"{name}-{version}.dist-info/METADATA", f"Name: {name}\nVersion: {version}\n"
            )
    (tmp_path / "requirements.txt").write_text("fast==1.0\nmissing==2.0\n")
    assert main(["inspect", "--no-detect", "--require-device", "12.1", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "old 0.9: does not run on 12.1" in captured.err
    assert "fast 1.0" not in captured.err
    code = main(["inspect", "--no-detect", "--device", "12.1", str(tmp_path / "requirements.txt")])
    captured = capsys.readouterr()
    assert code == ExitCode.BAD_INPUT
    assert "missing==2.0: no wheel for it" in captured.err
    assert "fast " in captured.out
    assert "old " not in captured.out


def test_identical_artifacts_collapse_into_one_line_with_a_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = tmp_path / "cubins-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for i in range(40):
            z.write(SM90A, f"cubins/k{i:02}.cubin")
        z.write(SM120, "cubins/libk.so")
        z.writestr("cubins-1.0.dist-info/METADATA", "Name: cubins\nVersion: 1.0\n")
    args = ["inspect", "--no-detect", "--by-distribution", "--device", "12.1", str(wheel)]
    assert main(args) == 0
    short = capsys.readouterr().out.splitlines()
    # Names end at the console's width (100 without a terminal), never one cut.
    others = (
        "    12.1 only for other devices: 40 files: "
        "cubins/k00.cubin, cubins/k01.cubin, ... and 38 more"
    )
    assert short[2:5] == [
        (
            "cubins        1.0      12.1    partly: 1 of 41 libraries by compatible SASS (sm_120); "
            "40 only for other devices; by target only (--names: per kernel)"
        ),
        "    12.1 compatible SASS (sm_120): 1 file: cubins/libk.so",
        others,
    ]
    assert len(short) == 7  # a title, the table's head, 3 lines, the summary's 2
    assert main([*args, "--verbose"]) == 0
    long = capsys.readouterr().out.splitlines()
    every = ", ".join(f"cubins/k{i:02}.cubin" for i in range(40))
    assert f"    40 files [SASS sm_90a] 12.1: only for other devices: {every}" in long
    assert (
        "    1 file [SASS sm_80..sm_120 (2), PTX compute_80] 12.1: compatible SASS (sm_120): "
        "cubins/libk.so"
    ) in long


def test_unreadable_files_are_one_line_each_and_the_rest_is_judged(
    venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = venv / "lib" / "python3.12" / "site-packages"
    (site / "fastlib" / "libk2.so").write_bytes(SM120.read_bytes()[:20000])
    code = main(["inspect", "--no-detect", "--device", "12.1", str(venv)])
    captured = capsys.readouterr()
    assert code == ExitCode.BAD_INPUT
    errors = captured.err.splitlines()
    assert errors[0].startswith(f"cuda-gate: error: {site}/fastlib/libk2.so: ")
    assert errors[-1] == "cuda-gate: error: 1 error(s) reading the environment"
    assert "Traceback" not in captured.err
    assert any(line.startswith("quant ") for line in captured.out.splitlines())


def test_bad_arguments_are_refused_in_one_line(
    venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["inspect", "--no-detect", "--cuda-runtime", "twelve", str(venv)])
    assert raised.value.code == ExitCode.USAGE
    assert "--cuda-runtime" in capsys.readouterr().err
    assert main(["inspect", "--no-detect", "--by-distribution", "/nonexistent/env"]) == (
        ExitCode.BAD_INPUT
    )
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == (
        "cuda-gate: error: /nonexistent/env: no such file or folder"
    )
    assert captured.out == ""  # no empty table
