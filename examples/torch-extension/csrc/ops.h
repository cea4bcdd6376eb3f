// The extension's operations; each checks its arguments and launches its kernels.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace torch_ext_example {

// out = x / sqrt(mean(x * x, last dim) + eps) * weight   (RMSNorm, as in LLaMA)
void rms_norm(at::Tensor& out, const at::Tensor& x, const at::Tensor& weight, double eps);

// out = silu(x[..., :d]) * x[..., d:] for x of width 2d   (the SwiGLU activation)
void silu_and_mul(at::Tensor& out, const at::Tensor& x);

// Inputs of at least this many output elements take the vectorised kernel...
constexpr int64_t kVectorizeMinElements = int64_t{1} << 16;

// ...when their rows and pointers also allow 16-byte loads: which kernel silu_and_mul
// launches for these tensors, so a test can prove it covered both.
bool silu_and_mul_uses_vectorized(const at::Tensor& out, const at::Tensor& x);

}  // namespace torch_ext_example
