// SiLU-and-mul (SwiGLU): out[r, i] = silu(x[r, i]) * x[r, d + i] for x of shape (..., 2d).
//
// Two kernels, chosen by size: small inputs take one thread per output element; large
// ones take a grid-stride loop over 16-byte vectors (4 floats, 8 halves), when the row
// width and the pointers allow aligned vector loads.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "ops.h"

namespace torch_ext_example {

constexpr int kSiluThreads = 256;
constexpr int kVectorBytes = 16;

template <typename scalar_t>
__device__ __forceinline__ scalar_t silu_mul(scalar_t gate, scalar_t up) {
  using acc_t = at::opmath_type<scalar_t>;
  const acc_t g = static_cast<acc_t>(gate);
  return static_cast<scalar_t>(g / (acc_t(1) + exp(-g)) * static_cast<acc_t>(up));
}

template <typename scalar_t>
__global__ void silu_and_mul_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ x,
                                    int64_t d, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const scalar_t* x_row = x + (i / d) * 2 * d;
    const int64_t col = i % d;
    out[i] = silu_mul(x_row[col], x_row[d + col]);
  }
}

template <typename scalar_t>
struct alignas(kVectorBytes) Pack {
  static constexpr int kSize = kVectorBytes / sizeof(scalar_t);
  scalar_t v[kSize];
};

template <typename scalar_t>
__global__ void silu_and_mul_vec_kernel(scalar_t* __restrict__ out,
                                        const scalar_t* __restrict__ x, int64_t d,
                                        int64_t n_packs) {
  using P = Pack<scalar_t>;
  const int64_t d_packs = d / P::kSize;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_packs;
       i += stride) {
    const P* x_row = reinterpret_cast<const P*>(x + (i / d_packs) * 2 * d);
    const int64_t col = i % d_packs;
    const P gate = x_row[col];
    const P up = x_row[d_packs + col];
    P result;
#pragma unroll
    for (int k = 0; k < P::kSize; ++k) {
      result.v[k] = silu_mul(gate.v[k], up.v[k]);
    }
    reinterpret_cast<P*>(out)[i] = result;
  }
}

namespace {

bool aligned(const at::Tensor& t) {
  return reinterpret_cast<std::uintptr_t>(t.const_data_ptr()) % kVectorBytes == 0;
}

void check(const at::Tensor& out, const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "silu_and_mul: x must be a contiguous CUDA tensor");
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, "silu_and_mul: x's last dimension must be even");
  TORCH_CHECK(out.is_contiguous() && out.device() == x.device() && out.dtype() == x.dtype(),
              "silu_and_mul: out must be contiguous, on x's device, of x's dtype");
  auto half = x.sizes().vec();
  half.back() /= 2;
  const at::IntArrayRef shape(half);
  TORCH_CHECK(out.sizes() == shape, "silu_and_mul: out must have shape ", shape, ", got ",
              out.sizes());
}

}  // namespace

bool silu_and_mul_uses_vectorized(const at::Tensor& out, const at::Tensor& x) {
  check(out, x);
  const int64_t pack = kVectorBytes / x.element_size();
  return out.numel() >= kVectorizeMinElements && out.size(-1) % pack == 0 && aligned(out) &&
         aligned(x);
}

void silu_and_mul(at::Tensor& out, const at::Tensor& x) {
  const bool vectorized = silu_and_mul_uses_vectorized(out, x);  // also checks the arguments
  const int64_t n = out.numel();
  if (n == 0) {
    return;  // a launch with no blocks is an error, and there is nothing to do
  }
  const int64_t d = out.size(-1);

  const c10::cuda::OptionalCUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "silu_and_mul", [&] {
    scalar_t* out_ptr = out.mutable_data_ptr<scalar_t>();
    const scalar_t* x_ptr = x.const_data_ptr<scalar_t>();
    if (vectorized) {
      const int64_t n_packs = n / Pack<scalar_t>::kSize;
      const int64_t wanted = (n_packs + kSiluThreads - 1) / kSiluThreads;
      // A few blocks per multiprocessor keep it busy; the loop covers the rest.
      int multiprocessors = 0;
      C10_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount,
                                            x.get_device()));
      const int64_t resident = 2 * static_cast<int64_t>(multiprocessors);
      const auto blocks = static_cast<unsigned>(std::min(wanted, resident));
      silu_and_mul_vec_kernel<scalar_t><<<blocks, kSiluThreads, 0, stream>>>(out_ptr, x_ptr, d,
                                                                               n_packs);
    } else {
      const int64_t blocks = (n + kSiluThreads - 1) / kSiluThreads;
      TORCH_CHECK(blocks <= std::numeric_limits<int>::max(), "silu_and_mul: too large: ", n);
      silu_and_mul_kernel<scalar_t>
          <<<static_cast<unsigned>(blocks), kSiluThreads, 0, stream>>>(out_ptr, x_ptr, d, n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace torch_ext_example
