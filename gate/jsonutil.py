"""The one reader of JSON from outside: depth-bounded, every failure one BadInputError.

``json.loads`` recurses once per nesting level: a few thousand ``[`` raise
RecursionError, and a document just under the interpreter's limit still breaks
whatever walks it recursively afterwards (jsonschema, our own readers). No
document cuda-gate reads nests anywhere near :data:`MAX_DEPTH`, so anything
deeper is refused before it is used.
"""

from __future__ import annotations

import json
from typing import Any

from gate.errors import BadInputError

MAX_DEPTH = 64


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
