"""Issue 45 items 4, 5 and 7: every configuration value bounded as the file loads, [store]
checked whatever overrides it, and the demangler without cxxfilt.

A 100 MB ``[[build]] command`` ran for 32 s and wrote 1.7 GB of evidence; a 1 MB name
exited 5 and a 1 MB ``python`` 3, each with a 1 MB error line; ``[store] url = 123`` was
ignored where ``CUDA_GATE_STORE`` was set. Each is now exit status 7 at load, one short
line naming the key and its size. The limits are gate.config.values' and the schema's.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from gate import config, proc
from gate.config import values as tv
from gate.errors import ConfigError, ExitCode

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20


def error_of(folder: Path, text: str) -> str:
    """The one line loading ``text`` as folder/cuda-gate.toml fails with (exit status 7)."""
    (folder / "cuda-gate.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        config.load(folder)
    assert info.value.exit_code is ExitCode.CONFIG
    return info.value.one_line()


def long(n: int) -> str:
    return "x" * n


# Each value one character past its limit, the key the line names, and the size it says.
OVER = [
    (f'[[build]]\nname = "{long(129)}"\ncommand = "make"\n', "build[0].name", 129),
    (f'[[entry_point]]\nname = "{long(129)}"\ncommand = "a"\n', "entry_point[0].name", 129),
    (f'python = "/{long(4096)}"\n', "python", 4097),
    (f'[[build]]\ncommand = "make"\ncwd = "{long(4097)}"\n', "build[0].cwd", 4097),
    (f'[[artifact]]\npath = "{long(4097)}"\n', "artifact[0].path", 4097),
    (f'[signing]\nkey_file = "{long(4097)}"\n', "signing.key_file", 4097),
    (f'image = "{long(4097)}"\n', "image", 4097),
    (f'[container]\nruntime = "{long(4097)}"\n', "container.runtime", 4097),
    (f'strict_libraries = ["{long(4097)}"]\n', "strict_libraries[0]", 4097),
    (f'[[build]]\ncommand = "{long(65_537)}"\n', "build[0].command", 65_537),
    (f'[[build]]\ncommand = ["{long(65_537)}"]\n', "build[0].command[0]", 65_537),
    (f'[[entry_point]]\ncommand = "a {long(65_535)}"\n', "entry_point[0].command", 65_537),
    (f'[[build]]\ncommand = ["make", "{long(65_532)}"]\n', "build[0].command", 65_537),
    (f'[[build]]\ncommand = "make"\nenv = {{ A = "{long(65_537)}" }}\n', "build[0].env.A", 65_537),
    (f'[[build]]\ncommand = "make"\nenv = {{ {long(129)} = "1" }}\n', "build[0].env", 129),
    (f'kernels = ["{long(65_537)}"]\n', "kernels[0]", 65_537),
    (f'targets = ["{long(65_537)}"]\n', "targets[0]", 65_537),
    (
        f'[[entry_point]]\ncommand = "a"\nexpected_output = "{long(65_537)}"\n',
        "entry_point[0].expected_output",
        65_537,
    ),
    (f'[store]\nurl = "{long(4097)}"\n', "store.url", 4097),
    (f'[policy.required_devices]\n{long(129)} = ["12.1"]\n', "policy.required_devices", 129),
]


@pytest.mark.unit
@pytest.mark.parametrize(("text", "key", "size"), OVER, ids=[case[1] for case in OVER])
def test_a_value_past_its_limit_is_one_short_line_naming_the_key_and_size(
    tmp_path: Path, text: str, key: str, size: int
) -> None:
    line = error_of(tmp_path, text)
    assert line.startswith(f"{tmp_path / 'cuda-gate.toml'}: {key}"), line
    assert f"{size:,} characters" in line, line
    assert len(line) < len(str(tmp_path)) + 200, line


@pytest.mark.unit
@pytest.mark.parametrize(
    "text",
    [
        f'[[build]]\nname = "{long(128)}"\ncommand = "make {long(65_531)}"\ncwd = "{long(4096)}"\n',
        (
            f'[[build]]\ncommand = ["make", "{long(65_531)}"]\n'
            f'env = {{ {long(128)} = "{long(65_536)}" }}\n'
        ),
        f'python = "/{long(4095)}"\n[store]\nurl = "/{long(4095)}"\n',
    ],
)
def test_a_value_at_its_limit_loads(tmp_path: Path, text: str) -> None:
    (tmp_path / "cuda-gate.toml").write_text(text, encoding="utf-8")
    config.load(tmp_path)


@pytest.mark.unit
def test_a_file_past_the_limit_names_the_line_too_long_for_any_value(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    head = '[project]\nname = "x"\n[tool.cuda-gate]\nsmoke = true\n'
    head += '[[tool.cuda-gate.build]]\ncommand = "a"\n[[tool.cuda-gate.build]]\n'
    path.write_text(f'{head}command = "{long(2 * MB)}"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        config.load(tmp_path)
    assert info.value.one_line() == (
        f"{path}: tool.cuda-gate.build[1].command (line 8): {2 * MB + 12:,} bytes on one "
        "line; a value holds at most 65,536 characters"
    )
    # No one line too long: the file's size.
    path.write_text(head + 'command = "a"\n' + "# a comment\n" * (MB // 10), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        config.load(tmp_path)
    size = path.stat().st_size
    assert info.value.one_line() == (
        f"{path}: {size:,} bytes; a configuration holds at most 1,048,576 bytes"
    )


@pytest.mark.unit
def test_a_value_past_the_limit_is_quoted_in_no_message_beyond_60_characters(
    tmp_path: Path,
) -> None:
    line = error_of(tmp_path, f'[[build]]\nname = "{long(1000)}"\ncommand = "make"\n')
    assert long(61) not in line
    line = error_of(tmp_path, f'[[build]]\ncommand = "make"\nenv = {{ "{long(1000)}=" = "1" }}\n')
    assert long(61) not in line
    assert tv.quote(long(1000)).startswith(repr(long(60)))


@pytest.mark.integration
def test_a_100_mb_command_exits_7_at_load_with_a_short_line_and_no_evidence(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    with (project / "cuda-gate.toml").open("w", encoding="utf-8") as file:
        file.write('[[build]]\nname = "b"\ncommand = "')
        chunk = long(MB)
        for _ in range(100):
            file.write(chunk)
        file.write('"\n')
    home = tmp_path / "home"
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    result = proc.run(
        [sys.executable, "-m", "gate", "run", "--config", "cuda-gate.toml"],
        cwd=project,
        base_env=env,
        timeout=300,
    )
    assert result.returncode == ExitCode.CONFIG, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    assert len(lines[0]) < 200, lines[0][:300]
    assert lines[0] == (
        "cuda-gate: error: cuda-gate.toml: build[0].command (line 3): 104,857,612 bytes on "
        "one line; a value holds at most 65,536 characters"
    )
    # Nothing written: no evidence folder, no store, no cache.
    assert sorted(p.name for p in project.iterdir()) == ["cuda-gate.toml"]
    assert not home.exists()


STORE_BAD = [
    ("url = 123\n", "store.url: expected a string, got 123"),
    ("bucket = 'b'\n", "store.bucket: unknown key"),
    ("attempts = true\n", "store.attempts: expected a whole number, got True"),
    ("path-style = 1.5\n", "store.path-style: expected true or false, got 1.5"),
    ('spool-dir = "a\\u0000b"\n', "store.spool-dir: 'a\\x00b': holds a NUL character"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("table", "expected"), STORE_BAD, ids=[c[1] for c in STORE_BAD])
def test_the_store_table_is_checked_as_the_file_loads(
    tmp_path: Path, table: str, expected: str
) -> None:
    assert expected in error_of(tmp_path, "[store]\n" + table)


@pytest.mark.unit
def test_the_store_table_keeps_every_type_the_store_reads(tmp_path: Path) -> None:
    (tmp_path / "cuda-gate.toml").write_text(
        '[store]\nurl = "s3://bucket/p"\npath-style = "yes"\nattempts = "3"\n'
        "multipart-threshold = 8388608\nconnect-timeout = 5.0\n",
        encoding="utf-8",
    )
    loaded = config.load(tmp_path)
    assert dict(loaded.store) == {
        "url": "s3://bucket/p",
        "path-style": "yes",
        "attempts": "3",
        "multipart-threshold": 8388608,
        "connect-timeout": 5.0,
    }


@pytest.mark.integration
def test_an_invalid_store_url_exits_7_though_the_variable_names_the_store(
    tmp_path: Path,
) -> None:
    (tmp_path / "cuda-gate.toml").write_text("[store]\nurl = 123\n", encoding="utf-8")
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "CUDA_GATE_STORE": str(tmp_path / "store"),
    }
    result = proc.run(
        [sys.executable, "-m", "gate", "run"], cwd=tmp_path, base_env=env, timeout=300
    )
    assert result.returncode == ExitCode.CONFIG, result.stderr[-2000:]
    assert result.stderr == (
        f"cuda-gate: error: {tmp_path / 'cuda-gate.toml'}: store.url: expected a string, got 123\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cuda-gate.toml"]


def schema_validator() -> jsonschema.Draft202012Validator:
    text = resources.files("gate").joinpath("schemas/config.schema.json").read_text("utf-8")
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# A list command's arguments together are the loader's alone to count (the schema bounds each).
SCHEMA_OVER = [case for case in OVER if not case[0].startswith('[[build]]\ncommand = ["make"')]


@pytest.mark.unit
@pytest.mark.parametrize(("text", "key", "size"), SCHEMA_OVER, ids=[c[1] for c in SCHEMA_OVER])
def test_the_schema_states_each_limit(text: str, key: str, size: int) -> None:
    del size
    validator = schema_validator()
    assert not validator.is_valid(tomllib.loads(text)), key
    if key != "targets[0]":  # a target is also a pattern: shorter is still no target
        # One character shorter, the value passes the schema, as the loader takes it.
        shorter = re.sub(r"x{129,}", lambda m: m.group(0)[:-1], text)
        assert [e.message for e in validator.iter_errors(tomllib.loads(shorter))] == [], key


@pytest.mark.unit
@pytest.mark.parametrize(("table", "expected"), STORE_BAD[:4], ids=[c[1] for c in STORE_BAD[:4]])
def test_the_schema_states_the_store_types(table: str, expected: str) -> None:
    assert not schema_validator().is_valid(tomllib.loads("[store]\n" + table)), expected


@pytest.mark.unit
def test_the_schema_is_version_2() -> None:
    schema = json.loads((ROOT / "gate" / "schemas" / "config.schema.json").read_text("utf-8"))
    assert schema["$id"] == "https://cuda-gate.dev/schemas/config/v2"
    assert "1,048,576 bytes" in schema["description"]
