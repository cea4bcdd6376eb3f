// The C interface libkernels.so exports; app.cpp resolves these names with dlsym.
// Every function returns a cudaError_t value (0 on success); kernels_error_string
// turns it into the CUDA runtime's own message.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*scale_f32_fn)(const float *in, float *out, size_t n, float factor);
typedef int (*scale_f64_fn)(const double *in, double *out, size_t n, double factor);
typedef int (*sum_f32_fn)(const float *in, size_t n, float *result);
typedef const char *(*error_string_fn)(int code);

#ifdef __cplusplus
}
#endif
