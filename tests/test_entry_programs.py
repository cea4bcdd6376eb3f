"""An entry point whose program is not there fails before execute (gate.stages.programs)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gate.config import EntryPoint
from gate.rules.causes import Cause
from gate.rules.verdict import CheckState
from gate.stages.programs import missing_program, program_checks

pytestmark = pytest.mark.unit


def program(path: Path, *, executable: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(stat.S_IRWXU if executable else stat.S_IRUSR | stat.S_IWUSR)
    return path


def entry(tmp_path: Path, *argv: str, env: tuple[tuple[str, str], ...] = ()) -> EntryPoint:
    return EntryPoint("ap", argv, cwd=str(tmp_path), env=env)


def test_a_program_the_build_wrote_is_there(tmp_path: Path) -> None:
    program(tmp_path / "build" / "ap")
    assert missing_program(entry(tmp_path, "build/ap", "--n", "3"), {}) is None
    assert missing_program(entry(tmp_path, str(tmp_path / "build" / "ap")), {}) is None


@pytest.mark.parametrize(
    ("files", "argv", "said"),
    [
        ((), ("build/ap",), "build/ap does not exist in {cwd}"),
        (("out/ap",), ("build/ap",), "build/ap does not exist in {cwd}; nearest: out/ap"),
        (("build/app",), ("build/ap",), "build/ap does not exist in {cwd}; nearest: build/app"),
        (("build/ap/x",), ("build/ap",), "build/ap is a folder, not a program"),
        ((), ("",), "its command is empty"),
        ((), ("no-such-program-here",), "no-such-program-here is not on PATH"),
    ],
)
def test_why_a_program_cannot_run(
    tmp_path: Path, files: tuple[str, ...], argv: tuple[str, ...], said: str
) -> None:
    for name in files:
        program(tmp_path / name)
    assert missing_program(entry(tmp_path, *argv), {"PATH": str(tmp_path / "bin")}) == (
        said.format(cwd=tmp_path)
    )


def test_a_file_that_cannot_be_executed_is_said(tmp_path: Path) -> None:
    program(tmp_path / "build" / "ap", executable=False)
    if os.access(tmp_path / "build" / "ap", os.X_OK):  # root may execute any file
        pytest.skip("this user may execute any file (root)")
    assert missing_program(entry(tmp_path, "build/ap"), {}) == "build/ap is not executable"


def test_a_bare_name_is_looked_for_on_the_entry_points_own_path(tmp_path: Path) -> None:
    program(tmp_path / "bin" / "tool")
    here = {"PATH": str(tmp_path / "elsewhere")}
    assert missing_program(entry(tmp_path, "tool"), here) == "tool is not on PATH"
    own = (("PATH", str(tmp_path / "bin")),)
    assert missing_program(entry(tmp_path, "tool", env=own), here) is None
    assert missing_program(entry(tmp_path, "tool"), {"PATH": str(tmp_path / "bin")}) is None


def test_only_the_runnable_entry_points_go_on(tmp_path: Path) -> None:
    program(tmp_path / "build" / "ok")
    good = EntryPoint("good", ("build/ok",), cwd=str(tmp_path))
    bad = EntryPoint("bad", ("build/gone",), cwd=str(tmp_path))
    checks, runnable = program_checks([good, bad], {})
    assert runnable == (good,)
    [check] = checks
    assert (check.name, check.classname, check.state) == (
        "bad: program",
        "gate.execute",
        CheckState.FAILED,
    )
    assert check.message == (
        f"build/gone does not exist in {tmp_path}; nearest: build/: not run on either path"
    )
    assert check.cause is Cause.EXIT_STATUS
    assert check.remedy == (
        "entry point bad: check that a build step writes build/gone, or fix its command"
    )
