"""Which interpreter ``{python}`` is: one order, as the README and ``--python``'s help say.

``--python``, then ``$CUDA_GATE_PYTHON``, then the config's ``python``, then the first
``python3`` on PATH outside the gate's own virtual environment (issue 20, item 8).
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gate.errors import ToolError
from gate.system.machine import PYTHON_ENV, find_python

pytestmark = pytest.mark.unit


def _interpreter(folder: Path, name: str = "python3") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def three(tmp_path: Path) -> tuple[str, str, str, Path]:
    cli = _interpreter(tmp_path / "cli")
    env = _interpreter(tmp_path / "env")
    configured = _interpreter(tmp_path / "config")
    on_path = tmp_path / "onpath"
    _interpreter(on_path)
    return str(cli), str(env), str(configured), on_path


def test_the_command_line_wins_over_the_environment_and_the_config(
    three: tuple[str, str, str, Path],
) -> None:
    cli, env, configured, on_path = three
    environ = {PYTHON_ENV: env, "PATH": str(on_path)}
    assert find_python(cli, configured, environ) == cli


def test_the_environment_wins_over_the_config(three: tuple[str, str, str, Path]) -> None:
    _, env, configured, on_path = three
    environ = {PYTHON_ENV: env, "PATH": str(on_path)}
    assert find_python(None, configured, environ) == env


def test_the_config_wins_over_path(three: tuple[str, str, str, Path]) -> None:
    _, _, configured, on_path = three
    assert find_python(None, configured, {"PATH": str(on_path)}) == configured


def test_path_is_the_last_resort(three: tuple[str, str, str, Path]) -> None:
    *_, on_path = three
    assert find_python(None, None, {"PATH": str(on_path)}) == str(on_path / "python3")
    assert find_python(None, None, {"PATH": ""}) is None


def test_a_named_interpreter_that_is_missing_says_where_it_was_named(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"\(from \$CUDA_GATE_PYTHON\): not an executable file"):
        find_python(None, "/opt/x/python", {PYTHON_ENV: str(tmp_path / "nope")})
    with pytest.raises(ToolError, match=r"\(from the config's python\): not found on PATH"):
        find_python(None, "no-such-python-here", {"PATH": str(tmp_path)})
    with pytest.raises(ToolError, match=r"\(from --python\)"):
        find_python(str(tmp_path / "missing"), None, {})
