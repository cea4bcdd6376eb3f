"""Load PTX through the driver's JIT, one module per process: ``python -m gate.stages.jitcheck``.

Usage: ``python -m gate.stages.jitcheck FILE.ptx [KERNEL ...]``. The gate runs this in a
fresh process per PTX entry of the project's own artifacts, with ``CUDA_FORCE_PTX_JIT=1``,
``CUDA_CACHE_DISABLE=1`` and an empty ``CUDA_CACHE_PATH``, to prove the project's PTX
JIT-compiles on this device even when the whole program cannot run under forced JIT
(a library it loads, such as torch's ``libtorch_cuda.so``, ships no PTX).

It talks to the driver API through ``ctypes`` (no compiler needed): ``cuInit``, the
primary context of device 0, ``cuModuleLoadDataEx`` with the JIT's error log, then
``cuModuleGetFunction`` for each named kernel. It prints one JSON line:
``{"ok": true, "kernels": N}`` or ``{"ok": false, "error": "...", "log": "..."}``,
and exits 0 or 1. Nothing here imports the rest of the gate.
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

_JIT_ERROR_LOG_BUFFER = 5
_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
_LOG_SIZE = 1 << 16


class DriverError(Exception):
    """A driver API call failed; the message names the call and the driver's error."""


def _check(lib: ctypes.CDLL, call: str, status: int) -> None:
    if status != 0:
        name = ctypes.c_char_p()
        lib.cuGetErrorName(status, ctypes.byref(name))
        text = name.value.decode() if name.value else f"CUresult {status}"
        raise DriverError(f"{call} failed: {text}")


def load(ptx: bytes, kernels: list[str]) -> dict[str, object]:
    """JIT-compile ``ptx`` on device 0 and look up ``kernels``; the result as a JSON object."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return {"ok": False, "error": f"libcuda.so.1 cannot be loaded: {e}", "log": ""}
    log = ctypes.create_string_buffer(_LOG_SIZE)
    try:
        _check(lib, "cuInit", lib.cuInit(0))
        device = ctypes.c_int()
        _check(lib, "cuDeviceGet", lib.cuDeviceGet(ctypes.byref(device), 0))
        context = ctypes.c_void_p()
        _check(
            lib,
            "cuDevicePrimaryCtxRetain",
            lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device),
        )
        _check(lib, "cuCtxSetCurrent", lib.cuCtxSetCurrent(context))
        options = (ctypes.c_int * 2)(_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (ctypes.c_void_p * 2)(
            ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(_LOG_SIZE)
        )
        module = ctypes.c_void_p()
        image = ctypes.create_string_buffer(ptx + b"\0")
        _check(
            lib,
            "cuModuleLoadDataEx",
            lib.cuModuleLoadDataEx(ctypes.byref(module), image, 2, options, values),
        )
        for kernel in kernels:
            function = ctypes.c_void_p()
            _check(
                lib,
                f"cuModuleGetFunction({kernel})",
                lib.cuModuleGetFunction(ctypes.byref(function), module, kernel.encode()),
            )
        lib.cuModuleUnload(module)
    except DriverError as e:
        return {"ok": False, "error": str(e), "log": log.value.decode("utf-8", "replace")}
    return {"ok": True, "kernels": len(kernels)}


def main(argv: list[str]) -> int:
    """Load the PTX file ``argv[0]`` and check the kernels named after it."""
    if not argv:
        print(json.dumps({"ok": False, "error": "usage: jitcheck FILE.ptx [KERNEL ...]"}))
        return 2
    try:
        ptx = Path(argv[0]).read_bytes()
    except OSError as e:
        print(json.dumps({"ok": False, "error": f"{argv[0]}: {e.strerror or e}", "log": ""}))
        return 2
    result = load(ptx, argv[1:])
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
