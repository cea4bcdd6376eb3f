"""What to do next, one line per cause, in the project's own build terms (gate.rules.remedies)."""

from __future__ import annotations

import pytest

from gate.rules.causes import Cause
from gate.rules.remedies import ArchList, Situation, arch_list_of, lto_only, remedy
from gate.rules.targets import Capability, Target, Version

pytestmark = pytest.mark.unit

SPARK = Capability(12, 1)
H100 = Capability(9, 0)


@pytest.mark.parametrize(
    ("commands", "placeholder", "arch"),
    [
        (("cmake -S . -B build", "cmake --build build"), False, ArchList.CMAKE),
        (("/usr/bin/cmake -S . -B build",), False, ArchList.CMAKE),
        (("make CMAKE_CUDA_ARCHITECTURES=90",), False, ArchList.CMAKE),
        (("python -m pip install .",), False, ArchList.UNKNOWN),
        (("TORCH_CUDA_ARCH_LIST=9.0 python setup.py build_ext",), False, ArchList.TORCH),
        (("python -c 'import torch'",), False, ArchList.TORCH),
        (("nvcc -gencode arch=compute_90,code=sm_90 k.cu",), False, ArchList.NVCC),
        (("nvcc --generate-code=arch=compute_90,code=sm_90 k.cu",), False, ArchList.NVCC),
        (("nvcc -arch=sm_90 k.cu",), False, ArchList.NVCC),
        (("nvcc --gpu-architecture=sm_90 k.cu",), False, ArchList.NVCC),
        (("nvcc k.cu",), False, ArchList.UNKNOWN),
        (("nvcc -gencode arch=compute_90,code=sm_90 k.cu",), True, ArchList.GENCODE),
        (("cmake -S . -B b",), True, ArchList.GENCODE),
        (("mycmake -S .",), False, ArchList.UNKNOWN),
        (("",), False, ArchList.UNKNOWN),
        ((), False, ArchList.UNKNOWN),
    ],
)
def test_which_variable_carries_the_architecture_list(
    commands: tuple[str, ...], placeholder: bool, arch: ArchList
) -> None:
    assert arch_list_of(commands, gencode_placeholder=placeholder) is arch
    if not placeholder:  # the placeholder is not assumed
        assert arch_list_of(commands) is arch


def test_each_command_is_read_on_its_own() -> None:
    # A flag's letters split over two commands are no flag.
    assert arch_list_of(("echo -", "gencode")) is ArchList.UNKNOWN
    assert arch_list_of(("echo CMAKE_CUDA_", "ARCHITECTURES")) is ArchList.UNKNOWN
    assert arch_list_of(("true", "cmake --build b")) is ArchList.CMAKE
    assert arch_list_of(("cmake",)) is ArchList.CMAKE
    assert arch_list_of(("  ",)) is ArchList.UNKNOWN


CODE = ", rebuild, and check the final link keeps it"


