"""A byte string searched for in a buffer by the C library's ``memmem``, where there is one.

The scan for fat binary containers outside ``.nv_fatbin`` searches every loadable data
section of a library (gate.reader.fatbin.scan_containers): about 2 GB on the audit
corpus of benchmarks/RESULTS.md. ``bytes.find`` and ``mmap.find`` run a Horspool search
at 1-2 GB/s on the container prefix here (whose last byte, 0x00, is the commonest byte
of binary data); glibc's ``memmem`` runs at 4-8 GB/s on the same bytes, and, called
through ctypes, without holding the GIL. Where ctypes or ``memmem`` is missing, or the
buffer exports no address, the search is ``find`` itself: the same answers, slower.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gate.reader.elffile import Buffer

# (needle, lo, hi) -> offset of the first needle in buf[lo:hi], or -1; as buf.find.
Finder = Callable[[bytes, int, int], int]


class _PyBuffer(ctypes.Structure):
    """CPython's ``Py_buffer`` (Include/pybuffer.h), unchanged since Python 3.3."""

    _fields_ = (
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.py_object),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    )


def _memmem() -> Any:  # noqa: ANN401  (a ctypes foreign function)
    try:
        libc = ctypes.CDLL(None)
        function = libc.memmem
        get = ctypes.pythonapi.PyObject_GetBuffer
        release = ctypes.pythonapi.PyBuffer_Release
    except (AttributeError, OSError):
        return None
    function.restype = ctypes.c_void_p
    function.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
    get.restype = ctypes.c_int
    get.argtypes = (ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int)
    release.restype = None
    release.argtypes = (ctypes.POINTER(_PyBuffer),)
    return function


_MEMMEM = _memmem()


@contextmanager
def address(buf: Buffer) -> Iterator[int | None]:
    """The address of ``buf``'s first byte, valid inside the ``with`` block (the buffer is
    held there: a mmap cannot be closed until it ends); None where ctypes cannot take it
    (no buffer interface, a closed mmap, no ctypes)."""
    view = _PyBuffer()
    try:
        held = _MEMMEM is not None and not ctypes.pythonapi.PyObject_GetBuffer(
            buf, ctypes.byref(view), 0
        )
    except (TypeError, ValueError, BufferError):  # no buffer, or a closed mmap
        held = False
    if not held:
        yield None
        return
    try:
        yield view.buf or 0
    finally:
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(view))


def in_bytes(data: bytes) -> Callable[[bytes, int], int] | None:
    """A search in ``data`` (bytes: immutable, and held by the function, so its address
    stays valid), ``(needle, start) -> offset`` as ``data.find(needle, start)``, by
    ``memmem`` without the GIL; None where there is no ``memmem``.

    For the PTX ``.entry`` search on the decoding threads: bytes.find holds the GIL for
    the whole search, which serializes the threads (libcublasLt: 300 MB of PTX).
    """
    memmem = _MEMMEM
    if memmem is None or type(data) is not bytes:
        return None
    base = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    size = len(data)

    def find(needle: bytes, start: int) -> int:
        if start < 0 or not needle:  # find's own meanings: never asked here
            return data.find(needle, start)
        if size - start < len(needle):
            return -1
        at = memmem(base + start, size - start, needle, len(needle))
        return -1 if at is None else int(at) - base

    return find


@contextmanager
def finder(buf: Buffer) -> Iterator[Finder]:
    """A search function over ``buf``, valid inside the ``with`` block (the buffer's
    address is held there: a mmap cannot be closed until it ends)."""
    with address(buf) as base:
        if base is None:
            yield buf.find
            return
        size, memmem = len(buf), _MEMMEM

        def find(needle: bytes, lo: int, hi: int) -> int:
            if lo < 0 or hi < 0 or not needle:  # find's own meanings: never asked here
                return buf.find(needle, lo, hi)
            hi = min(hi, size)
            if hi - lo < len(needle):
                return -1
            at = memmem(base + lo, hi - lo, needle, len(needle))
            return -1 if at is None else int(at) - base

        yield find
