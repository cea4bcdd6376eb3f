"""Where the configuration comes from, and its text read as TOML (bounded).

``--config PATH`` when given (a ``pyproject.toml`` is read from its ``[tool.cuda-gate]``
table, any other file from its top level); else ``cuda-gate.toml`` in the project
folder; else ``[tool.cuda-gate]`` of its ``pyproject.toml``; else the defaults.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from gate.config.records import Config
from gate.config.tables import parse
from gate.errors import ConfigError
from gate.jsonutil import depth

CONFIG_FILE = "cuda-gate.toml"
PYPROJECT = "pyproject.toml"


def find_config(project_dir: Path, explicit: Path | None = None) -> Path | None:
    """The file to read: ``explicit``, else cuda-gate.toml, else a pyproject.toml with the table."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: no such configuration file")
        return explicit
    own = project_dir / CONFIG_FILE
    if own.is_file():
        return own
    pyproject = project_dir / PYPROJECT
    if pyproject.is_file():
        tool = _toml(_read(pyproject), pyproject).get("tool")
        if isinstance(tool, dict) and "cuda-gate" in tool:
            return pyproject
    return None


def load(project_dir: Path | None = None, config_path: Path | None = None) -> Config:
    """Find, read and validate the configuration; the defaults when there is none."""
    base = Path() if project_dir is None else project_dir
    path = find_config(base, config_path)
    if path is None:
        return Config(project_dir=base.resolve())
    return parse_text(_read(path), path)


def parse_text(text: str, path: Path) -> Config:
    """Validate the text of the file ``path`` (pyproject.toml: its [tool.cuda-gate] table)."""
    doc = _toml(text, path)
    if path.name == PYPROJECT:
        tool = doc.get("tool", {})
        table = tool.get("cuda-gate") if isinstance(tool, dict) else None
        if table is None:
            raise ConfigError(f"{path}: no [tool.cuda-gate] table")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: tool.cuda-gate: expected a table")
        return parse(table, label=str(path), prefix="tool.cuda-gate.", source=path)
    return parse(doc, label=str(path), prefix="", source=path)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text: {e}") from e


# No configuration nests anywhere near this; pyproject.toml's other tools' tables neither.
MAX_DEPTH = 64
# A dotted key of MAX_DEPTH parts at a line's start (``a.b.c = 1``, ``[a.b.c]``): tomllib
# keeps every prefix of such a key, so 20,000 parts cost it seconds and gigabytes.
_DEEP_KEY = re.compile(
    r"""^[ \t]*\[{0,2}[ \t]*(?:(?:[A-Za-z0-9_-]++|"(?:[^"\\\n]|\\.)*+"|'[^'\n]*+')"""
    rf"[ \t]*\.[ \t]*){{{MAX_DEPTH},}}",
    re.MULTILINE,
)


def _toml(text: str, path: Path) -> dict[str, Any]:
    """The document; ConfigError for invalid TOML and for nesting past :data:`MAX_DEPTH`.

    tomllib recurses once per nested array or inline table (a thousand levels raise
    RecursionError) and is quadratic in a dotted key's length, so both are bounded.
    """
    deep = f"{path}: nested deeper than {MAX_DEPTH} levels (tables, arrays or dotted keys)"
    if _DEEP_KEY.search(text):
        raise ConfigError(deep)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e
    except (RecursionError, MemoryError) as e:
        raise ConfigError(deep) from e
    if depth(doc) > MAX_DEPTH:
        raise ConfigError(deep)
    return doc
