// RMSNorm: one block per row; the sum of squares is accumulated in float (double for double).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cub/block/block_reduce.cuh>

#include <limits>

#include "ops.h"

namespace torch_ext_example {

constexpr int kRmsNormThreads = 256;

template <typename scalar_t>
__global__ void rms_norm_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ x,
                                const scalar_t* __restrict__ weight, float eps, int64_t hidden) {
  using acc_t = at::opmath_type<scalar_t>;
  using BlockReduce = cub::BlockReduce<acc_t, kRmsNormThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  __shared__ acc_t inv_rms;

  const scalar_t* x_row = x + blockIdx.x * hidden;
  scalar_t* out_row = out + blockIdx.x * hidden;
  acc_t sum_sq = 0;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const acc_t v = static_cast<acc_t>(x_row[i]);
    sum_sq += v * v;
  }
  const acc_t total = BlockReduce(reduce_storage).Sum(sum_sq);  // valid in thread 0 only
  if (threadIdx.x == 0) {
    inv_rms = rsqrt(total / static_cast<acc_t>(hidden) + static_cast<acc_t>(eps));
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const acc_t v = static_cast<acc_t>(x_row[i]) * inv_rms * static_cast<acc_t>(weight[i]);
    out_row[i] = static_cast<scalar_t>(v);
  }
}

void rms_norm(at::Tensor& out, const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "rms_norm: x must be a contiguous CUDA tensor");
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, "rms_norm: x needs a non-empty last dimension");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1),
              "rms_norm: weight must be 1-D with x's last dimension, got ", weight.sizes());
  TORCH_CHECK(out.sizes() == x.sizes(), "rms_norm: out must have x's shape ", x.sizes());
  const auto like_x = [&x](const at::Tensor& t) {
    return t.is_contiguous() && t.device() == x.device() && t.dtype() == x.dtype();
  };
  TORCH_CHECK(like_x(out) && like_x(weight),
              "rms_norm: out and weight must be contiguous, on x's device, of x's dtype");
  const int64_t hidden = x.size(-1);
  const int64_t rows = x.numel() / hidden;
  if (rows == 0) {
    return;  // a launch with no blocks is an error, and there is nothing to do
  }
  TORCH_CHECK(rows <= std::numeric_limits<int>::max(), "rms_norm: too many rows: ", rows);

  const c10::cuda::OptionalCUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "rms_norm", [&] {
    rms_norm_kernel<scalar_t><<<static_cast<unsigned>(rows), kRmsNormThreads, 0, stream>>>(
        out.mutable_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
        weight.const_data_ptr<scalar_t>(), static_cast<float>(eps), hidden);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace torch_ext_example
