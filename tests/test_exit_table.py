"""The README's "Exit statuses" table is gate.errors' own, row for row (issue 45 item 6).

The codes and their meanings are written once, beside ``ExitCode``; the README holds
what ``python -m gate.errors --markdown`` prints, so a code added, renumbered or reworded
on one side only fails here.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import gate.errors
from gate.errors import ExitCode, GateError, main, markdown_table

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parent.parent / "README.md"


def _readme_table() -> str:
    """The table under "## Exit statuses", as the README holds it."""
    section = README.read_text(encoding="utf-8").split("\n## Exit statuses\n", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return "\n".join(rows) + "\n"


def test_the_readme_table_is_the_generated_one() -> None:
    assert _readme_table() == markdown_table(), (
        "README.md's exit-status table differs from gate/errors.py: "
        "paste `python -m gate.errors --markdown` there"
    )


def test_every_exit_code_has_its_own_row() -> None:
    labels = [line.split("|")[1].strip() for line in _readme_table().splitlines()[2:]]
    assert labels == [code.label for code in ExitCode]
    assert len(set(labels)) == len(labels)
    for code in ExitCode:
        assert code.meaning.strip(), code.name
        assert "\n" not in code.meaning, code.name
        # A row's label is its number, or the family it stands for (128 + N for 130).
        assert code.label == str(int(code)) or code is ExitCode.INTERRUPTED, code.name


def test_every_error_class_exits_with_a_code_of_the_table() -> None:
    classes = [
        c for _, c in inspect.getmembers(gate.errors, inspect.isclass) if issubclass(c, GateError)
    ]
    assert len(classes) > 10
    for cls in classes:
        assert isinstance(cls.exit_code, ExitCode), cls.__name__


def test_the_generator_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--markdown"]) == ExitCode.OK
    assert capsys.readouterr().out == markdown_table()
    assert main([]) == ExitCode.USAGE
    assert capsys.readouterr().err == "usage: python -m gate.errors --markdown\n"


def test_a_code_still_reads_as_the_int_scripts_compare() -> None:
    assert ExitCode(4) is ExitCode.NO_DEVICE
    assert int(ExitCode.BROKEN_PIPE) == 141
    assert int(ExitCode.STORAGE) == 20
