// app: loads libkernels.so with dlopen (it is not linked against it), picks a kernel by
// its argument, checks the result on the host and prints PASS.
//
//   app f32   scale_f32 on floats
//   app f64   scale_f64 on doubles
//   app sum   sum_f32, a reduction
//
// Exit status: 0 on PASS; 1 on a CUDA error (the runtime's own message is printed);
// 2 on a wrong result; 3 on a usage or loading error.
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.h"

namespace {

constexpr size_t kCount = 1 << 20;

// libkernels.so sits beside the executable; KERNELS_LIBRARY overrides the path.
std::string library_path() {
  if (const char *env = std::getenv("KERNELS_LIBRARY")) return env;
  char exe[PATH_MAX] = {0};
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) return "libkernels.so";
  std::string dir(exe, static_cast<size_t>(len));
  return dir.substr(0, dir.rfind('/')) + "/libkernels.so";
}

template <typename Fn>
Fn resolve(void *handle, const char *name) {
  void *symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    std::fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
  }
  return reinterpret_cast<Fn>(symbol);
}

int cuda_failed(error_string_fn describe, const char *what, int code) {
  std::fprintf(stderr, "%s failed: CUDA error %d: %s\n", what, code, describe(code));
  return 1;
}

template <typename T, typename Fn>
int check_scale(Fn scale, error_string_fn describe, const char *what) {
  std::vector<T> in(kCount), out(kCount, T(0));
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<T>(i % 1000);
  const T factor = static_cast<T>(3);
  int code = scale(in.data(), out.data(), kCount, factor);
  if (code != 0) return cuda_failed(describe, what, code);
  for (size_t i = 0; i < kCount; ++i) {
    if (out[i] != in[i] * factor) {
      std::fprintf(stderr, "%s: wrong value at %zu: %g != %g\n", what, i,
                   static_cast<double>(out[i]), static_cast<double>(in[i] * factor));
      return 2;
    }
  }
  return 0;
}

int check_sum(sum_f32_fn sum, error_string_fn describe) {
  // Small integers: every partial sum is exact in float, so any order gives the same total.
  std::vector<float> in(kCount);
  double expected = 0.0;
  for (size_t i = 0; i < kCount; ++i) {
    in[i] = static_cast<float>(i % 7);
    expected += in[i];
  }
  float result = 0.0f;
  int code = sum(in.data(), kCount, &result);
  if (code != 0) return cuda_failed(describe, "sum_f32", code);
  if (std::fabs(static_cast<double>(result) - expected) > 0.5) {
    std::fprintf(stderr, "sum_f32: got %.1f, expected %.1f\n", static_cast<double>(result),
                 expected);
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s f32|f64|sum\n", argv[0]);
    return 3;
  }
  const std::string mode = argv[1];
  const std::string path = library_path();
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", path.c_str(), dlerror());
    return 3;
  }
  auto describe = resolve<error_string_fn>(handle, "kernels_error_string");
  if (describe == nullptr) return 3;
  int status = 3;
  if (mode == "f32") {
    auto fn = resolve<scale_f32_fn>(handle, "kernels_scale_f32");
    status = fn ? check_scale<float>(fn, describe, "scale_f32") : 3;
  } else if (mode == "f64") {
    auto fn = resolve<scale_f64_fn>(handle, "kernels_scale_f64");
    status = fn ? check_scale<double>(fn, describe, "scale_f64") : 3;
  } else if (mode == "sum") {
    auto fn = resolve<sum_f32_fn>(handle, "kernels_sum_f32");
    status = fn ? check_sum(fn, describe) : 3;
  } else {
    std::fprintf(stderr, "unknown mode %s: expected f32, f64 or sum\n", mode.c_str());
  }
  if (status == 0) std::printf("%s: PASS\n", mode.c_str());
  dlclose(handle);
  return status;
}
