"""The one reader of JSON from outside: depth-bounded, every failure one BadInputError.

``json.loads`` recurses once per nesting level: a few thousand ``[`` raise
RecursionError, and a document just under the interpreter's limit still breaks
whatever walks it recursively afterwards (jsonschema, our own readers). No
document cuda-gate reads nests anywhere near :data:`MAX_DEPTH`, so anything
deeper is refused before it is used.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from gate.errors import BadInputError

MAX_DEPTH = 64
MIB = 1024 * 1024


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of ``path``; BadInputError naming it and ``limit`` when it holds more.

    As :func:`read_stream`, on ``path`` opened as it is (a link followed, a pipe read).
    OSError as ``open`` and ``read`` raise it.
    """
    with path.open("rb") as stream:
        return read_stream(stream, limit, path)


def read_stream(stream: BinaryIO, limit: int, path: Path) -> bytes:
    """The rest of ``stream`` (``path`` open); BadInputError naming ``path`` and ``limit``
    when it holds more.

    A regular file whose size is already past the limit is refused before any byte is
    read; otherwise at most ``limit + 1`` bytes are read, so an oversized (growing, or
    endless) file costs no more memory than the limit. OSError as ``read`` raises it.
    """
    info = os.fstat(stream.fileno())
    if stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise _too_large(path, limit)
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise _too_large(path, limit)
    return data


def _too_large(path: Path, limit: int) -> BadInputError:
    shown = f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"
    return BadInputError(f"{path}: larger than {shown}, the most cuda-gate reads of it")


def depth(value: object) -> int:
    """How deeply ``value`` nests lists and objects (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level + 1)
        stack.extend((child, level + 1) for child in children)
    return deepest


def loads(data: bytes | str, where: str, *, max_depth: int = MAX_DEPTH) -> Any:  # noqa: ANN401 - any JSON value
    """Parse ``data``; BadInputError naming ``where`` when it is not JSON or nests too deeply."""
    try:
        value = json.loads(data)
    except RecursionError as e:
        raise BadInputError(f"{where}: JSON nested too deeply (over {max_depth} levels)") from e
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInputError(f"{where}: not JSON: {e}") from e
    if depth(value) > max_depth:
        raise BadInputError(f"{where}: JSON nested too deeply (over {max_depth} levels)")
    return value


def dumps(value: object, *, indent: int = 2) -> str:
    """``value`` as sorted, indented JSON with a final newline, written at C speed.

    ``json.dumps(indent=...)`` runs the pure-Python encoder: on a run record listing the
    libraries torch loads (tens of thousands of entries) that cost seconds. Here objects
    and lists are indented only while they hold other non-empty objects or lists; one
    that holds only scalars (and lists of scalars) is written on one line by the C
    encoder, so a listing reads one entry per line. The document is the same JSON value.
    """
    out: list[str] = []
    _write(value, 0, indent, out)
    out.append("\n")
    return "".join(out)


_ENCODER = json.JSONEncoder(sort_keys=True)  # one instance: json.dumps builds one per call


def _is_leaf(value: object) -> bool:
    """Written on one line: nothing inside is an object or a list holding one.

    A list is judged by its first item: a guess that is wrong changes the layout only.
    """
    items: Any
    if type(value) is dict:
        items = value.values()
    elif type(value) is list:
        items = value
    else:
        return True
    for item in items:
        kind = type(item)
        if kind is dict:
            if item:
                return False
        elif kind is list and item and type(item[0]) in (dict, list):
            return False
    return True


def _key(key: object) -> str:
    """An object key as json.dumps writes it (True -> "true", 1.5 -> "1.5"); TypeError else."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, int | float):  # bool is an int
        return _ENCODER.encode(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _write(value: object, level: int, indent: int, out: list[str]) -> None:
    if not value or _is_leaf(value):
        out.append(_ENCODER.encode(value))
        return
    inner = "\n" + " " * (indent * (level + 1))
    if isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value)):
            out.append(("," if i else "") + inner + _ENCODER.encode(_key(key)) + ": ")
            _write(value[key], level + 1, indent, out)
        out.append("\n" + " " * (indent * level) + "}")
        return
    assert isinstance(value, list)  # noqa: S101 - _is_leaf took every other case
    out.append("[")
    leaves = all(not item or _is_leaf(item) for item in value)
    if leaves:  # the common case (a listing's entries): one line per item, no recursion
        out.append(inner + ("," + inner).join(map(_ENCODER.encode, value)))
    else:
        for i, item in enumerate(value):
            out.append(("," if i else "") + inner)
            _write(item, level + 1, indent, out)
    out.append("\n" + " " * (indent * level) + "]")
