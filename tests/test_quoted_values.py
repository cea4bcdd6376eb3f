"""Error lines quote at most 60 characters of a value (issue 45 item 4, README status 7).

A 1 MB ``python`` path exited 3 with a 1 MB error line, and the store's settings quoted
an object-lock mode, a number or a yes/no value whole. Every such value now goes
through gate.errors.shown: its first 60 characters, an ellipsis and its length, so the
line stays one line under 200 characters.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gate import proc
from gate.errors import SHOWN_CHARS, ConfigError, ExitCode, ToolError, shown
from gate.store.settings import load_settings
from gate.system.machine import find_python

HUGE = 1 << 20  # a 1 MB value, as the probe gave
LINE = 200


def quoted_part(line: str, value: str) -> str:
    """The run of ``value``'s characters the line quotes (its longest)."""
    head = value[:1]
    runs = [r for r in line.split("'") if r and set(r) <= set(value) and r.startswith(head)]
    return max(runs, key=len, default="")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (123, "123"),
        ("short", "'short'"),
        ("x" * 60, "'" + "x" * 60 + "'"),
        ("x" * 61, "'" + "x" * 60 + "'... (61 characters)"),
        ("x" * HUGE, "'" + "x" * 60 + "'... (1,048,576 characters)"),
        # Escaped characters count as their escapes: the quote stays short.
        ("\0" * 100, "'" + "\\x00" * 15 + "'... (100 characters)"),
        (list(range(40)), repr(list(range(40)))[:60] + "... (150 characters)"),
    ],
)
def test_shown_quotes_at_most_60_characters(value: object, expected: str) -> None:
    assert shown(value) == expected
    assert len(shown(value)) <= SHOWN_CHARS + len("''... (1,048,576 characters)")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("variable", "extra", "said"),
    [
        ("CUDA_GATE_MULTIPART_THRESHOLD", None, "is not a whole number from"),
        ("CUDA_GATE_S3_PATH_STYLE", None, "is not true or false"),
        ("CUDA_GATE_OBJECT_LOCK_MODE", {"CUDA_GATE_OBJECT_LOCK_DAYS": "1"}, "is not COMPLIANCE"),
        (
            "CUDA_GATE_OBJECT_LOCK_DAYS",
            {"CUDA_GATE_OBJECT_LOCK_MODE": "GOVERNANCE"},
            "whole number",
        ),
        ("CUDA_GATE_S3_ENDPOINT", None, "is not an endpoint URL"),
    ],
)
def test_a_huge_store_value_is_quoted_short(
    tmp_path: Path, variable: str, extra: dict[str, str] | None, said: str
) -> None:
    (tmp_path / "cuda-gate.toml").write_text("", encoding="utf-8")
    value = "9" * HUGE if "THRESHOLD" in variable or "DAYS" in variable else "y" * HUGE
    env = {"CUDA_GATE_STORE": "s3://good-bucket/p", variable: value, **(extra or {})}
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env=env)
    line = info.value.one_line()
    assert said in line, line[:300]
    assert len(line) < LINE, line[:300]
    assert f"({HUGE:,} characters)" in line
    assert len(quoted_part(line, value)) == SHOWN_CHARS


@pytest.mark.unit
def test_a_huge_bucket_name_is_quoted_short(tmp_path: Path) -> None:
    (tmp_path / "cuda-gate.toml").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env={"CUDA_GATE_STORE": "s3://" + "b" * HUGE})
    line = info.value.one_line()
    assert len(line) < LINE, line[:300]
    assert "is not 3-63 characters" in line


@pytest.mark.unit
@pytest.mark.parametrize("named", ["/opt/" + "p" * HUGE, "python" + "3" * HUGE])
def test_find_python_quotes_a_huge_path_short(named: str) -> None:
    with pytest.raises(ToolError) as info:
        find_python(named, environ={})
    line = info.value.one_line()
    assert len(line) < LINE, line[:300]
    assert line.endswith(
        "... (1,048,581 characters) (from --python): File name too long"
        if "/" in named
        else "... (1,048,582 characters) (from --python): not found on PATH"
    ), line


@pytest.mark.integration
def test_run_with_a_huge_python_path_says_one_short_line(tmp_path: Path) -> None:
    # 100 kB: one argument may be at most 128 kB (MAX_ARG_STRLEN).
    named = "/opt/" + "p" * 100_000
    (tmp_path / "cuda-gate.toml").write_text(
        '[[build]]\nname = "b"\ncommand = "{python} -c pass"\n', encoding="utf-8"
    )
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "d")}
    result = proc.run(
        [sys.executable, "-m", "gate", "run", "--no-store", "--target", "sm_90", "--python", named],
        cwd=tmp_path,
        base_env=env,
        timeout=300,
    )
    assert result.returncode == ExitCode.TOOL, result.output()[-2000:]
    for line in result.output().splitlines():
        assert len(line) < LINE, line[:300]
    assert "p" * (SHOWN_CHARS + 1) not in result.output()