@pytest.mark.parametrize(
    ("situation", "line"),
    [
        # No native code: the variable that carries the list, in its own spelling.
        (
            Situation(Cause.MISSING_SASS, ArchList.CMAKE, device=SPARK),
            'add 121 to CMAKE_CUDA_ARCHITECTURES (e.g. -DCMAKE_CUDA_ARCHITECTURES="121")' + CODE,
        ),
        (
            Situation(Cause.NO_KERNEL_IMAGE, ArchList.TORCH, device=SPARK),
            "add 12.1 to TORCH_CUDA_ARCH_LIST" + CODE,
        ),
        (
            Situation(Cause.NO_DEVICE_CODE, ArchList.GENCODE, device=H100),
            "put {gencode} in every nvcc command (it carries sm_90)" + CODE,
        ),
        (
            Situation(Cause.WRONG_TARGET, ArchList.NVCC, device=H100),
            "add -gencode arch=compute_90,code=sm_90 to the nvcc commands" + CODE,
        ),
        (
            Situation(Cause.MISSING_SASS, ArchList.UNKNOWN, target=Target.parse("sm_90a")),
            "add -gencode arch=compute_90a,code=sm_90a to the nvcc commands" + CODE,
        ),
        (
            Situation(Cause.MISSING_SASS, ArchList.TORCH, target=Target.parse("compute_90a")),
            "add 9.0a to TORCH_CUDA_ARCH_LIST" + CODE,
        ),
        # --target wins over the device where both are known.
        (
            Situation(
                Cause.MISSING_SASS, ArchList.CMAKE, device=H100, target=Target.parse("sm_121")
            ),
            'add 121 to CMAKE_CUDA_ARCHITECTURES (e.g. -DCMAKE_CUDA_ARCHITECTURES="121")' + CODE,
        ),
        (Situation(Cause.MISSING_SASS, ArchList.CMAKE), None),
        # No PTX (or the native path needed the JIT): PTX in the project's spelling.
        (
            Situation(Cause.MISSING_PTX, ArchList.CMAKE, device=SPARK),
            "add 121-virtual to CMAKE_CUDA_ARCHITECTURES" + CODE,
        ),
        (
            Situation(Cause.JIT_DISABLED, ArchList.TORCH, device=H100),
            "add +PTX to the last entry of TORCH_CUDA_ARCH_LIST (e.g. 9.0+PTX)" + CODE,
        ),
        (
            Situation(Cause.MISSING_PTX, ArchList.GENCODE, device=H100),
            "put {gencode} in every nvcc command (it carries compute_90)" + CODE,
        ),
        (
            Situation(Cause.MISSING_PTX, ArchList.NVCC, target=Target.parse("sm_120f")),
            "add -gencode arch=compute_120f,code=compute_120f to the nvcc commands" + CODE,
        ),
        (Situation(Cause.MISSING_PTX, ArchList.NVCC), None),
        # PTX newer than the driver.
        (
            Situation(Cause.PTX_NEEDS_DRIVER, driver=Version(13, 0), driver_needed=Version(13, 1)),
            (
                "the PTX needs a driver for CUDA 13.1 or newer (this one supports CUDA 13.0): "
                "update the driver, or build the PTX with the toolkit of the oldest driver you "
                "ship to"
            ),
        ),
        (
            Situation(Cause.UNSUPPORTED_PTX),
            (
                "the PTX needs a driver for a newer CUDA or newer: update the driver, or build the "
                "PTX with the toolkit of the oldest driver you ship to"
            ),
        ),
        (
            Situation(Cause.TRAP_STUB, ArchList.CMAKE, device=SPARK),
            (
                "the kernel is a stub that traps on sm_121: add 121 to CMAKE_CUDA_ARCHITECTURES "
                '(e.g. -DCMAKE_CUDA_ARCHITECTURES="121") so the library carries its real code, '
                "and rebuild"
            ),
        ),
        (Situation(Cause.TRAP_STUB), None),
        (
            Situation(Cause.MISSING_KERNEL, kernel="relux", kernels=("scale", "relu")),
            "kernels present: relu, scale; did you mean relu?",
        ),
        (
            Situation(Cause.MISSING_KERNEL, kernel="softmax", kernels=("scale", "relu")),
            "kernels present: relu, scale",
        ),
        # Eight are named whole; a ninth is left to "...".
        (
            Situation(Cause.MISSING_KERNEL, kernel="zz", kernels=tuple(f"a{i}" for i in range(8))),
            "kernels present: a0, a1, a2, a3, a4, a5, a6, a7",
        ),
        (
            Situation(Cause.MISSING_KERNEL, kernel="zz", kernels=tuple(f"a{i}" for i in range(9))),
            "kernels present: a0, a1, a2, a3, a4, a5, a6, a7, ...",
        ),
        # The closest of several close names.
        (
            Situation(Cause.MISSING_KERNEL, kernel="scale_x", kernels=("scale_y", "scale_xy")),
            "kernels present: scale_xy, scale_y; did you mean scale_xy?",
        ),
        # Close, but not close enough (difflib's 0.6).
        (
            Situation(Cause.MISSING_KERNEL, kernel="abcd", kernels=("abxy",)),
            "kernels present: abxy",
        ),
        (
            Situation(Cause.MISSING_KERNEL, kernel="abcd", kernels=("abcx",)),
            "kernels present: abcx; did you mean abcx?",
        ),
        (
            Situation(
                Cause.MISSING_KERNEL, kernel="k3_", kernels=tuple(f"k{i}" for i in range(10))
            ),
            "kernels present: k0, k1, k2, k3, k4, k5, k6, k7, ...; did you mean k3?",
        ),
        (
            Situation(Cause.MISSING_KERNEL, kernel="relu"),
            "no artifact holds any kernel: check that relu is compiled into them",
        ),
        (Situation(Cause.MISSING_KERNEL, kernels=("relu",)), None),
        (
            Situation(
                Cause.LOADED_LIBRARY,
                device=SPARK,
                library="libcublasLt.so.13",
                distribution="nvidia-cublas 13.0.0",
            ),
            (
                "libcublasLt.so.13 comes from nvidia-cublas 13.0.0: install a build of it with "
                "code for sm_121"
            ),
        ),
        (
            Situation(Cause.LOADED_LIBRARY, library="libk.so"),
            "libk.so is not from an installed distribution: rebuild it",
        ),
        (Situation(Cause.LOADED_LIBRARY, device=SPARK), None),
        (
            Situation(Cause.HOST_ARCH, host="aarch64"),
            "build on (or cross-compile for) aarch64, the device host's machine",
        ),
        (Situation(Cause.HOST_ARCH), None),
        (
            Situation(Cause.DRIVER_TOO_OLD, driver=Version(12, 8)),
            (
                "the driver supports CUDA 12.8: update it, or build with a toolkit no newer than "
                "CUDA 12.8"
            ),
        ),
        (Situation(Cause.DRIVER_TOO_OLD), None),
        (
            Situation(Cause.TIMEOUT),
            "raise the entry point's timeout in cuda-gate.toml, or find why it hangs",
        ),
        (Situation(Cause.EXIT_STATUS, device=SPARK), None),
        (Situation(Cause.INTERNAL, device=SPARK), None),
    ],
)
def test_the_remedy_for_each_cause(situation: Situation, line: str | None) -> None:
    assert remedy(situation) == line


