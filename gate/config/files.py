"""Where the configuration comes from, and its text read as TOML (bounded).

``--config PATH`` when given (a ``pyproject.toml`` is read from its ``[tool.cuda-gate]``
table, any other file from its top level); else ``cuda-gate.toml`` in the project
folder; else ``[tool.cuda-gate]`` of its ``pyproject.toml``; else the defaults.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, BinaryIO

from gate.config import values as tv
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
    if len(text) > tv.MAX_FILE_BYTES or len(text.encode("utf-8", "surrogatepass")) > (
        tv.MAX_FILE_BYTES
    ):
        raise ConfigError(f"{path}: a configuration holds at most {tv.MAX_FILE_BYTES:,} bytes")
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
    """The file's text; ConfigError past :data:`~tv.MAX_FILE_BYTES`, read no further than
    needed to say which line is too long (a 100 MB value costs no 100 MB)."""
    try:
        with path.open("rb") as file:
            data = file.read(tv.MAX_FILE_BYTES + 1)
            if len(data) > tv.MAX_FILE_BYTES:
                raise _too_large(path, data, file)
        return data.decode("utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text: {e}") from e


# A table header (``[store]``, ``[[tool.cuda-gate.build]]``) and a key at a line's start, as
# much as an error line needs to name the value on a line too long to parse.
_HEADER = re.compile(rb"[ \t]*(\[\[?)[ \t]*([^\]\n]+?)[ \t]*\]")
_PART = rb"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""
_KEY = re.compile(rb"[ \t]*(" + _PART + rb"(?:[ \t]*\.[ \t]*" + _PART + rb")*)[ \t]*=")
_SCANNED = 1 << 30  # how far on a too-long line is followed to measure it
_CHUNK = 1 << 20


def _too_large(path: Path, head: bytes, rest: BinaryIO) -> ConfigError:
    """The error for a file over the limit: the first line of ``head`` (the limit's worth of
    the file) that no value fits on, named by its table and key, with its size; else the
    file's size."""
    table, counts = "", dict[str, int]()
    lines = head.split(b"\n")
    for number, line in enumerate(lines, 1):
        if len(line) <= tv.MAX_TEXT:
            header = _HEADER.match(line)
            if header:
                name = _dotted(header.group(2))
                counts[name] = counts.get(name, -1) + 1
                table = f"{name}[{counts[name]}]" if header.group(1) == b"[[" else name
        else:
            size, more = len(line), ""
            if number == len(lines):  # cut where the limit ended: measure the rest
                extra, finished = _rest_of_line(rest)
                size, more = size + extra, "" if finished else "more than "
            key = _KEY.match(line[: tv.MAX_NAME * 4])
            named = ".".join(n for n in (table, _dotted(key.group(1)) if key else "") if n)
            at = f"{named} (line {number})" if named else f"line {number}"
            return ConfigError(
                f"{path}: {tv.clip(at)}: {more}{size:,} bytes on one line; a value holds at "
                f"most {tv.MAX_TEXT:,} characters"
            )
    size = os.fstat(rest.fileno()).st_size
    shown = f"{size:,}" if size > tv.MAX_FILE_BYTES else f"more than {tv.MAX_FILE_BYTES:,}"
    return ConfigError(
        f"{path}: {shown} bytes; a configuration holds at most {tv.MAX_FILE_BYTES:,} bytes"
    )


def _dotted(key: bytes) -> str:
    """A TOML key as messages write it: its parts joined by dots, without the spaces."""
    return re.sub(r"\s*\.\s*", ".", key.decode("utf-8", "replace").strip())


def _rest_of_line(file: BinaryIO) -> tuple[int, bool]:
    """How many bytes ``file`` holds before its next newline, and whether one was found
    (the count stops at :data:`_SCANNED`)."""
    count = 0
    while count < _SCANNED:
        chunk = file.read(_CHUNK)
        end = chunk.find(b"\n")
        if end >= 0:
            return count + end, True
        if not chunk:
            return count, True
        count += len(chunk)
    return count, False


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
