"""The JSON schema of ``[tool.cuda-gate]`` for validate-pyproject (and editors through it).

Registered as the ``validate_pyproject.tool_schema`` entry point ``cuda-gate`` (the way
cibuildwheel registers ``[tool.cibuildwheel]``), so ``validate-pyproject pyproject.toml``
catches a misspelt key in the table before a run does. The schema is
``gate/schemas/config.schema.json``, the one editors read for ``cuda-gate.toml``, declared
as draft-07 for validate-pyproject.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def tool_schema(tool_name: str = "cuda-gate") -> dict[str, Any]:
    """The schema of the ``[tool.<tool_name>]`` table (validate-pyproject's plugin call)."""
    del tool_name  # one table, one schema
    text = resources.files("gate").joinpath("schemas", "config.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    # validate-pyproject composes draft-07 schemas; ours uses nothing draft-07 lacks
    # (``$defs`` is only a place that ``$ref`` pointers name).
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return schema
