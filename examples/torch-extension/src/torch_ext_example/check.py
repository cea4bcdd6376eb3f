"""Check every kernel against a float64 reference: ``python -m torch_ext_example.check DTYPE``.

DTYPE is float32, float64, float16 or bfloat16. Each case prints ``<case> <dtype>: PASS``,
and the last line is ``<dtype>: PASS``; on a mismatch or a CUDA error the case prints what
failed and the exit status is 1. The inputs are random normal values (never zeros), every
output starts as NaN so an element the kernel never wrote cannot pass, and silu_and_mul is
run on both sides of its size branch, each time confirming which kernel it took.

Inputs are made and the reference is computed on the CPU; data moves to and from the GPU
only by plain copies. So the only device code this runs is the extension's own, which
lets it pass under CUDA_FORCE_PTX_JIT=1 as well: torch's own kernels ship as SASS only
and could not load there.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

import torch_ext_example
from torch_ext_example import _C

# (rtol, atol) against a float64 reference of the same rounded inputs: a few units in the
# last place of each type (float16 keeps 11 significant bits, bfloat16 8).
TOLERANCES = {
    torch.float64: (1e-12, 1e-12),
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2e-3, 1e-4),
    torch.bfloat16: (1.6e-2, 1e-3),
}
DTYPES = {str(dtype).removeprefix("torch."): dtype for dtype in TOLERANCES}
EPS = 1e-6

Case = Callable[[torch.dtype, torch.Generator], None]


def _random(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Normal values rounded to ``dtype``, on the CPU."""
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)


def _unwritten(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An output on the GPU that is NaN everywhere until a kernel writes it."""
    return torch.full(shape, float("nan"), dtype=dtype).cuda()  # filled on the CPU, then copied


def _compare(got_on_gpu: torch.Tensor, want: torch.Tensor) -> None:
    got = got_on_gpu.cpu()
    unwritten = int(torch.isnan(got).sum())
    if unwritten:
        raise AssertionError(f"{unwritten} of {got.numel()} elements were never written")
    rtol, atol = TOLERANCES[got.dtype]
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol)


def rms_norm(rows: int, hidden: int) -> Case:
    """RMSNorm of a (rows, hidden) input."""

    def case(dtype: torch.dtype, gen: torch.Generator) -> None:
        x = _random((rows, hidden), dtype, gen)
        weight = (torch.rand(hidden, generator=gen, dtype=torch.float64) + 0.5).to(dtype)
        out = _unwritten(x.shape, dtype)
        torch_ext_example.rms_norm(x.cuda(), weight.cuda(), EPS, out=out)
        xd = x.double()
        want = xd * torch.rsqrt(xd.square().mean(-1, keepdim=True) + EPS) * weight.double()
        _compare(out, want)

    return case


def silu_and_mul(rows: int, d: int, *, vectorized: bool) -> Case:
    """SiLU-and-mul of a (rows, 2d) input, expecting the vectorised kernel or the simple one."""

    def case(dtype: torch.dtype, gen: torch.Generator) -> None:
        x = _random((rows, 2 * d), dtype, gen)
        x_gpu, out = x.cuda(), _unwritten((rows, d), dtype)
        if _C.silu_and_mul_uses_vectorized(out, x_gpu) != vectorized:
            wanted = "vectorised" if vectorized else "simple"
            raise AssertionError(f"expected the {wanted} kernel for shape {tuple(x.shape)}")
        torch_ext_example.silu_and_mul(x_gpu, out=out)
        gate, up = x.double().chunk(2, dim=-1)
        _compare(out, torch.nn.functional.silu(gate) * up)

    return case


# Below _C.VECTORIZE_MIN_ELEMENTS output elements (65,536) silu_and_mul takes the simple
# kernel; at or above it, the vectorised one when the row width is a multiple of the
# vector (8 elements covers every type), else the simple one again.
CASES: dict[str, Case] = {
    "rms_norm (3, 1000)": rms_norm(3, 1000),
    "rms_norm (300, 4096)": rms_norm(300, 4096),
    "silu_and_mul small (5, 2x300)": silu_and_mul(5, 300, vectorized=False),
    "silu_and_mul large (256, 2x4096)": silu_and_mul(256, 4096, vectorized=True),
    "silu_and_mul large, odd width (70, 2x1001)": silu_and_mul(70, 1001, vectorized=False),
}


def main(argv: list[str]) -> int:
    """Run every case for the dtype named in ``argv``; 0 when all pass."""
    if len(argv) != 1 or argv[0] not in DTYPES:
        print(f"usage: python -m torch_ext_example.check {{{','.join(DTYPES)}}}", file=sys.stderr)
        return 2
    name, dtype = argv[0], DTYPES[argv[0]]
    try:
        device = torch.cuda.get_device_name()
        capability = ".".join(map(str, torch.cuda.get_device_capability()))
    except RuntimeError as e:
        print(f"FAIL: no usable CUDA device: {e}", file=sys.stderr)
        return 1
    print(f"torch {torch.__version__}, {device} (capability {capability}), {_C.__file__}")
    gen = torch.Generator().manual_seed(0)
    for title, case in CASES.items():
        try:
            case(dtype, gen)
        except (AssertionError, RuntimeError) as e:  # a mismatch, or a CUDA error from torch
            print(f"{title} {name}: FAIL: {e}", file=sys.stderr)
            return 1
        print(f"{title} {name}: PASS")
    print(f"{name}: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
