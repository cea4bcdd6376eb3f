// cuda-gate probe: print device 0's compute capability as "XY" (e.g. 121 for 12.1) on stdout.
// stderr always starts with "driver=<cudaDriverGetVersion> runtime=<cudaRuntimeGetVersion>"
// (driver=0 means no NVIDIA driver is installed); on failure it then prints
// "error <code>: <the runtime's own text>" and exits non-zero, never a target. On success
// stderr also says "compute mode <cudaComputeMode>" (0: default, shared by processes).
#include <cuda_runtime.h>
#include <cstdio>

static int fail(cudaError_t e) {
    std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e), cudaGetErrorString(e));
    return 1;
}

int main() {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    std::fprintf(stderr, "driver=%d runtime=%d\n", driver, runtime);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return fail(e);
    if (count == 0) return fail(cudaErrorNoDevice);
    cudaDeviceProp p{};
    e = cudaGetDeviceProperties(&p, 0);
    if (e != cudaSuccess) return fail(e);
    std::printf("%d%d\n", p.major, p.minor);
    std::fprintf(stderr, "device 0: %s, %d device(s)\n", p.name, count);
    int mode = 0;
    if (cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, 0) == cudaSuccess)
        std::fprintf(stderr, "compute mode %d\n", mode);
    return 0;
}
