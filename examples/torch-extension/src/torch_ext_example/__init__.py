"""RMSNorm and SiLU-and-mul (SwiGLU) CUDA kernels for PyTorch: the cuda-gate example extension."""

from __future__ import annotations

import torch  # loads libtorch, whose symbols the extension needs, before the extension

from torch_ext_example import _C

__all__ = ["rms_norm", "silu_and_mul"]


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``x / sqrt(mean(x * x, -1) + eps) * weight``, on the GPU, into ``out`` when given."""
    out = torch.empty_like(x) if out is None else out
    _C.rms_norm(out, x, weight, eps)
    return out


def silu_and_mul(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` for ``x`` of width ``2d``, into ``out`` when given."""
    if out is None:
        out = x.new_empty((*x.shape[:-1], x.shape[-1] // 2))
    _C.silu_and_mul(out, x)
    return out
