// libkernels.so: one scaling kernel per data type and a reduction, each behind a C
// function that allocates, copies, launches, synchronises and reports the first error.
#include <cuda_runtime.h>

#include "kernels.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

// Every CUDA call is checked; the first failure is returned to the caller.
#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t status_ = (call);                                                            \
    if (status_ != cudaSuccess) {                                                            \
      return status_;                                                                        \
    }                                                                                        \
  } while (0)

extern "C" __global__ void scale_f32(const float *in, float *out, size_t n, float factor) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}

extern "C" __global__ void scale_f64(const double *in, double *out, size_t n, double factor) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}

// Block-level tree reduction in shared memory, one atomicAdd per block.
extern "C" __global__ void sum_f32(const float *in, size_t n, float *result) {
  __shared__ float partial[256];
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  partial[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(result, partial[0]);
}

namespace {

constexpr unsigned kThreads = 256;

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

template <typename T, typename Launch>
int run_scale(const T *in, T *out, size_t n, Launch launch) {
  T *d_in = nullptr;
  T *d_out = nullptr;
  size_t bytes = n * sizeof(T);
  CHECK(cudaMalloc(&d_in, bytes));
  CHECK(cudaMalloc(&d_out, bytes));
  CHECK(cudaMemcpy(d_in, in, bytes, cudaMemcpyHostToDevice));
  launch(d_in, d_out);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_out));
  return cudaSuccess;
}

}  // namespace

EXPORT int kernels_scale_f32(const float *in, float *out, size_t n, float factor) {
  return run_scale(in, out, n, [&](const float *d_in, float *d_out) {
    scale_f32<<<blocks_for(n), kThreads>>>(d_in, d_out, n, factor);
  });
}

EXPORT int kernels_scale_f64(const double *in, double *out, size_t n, double factor) {
  return run_scale(in, out, n, [&](const double *d_in, double *d_out) {
    scale_f64<<<blocks_for(n), kThreads>>>(d_in, d_out, n, factor);
  });
}

EXPORT int kernels_sum_f32(const float *in, size_t n, float *result) {
  float *d_in = nullptr;
  float *d_sum = nullptr;
  CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CHECK(cudaMalloc(&d_sum, sizeof(float)));
  CHECK(cudaMemcpy(d_in, in, n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_sum, 0, sizeof(float)));
  sum_f32<<<blocks_for(n), kThreads>>>(d_in, n, d_sum);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(result, d_sum, sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_sum));
  return cudaSuccess;
}

EXPORT const char *kernels_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}