def test_every_cause_that_names_code_for_the_device_has_a_remedy_for_it() -> None:
    for cause in (
        Cause.MISSING_SASS,
        Cause.NO_KERNEL_IMAGE,
        Cause.NO_DEVICE_CODE,
        Cause.WRONG_TARGET,
        Cause.MISSING_PTX,
        Cause.JIT_DISABLED,
        Cause.TRAP_STUB,
    ):
        said = remedy(Situation(cause, ArchList.CMAKE, device=SPARK))
        assert said is not None, cause
        assert "121" in said, cause
    assert remedy(Situation(Cause.STALE_ARTIFACT)) is not None
    assert remedy(Situation(Cause.JIT_CACHE)) is not None


@pytest.mark.parametrize(
    ("arch", "line"),
    [
        (
            ArchList.CMAKE,
            (
                "add 121 (SASS and PTX) to CMAKE_CUDA_ARCHITECTURES "
                '(e.g. -DCMAKE_CUDA_ARCHITECTURES="121")'
            ),
        ),
        (ArchList.TORCH, "add 12.1+PTX to TORCH_CUDA_ARCH_LIST"),
        (
            ArchList.GENCODE,
            "put {gencode} in every nvcc command (it carries sm_121 and compute_121)",
        ),
        (
            ArchList.NVCC,
            "add -gencode arch=compute_121,code=[sm_121,compute_121] to the nvcc commands",
        ),
        (
            ArchList.UNKNOWN,
            "add -gencode arch=compute_121,code=[sm_121,compute_121] to the nvcc commands",
        ),
    ],
)
def test_sass_and_ptx_both_missing_are_added_in_one_line(arch: ArchList, line: str) -> None:
    situation = Situation(Cause.MISSING_SASS, arch, device=SPARK, ptx_too=True)
    assert remedy(situation) == line + CODE
    assert remedy(Situation(Cause.MISSING_SASS, arch, device=SPARK)) != line + CODE


def test_lto_ir_only_is_device_linked() -> None:
    assert lto_only(Target.parse("sm_121")) == (
        "it holds LTO IR only: device-link it (nvcc -dlink -dlto) for sm_121 so it carries SASS"
    )
    assert (
        lto_only(None)
        == "it holds LTO IR only: device-link it (nvcc -dlink -dlto) so it carries SASS"
    )
