"""Real nvcc builds of the artifacts the decision tests judge (tests/test_gpu_decisions.py).

``isa_too_new``: a program that loads its kernel through the runtime's library API from
a fatbin it carries (in ``.rodata``, where only cuda-gate's reader looks): ``sm_80``
SASS, which runs on no 9.x or newer device, and ``compute_90`` PTX whose ``.version``
says ISA 9.2, which a CUDA 13.0 driver cannot JIT. On an H200 with driver 580 both
paths fail, each for its own reason: the case of issue 20, item 10.

``ptx_image``: a host-only driver-API program that keeps its kernel as a PTX image
(``nvcc -ptx`` for ``compute_90``) in a byte array, loads it with ``cuModuleLoadData``,
launches it with ``cuLaunchKernel`` and checks the result; the image's ``.version`` is the ISA asked
for (9.2: too new for a CUDA 13.0 driver). The cases of issue 42, item 1.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SMOKE = Path(__file__).resolve().parent.parent / "gate" / "cuda" / "smoke.cu"

_KERNEL = 'extern "C" __global__ void k(int *p) { *p = 7; }\n'
_LOADER = """// Loads its kernel from the fatbin it carries and checks the result.
#include <cuda_runtime.h>
#include <cstdio>
#include "fatbin.h"

#define CUDA_OK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \\
    std::fprintf(stderr, "%s\\n", cudaGetErrorString(e)); return 1; } } while (0)

int main() {
    cudaLibrary_t lib;
    cudaKernel_t kernel;
    int* device = nullptr;
    int host = 0;
    CUDA_OK(cudaLibraryLoadData(&lib, kFatbin, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CUDA_OK(cudaLibraryGetKernel(&kernel, lib, "k"));
    CUDA_OK(cudaMalloc(&device, sizeof(int)));
    void* args[] = {&device};
    CUDA_OK(cudaLaunchKernel((const void*)kernel, dim3(1), dim3(1), args, 0, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(&host, device, sizeof(int), cudaMemcpyDeviceToHost));
    if (host != 7) return 2;
    std::puts("PASS");
    return 0;
}
"""


_DRIVER_LOADER = """// Loads its kernel from its PTX image (driver API) and checks the result.
#include <cuda.h>
#include <cstdio>
#include "ptx.h"

#define CU_OK(call) do { CUresult r = (call); if (r != CUDA_SUCCESS) { \\
    const char *name = "?", *text = "?"; cuGetErrorName(r, &name); cuGetErrorString(r, &text); \\
    std::fprintf(stderr, "%s: %s (%s, error %d)\\n", #call, text, name, (int)r); \\
    return 1; } } while (0)

int main() {
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction fn; CUdeviceptr d; int host = 0;
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGet(&dev, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_OK(cuCtxSetCurrent(ctx));
    CU_OK(cuModuleLoadData(&mod, kPtx));
    CU_OK(cuModuleGetFunction(&fn, mod, "k"));
    CU_OK(cuMemAlloc(&d, sizeof(int)));
    void *args[] = {&d};
    CU_OK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
    CU_OK(cuCtxSynchronize());
    CU_OK(cuMemcpyDtoH(&host, d, sizeof(int)));
    if (host != 7) { std::fprintf(stderr, "got %d, expected 7\\n", host); return 2; }
    std::puts("PASS");
    return 0;
}
"""


def nvcc() -> str:
    """The nvcc on PATH (the CI machine and the GPU machine have one)."""
    found = shutil.which("nvcc")
    assert found is not None, "nvcc is needed"
    return found


def tool(name: str) -> str:
    """A toolkit program beside nvcc (fatbinary)."""
    found = Path(nvcc()).resolve().parent / name
    assert found.is_file(), f"{name} is not beside {nvcc()}"
    return str(found)


def _run(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr[-2000:]}"


def isa_too_new(folder: Path, isa: str = "9.2") -> Path:
    """The program described in the module docstring, built in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.cu").write_text(_KERNEL, encoding="utf-8")
    _run([nvcc(), "-cubin", "-arch=sm_80", "-o", "k80.cubin", "k.cu"], folder)
    _run([nvcc(), "-ptx", "-arch=compute_90", "-o", "k.ptx", "k.cu"], folder)
    ptx = (folder / "k.ptx").read_text(encoding="utf-8")
    lines = ptx.split("\n")
    lines = [f".version {isa}" if line.startswith(".version ") else line for line in lines]
    (folder / "k.ptx").write_text("\n".join(lines), encoding="utf-8")
    _run(
        [
            tool("fatbinary"),
            "--create=k.fatbin",
            "-64",
            "--image3=kind=elf,sm=80,file=k80.cubin",
            "--image3=kind=ptx,sm=90,file=k.ptx",
        ],
        folder,
    )
    data = (folder / "k.fatbin").read_bytes()
    body = ",".join(str(b) for b in data)
    header = f"alignas(16) static const unsigned char kFatbin[{len(data)}] = {{{body}}};\n"
    (folder / "fatbin.h").write_text(header, encoding="utf-8")
    (folder / "app.cu").write_text(_LOADER, encoding="utf-8")
    _run([nvcc(), "-o", "app", "app.cu"], folder)
    return folder / "app"


def smoke(folder: Path, gencode: str, name: str = "app") -> Path:
    """The gate's smoke program built as a project artifact with one ``-gencode``."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(SMOKE, folder / "app.cu")
    _run([nvcc(), "-gencode", gencode, "-o", name, "app.cu"], folder)
    return folder / name


def ptx_image(folder: Path, isa: str = "9.0") -> Path:
    """The driver-API program of the module docstring, its PTX's ISA ``isa``, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.cu").write_text(_KERNEL, encoding="utf-8")
    _run([nvcc(), "-ptx", "-arch=compute_90", "-o", "k.ptx", "k.cu"], folder)
    lines = (folder / "k.ptx").read_text(encoding="utf-8").split("\n")
    lines = [f".version {isa}" if line.startswith(".version ") else line for line in lines]
    data = "\n".join(lines).encode() + b"\0"  # cuModuleLoadData takes PTX as a C string
    body = ",".join(str(b) for b in data)
    header = f"static const unsigned char kPtx[{len(data)}] = {{{body}}};\n"
    (folder / "ptx.h").write_text(header, encoding="utf-8")
    # Host code only (.cpp): the one fat binary in it is the static CUDA runtime's.
    (folder / "app.cpp").write_text(_DRIVER_LOADER, encoding="utf-8")
    _run([nvcc(), "-o", "app", "app.cpp", "-lcuda"], folder)
    return folder / "app"
