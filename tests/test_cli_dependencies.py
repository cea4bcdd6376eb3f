"""A broken install that lacks a dependency says so in one line (exit 3), not in a traceback."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from gate import cli
from gate.errors import ExitCode

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"

pytestmark = pytest.mark.unit


def test_every_dependency_has_its_import_name() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=~!\[ ]", r, maxsplit=1)[0].lower() for r in project["dependencies"]}
    assert set(cli.DEPENDENCIES.values()) == declared


def test_a_missing_decompressor_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # libkernels.so holds an LZ4 PTX entry: names mode decompresses it.
    monkeypatch.setitem(sys.modules, "lz4.block", None)
    status = cli.main(
        ["inspect", "--no-detect", "--names", "--no-cache", str(GOLDEN / "libkernels.so")]
    )
    assert status == ExitCode.TOOL
    err = capsys.readouterr().err
    assert err == (
        "cuda-gate: error: the Python module lz4.block is missing from this installation "
        "(cuda-gate depends on lz4; reinstall it: pip install --force-reinstall lz4)\n"
    )


def test_a_missing_module_of_no_dependency_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the declared dependencies are said as a broken install; any other missing
    # module is a bug of ours, and its traceback is kept.
    from gate.commands import init

    def broken(_args: object) -> int:
        import gate_no_such_module  # type: ignore[import-not-found]  # noqa: F401

        return 0

    monkeypatch.setattr(init, "handle", broken)
    with pytest.raises(ModuleNotFoundError, match="gate_no_such_module"):
        cli.main(["init"])
