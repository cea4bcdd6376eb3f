"""The console table: as wide as COLUMNS says, never a word cut, colour only on a terminal."""

from __future__ import annotations

import io

import pytest

from gate.render.text import LOG_WIDTH, colour, table, width

pytestmark = pytest.mark.unit


def test_columns_sets_the_width_even_outside_a_terminal() -> None:
    assert width({"COLUMNS": "160"}) == 160
    assert width({"COLUMNS": "20"}) == 60  # never too narrow to read
    assert width({"COLUMNS": "wide"}) == LOG_WIDTH
    assert width({}) == LOG_WIDTH  # pytest's stdout is no terminal


def test_a_command_is_never_split_inside_a_word() -> None:
    command = "env 'GENCODE=-gencode=arch=compute_90,code=[sm_90,compute_90]' cmake --build b"
    out = table(("result", "check", "detail"), [("PASS", "build", command)], total=60)
    lines = out.splitlines()[2:]
    assert len(lines) > 1  # it did wrap
    for word in command.split():
        assert any(word in line.split() for line in lines), word
    assert "'GENCODE=-gencode=arch=compute_90,code=[sm_90,compute_90]'" in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    text = "PASS  build  ok\nFAIL  inspect  missing\nverdict: PASS is not a result here"
    coloured = colour(text, stream=_Terminal(), environ={})
    assert coloured.splitlines()[0] == "\033[32mPASS\033[0m  build  ok"
    assert coloured.splitlines()[1].startswith("\033[31;1mFAIL\033[0m")
    assert coloured.splitlines()[2] == text.splitlines()[2]
    assert colour(text, stream=_Terminal(), environ={"NO_COLOR": ""}) == text
    assert colour(text, stream=io.StringIO(), environ={}) == text  # a file or a pipe
