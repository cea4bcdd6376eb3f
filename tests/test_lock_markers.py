"""Requirement locks read as pip reads them (issue 45, items 1 and 2).

Markers evaluated for the environment audited (``--python-platform``,
``--python-version``; default this machine), pins matched by ``Version`` equality, the
lock's ``--hash`` options checked against the wheel on disk, and a chosen wheel whose
tags do not install there warned about. The integration tests use a universal lock made
by ``uv pip compile --universal --generate-hashes`` at test time and real wheels from
PyPI (six 1.17.0, MarkupSafe 3.0.2 for x86-64), cached as tests/pypi_wheels.py does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from gate import proc
from gate.cli import main
from gate.errors import ExitCode, ToolError
from gate.reader.locks import logical_lines, read_lock, target
from tests.pypi_wheels import ROOT, Wheel, fetch, folder

SIX = Wheel("six==1.17.0", "six-1.17.0-py2.py3-none-any.whl")
SIX_SHA256 = "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"
MARKUPSAFE = Wheel("markupsafe==3.0.2", "MarkupSafe-3.0.2-cp312-cp312-manylinux_2_17_x86_64*.whl")
AARCH64 = ["--python-platform", "aarch64-unknown-linux-gnu", "--python-version", "3.12"]
X86_64 = target("x86_64-unknown-linux-gnu", "3.12")

# The issue's lock: what a universal lock for Python 2 and 3, x86-64 and aarch64 says.
UNIVERSAL = """\
six==1.16.0 ; python_version < '3'
six==1.17.0 ; python_version >= '3'
six==1.17.0 ; platform_machine == 'x86_64'
six==1.17.0 ; platform_machine == 'aarch64'
"""


def _unavailable(why: str) -> None:
    """Skip with the reason; under CI a missing input is a failure, not a skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def _wheel(wheel: Wheel) -> Path:
    try:
        return fetch(wheel, folder())
    except ToolError as e:
        _unavailable(f"cannot download {wheel.requirement}: {e.one_line()}")
        raise


def _uv() -> str:
    """uv from the test environment (the test extra installs it), else PATH."""
    here = Path(sys.executable).parent / "uv"
    found = str(here) if here.is_file() else shutil.which("uv")
    if found is None:
        _unavailable("uv is not installed (pip install uv, or the test extra)")
        raise AssertionError
    return found


def _compile(folder: Path, requirements: str) -> Path:
    """A universal lock with hashes, written by ``uv pip compile`` (PyPI reached once;
    uv's cache under .work, never HOME)."""
    (folder / "requirements.in").write_text(requirements)
    lock = folder / "requirements.txt"
    cache = ROOT / ".work" / "uv-cache"
    try:
        proc.run_checked(
            [_uv(), "pip", "compile", "--universal", "--generate-hashes", "--python-version",
             "3.11", "--quiet", "--cache-dir", str(cache), "requirements.in", "-o", lock.name],
            what="uv pip compile", timeout=300, cwd=folder,
        )  # fmt: skip
    except ToolError as e:
        _unavailable(f"uv pip compile failed (PyPI unreachable?): {e.one_line()}")
    return lock


# Unit tier: the lock's text and the target alone.


@pytest.mark.unit
def test_markers_are_evaluated_for_the_target_and_a_pin_is_counted_once() -> None:
    for machine in ("x86_64", "aarch64"):
        lock = read_lock(UNIVERSAL, "lock", target(f"{machine}-unknown-linux-gnu", "3.12"))
        assert [p.text for p in lock.pins] == ["six==1.17.0"]
        assert lock.skipped == 2  # python 2, the other machine
        assert lock.errors == ()


@pytest.mark.unit
def test_continuations_comments_and_hashes_as_pip_compile_writes_them() -> None:
    text = (
        "# header\n--index-url https://example.invalid/simple\n"
        "Six==1.17 \\\n    --hash=sha256:AB \\\n    --hash=sha256:cd\n    # via -r x.in\n"
        "bar>=2\nbaz[extra]===2.0  # pinned\n"
    )
    assert logical_lines(text)[1] == (3, "Six==1.17      --hash=sha256:AB      --hash=sha256:cd")
    lock = read_lock(text, "lock", X86_64)
    assert [(p.name, p.version, p.line, p.hashes) for p in lock.pins] == [
        ("Six", Version("1.17.0"), 3, ("sha256:ab", "sha256:cd")),
        ("baz", Version("2.0"), 8, ()),
    ]


@pytest.mark.unit
def test_a_line_that_is_no_requirement_is_an_error_naming_it() -> None:
    lock = read_lock("six==1.0 ; python_version >>> '3'\n", "req.txt", X86_64)
    assert lock.errors == (
        "req.txt:1: not a requirement pip reads: six==1.0 ; python_version >>> '3'",
    )


