"""Kernel names as C++ spells them, by the C++ runtime's own demangler (PyPI ``cxxfilt``).

Imported lazily: cxxfilt looks for libstdc++ when it is imported. Any failure (no
libstdc++, a name that is not mangled C++) shows the name as it is. Messages and
console output use :func:`demangle`; JSON keeps the mangled names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable


def demangle(name: str) -> str:
    """``_Z11write_valuePi`` -> ``write_value(int*)``; the name unchanged when it cannot be."""
    demangler = _demangler()
    if demangler is None:
        return name
    try:
        return demangler(name)
    except Exception:  # noqa: BLE001  (cxxfilt.Error and ctypes' own: fall back to the name)
        return name


@functools.cache
def _demangler() -> Callable[[str], str] | None:
    try:
        import cxxfilt  # noqa: PLC0415  (on first use only, see the module docstring)
    except (ImportError, OSError):
        return None
    found: Callable[[str], str] = cxxfilt.demangle
    return found
