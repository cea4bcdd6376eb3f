// cuda-gate probe: print device 0's compute capability as "XY" (e.g. 121 for 12.1).
// On failure print the runtime's own error text and exit non-zero, never a target.
#include <cuda_runtime.h>
#include <cstdio>

int main() {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s\n", cudaGetErrorString(e));
        return 1;
    }
    cudaDeviceProp p{};
    e = cudaGetDeviceProperties(&p, 0);
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s\n", cudaGetErrorString(e));
        return 1;
    }
    std::printf("%d%d\n", p.major, p.minor);
    std::fprintf(stderr, "device 0: %s, %d device(s)\n", p.name, count);
    return 0;
}