@pytest.mark.unit
def test_the_target_is_named_as_uv_and_pip_name_it() -> None:
    spark = target("aarch64-unknown-linux-gnu", "3.12")
    assert spark.markers()["platform_machine"] == "aarch64"
    assert spark.markers()["python_full_version"] == "3.12.0"
    assert spark.describe() == (
        "linux aarch64, Python 3.12 (--python-platform aarch64-unknown-linux-gnu "
        "--python-version 3.12)"
    )
    assert target("windows", None).markers()["platform_machine"] == "AMD64"
    assert target(None, None).describe().endswith("(this machine)")
    for bad in (("linux/arm64", None), (None, "3"), (None, "2.7"), (None, "three")):
        with pytest.raises(ValueError, match="--python-"):
            target(*bad)


@pytest.mark.unit
def test_wheel_tags_are_checked_against_the_target() -> None:
    def tags(name: str) -> frozenset[object]:
        return frozenset(parse_wheel_filename(name)[3])

    x86 = tags("m-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    spark = target("aarch64-unknown-linux-gnu", "3.12")
    assert not spark.installs(x86)  # type: ignore[arg-type]
    assert X86_64.installs(x86)  # type: ignore[arg-type]
    assert not target("x86_64-manylinux_2_12", "3.12").installs(x86)  # type: ignore[arg-type]
    assert not target("x86_64-unknown-linux-gnu", "3.11").installs(x86)  # type: ignore[arg-type]
    assert spark.installs(tags("six-1.17.0-py2.py3-none-any.whl"))  # type: ignore[arg-type]


# Integration tier: real wheels, a lock made by uv, inspect run in process.


@pytest.mark.integration
def test_the_issues_lock_exits_0_and_lists_six_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(_wheel(SIX), tmp_path)
    lock = tmp_path / "requirements.txt"
    lock.write_text(UNIVERSAL)
    assert main(["inspect", "--no-detect", str(lock)]) == 0
    out = capsys.readouterr().out
    assert out.count("six 1.17.0") == 1
    assert "markers evaluated for linux" in out
    assert "(this machine); 2 requirement(s) for other environments left out" in out
    assert main(["inspect", "--no-detect", *AARCH64, str(lock)]) == 0
    out = capsys.readouterr().out
    assert out.count("six 1.17.0") == 1
    assert "requirements.txt: markers evaluated for linux aarch64, Python 3.12 (" in out


@pytest.mark.integration
def test_a_universal_lock_from_uv_is_read_for_the_audited_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(_wheel(SIX), tmp_path)
    lock = _compile(
        tmp_path,
        "six==1.17.0 ; platform_machine == 'x86_64'\nsix==1.16.0 ; platform_machine != 'x86_64'\n",
    )
    assert f"--hash=sha256:{SIX_SHA256}" in lock.read_text()
    x86 = ["--python-platform", "x86_64-unknown-linux-gnu"]
    assert main(["inspect", "--no-detect", *x86, str(lock)]) == 0
    assert capsys.readouterr().out.count("six 1.17.0") == 1
    # On aarch64 the lock takes six 1.16.0, which is not beside it.
    assert main(["inspect", "--no-detect", *AARCH64, str(lock)]) == ExitCode.BAD_INPUT
    captured = capsys.readouterr()
    assert "markers evaluated for linux aarch64, Python 3.12" in captured.out
    assert "six==1.16.0: no wheel for it in" in captured.err


@pytest.mark.integration
def test_a_wheel_whose_digest_the_lock_does_not_allow_fails_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = _compile(tmp_path, "six==1.17.0\n")
    wheel = tmp_path / SIX.pattern
    wheel.write_bytes(_wheel(SIX).read_bytes() + b"\0")  # the bytes changed since the lock
    changed = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert main(["inspect", "--no-detect", str(lock)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"six==1.17.0: {wheel}: sha256 is {changed}, the lock allows " in err
    assert SIX_SHA256 in err
    wheel.write_bytes(_wheel(SIX).read_bytes())
    assert main(["inspect", "--no-detect", str(lock)]) == 0


@pytest.mark.integration
def test_an_x86_64_wheel_chosen_for_aarch64_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(_wheel(MARKUPSAFE), tmp_path)
    shutil.copy(_wheel(SIX), tmp_path)
    lock = tmp_path / "requirements.txt"
    lock.write_text("MarkupSafe==3.0.2\nsix==1.17  # ==1.17 is 1.17.0\n")
    assert main(["inspect", "--no-detect", *AARCH64, str(lock)]) == 0
    captured = capsys.readouterr()
    assert "six 1.17.0" in captured.out
    assert (
        f"cuda-gate: warning: {lock}: MarkupSafe==3.0.2: "
        "MarkupSafe-3.0.2-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl "
        "(manylinux2014_x86_64, manylinux_2_17_x86_64) does not install on linux aarch64"
    ) in captured.err
    x86 = ["--python-platform", "linux", "--python-version", "3.12"]
    assert main(["inspect", "--no-detect", *x86, str(lock)]) == 0
    assert "warning" not in capsys.readouterr().err
