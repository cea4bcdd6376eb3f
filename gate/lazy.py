"""Package names imported on first use: a package lists its public names and the module of
each, and pays for a module only when one of its names is read (``gate.store``,
``gate.config``): a command that needs one part does not import the rest.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: ``where`` maps each public name to its module in
    the package; a name found is kept in ``namespace`` (the package's globals), so that
    the next read does not come here."""

    def attribute(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return attribute
