"""Kernel names as C++ spells them, by the C++ runtime's own demangler (``__cxa_demangle``).

libstdc++'s ``__cxa_demangle`` is called through ctypes, as the PyPI ``cxxfilt`` package
did (no release since 2021, a few lines of ctypes); this module keeps its behaviour:
only a name starting with ``_Z`` is demangled, and any failure (no libstdc++ or libc++
in the process's reach, a name that is not mangled C++, output that is not UTF-8) shows
the name as it is. Where the library is missing, every name therefore stays mangled.
The library is loaded on first use. Messages and console output use :func:`demangle`;
JSON keeps the mangled names.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable, Iterable

# The C++ runtime's sonames, tried before ctypes.util.find_library, which runs ldconfig.
_SONAMES = ("libstdc++.so.6", "libc++.so.1")
_FIND = ("stdc++", "c++")


class _Owned(ctypes.c_char_p):
    """``char *`` kept as a pointer (a plain c_char_p result is copied and lost): the
    buffer __cxa_demangle allocates must be freed."""


def demangle(name: str) -> str:
    """``_Z11write_valuePi`` -> ``write_value(int*)``; the name unchanged when it cannot be."""
    if not name.startswith("_Z"):
        return name  # not an external C++ symbol: cxxfilt's external_only
    demangler = _demangler()
    if demangler is None:
        return name
    try:
        return demangler(name)
    except ValueError:  # not mangled C++ (a status), or not UTF-8 either way
        return name


@functools.cache
def _demangler() -> Callable[[str], str] | None:
    """``__cxa_demangle`` as a function of text, or None where no C++ runtime loads."""
    runtime = _load(_SONAMES) or _load(
        found for found in map(ctypes.util.find_library, _FIND) if found
    )
    if runtime is None:
        return None
    cxa_demangle = runtime.__cxa_demangle  # getattr: Python mangles __names in a class only
    cxa_demangle.restype = _Owned
    cxa_demangle.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int),
    ]
    free = ctypes.CDLL(None).free  # the process's malloc, which the runtime allocates with
    free.argtypes = [ctypes.c_void_p]
    free.restype = None

    def call(name: str) -> str:
        status = ctypes.c_int()
        result: _Owned = cxa_demangle(name.encode(), None, None, ctypes.byref(status))
        try:
            text = result.value
        finally:
            free(result)
        # 0: demangled; -1 no memory, -2 not a mangled name, -3 a bad argument.
        if status.value != 0 or text is None:
            raise ValueError(f"__cxa_demangle status {status.value}")
        return text.decode()

    return call


def _load(names: Iterable[str]) -> ctypes.CDLL | None:
    """The first of ``names`` that loads, or None."""
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None
