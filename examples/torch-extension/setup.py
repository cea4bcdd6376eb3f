"""Build torch_ext_example._C for the GPU targets named in TORCH_CUDA_ARCH_LIST.

Build it against the torch it will run with (pip's --no-build-isolation), for example
``TORCH_CUDA_ARCH_LIST="9.0+PTX" python -m pip wheel --no-deps --no-build-isolation -w dist .``
(cuda-gate passes the detected target as ``{torch_arch_list}``).
"""

import os
import sys

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

# Unset, torch would pick targets from whatever GPU is visible while building (or from its
# own default list without one): the wheel's targets would depend on the build machine.
if not os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip():
    sys.exit(
        "set TORCH_CUDA_ARCH_LIST to the targets to build, such as 9.0+PTX or 12.1+PTX "
        "(cuda-gate passes {torch_arch_list})"
    )
if torch.version.cuda is None:
    sys.exit(f"torch {torch.__version__} has no CUDA support: install a CUDA build of torch")

setup(
    ext_modules=[
        CUDAExtension(
            "torch_ext_example._C",
            ["csrc/ops.cpp", "csrc/rms_norm.cu", "csrc/silu_and_mul.cu"],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
