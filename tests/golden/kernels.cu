// Golden test source: three kernels and one device function (see make_golden.sh).
__device__ int helper(int x) { return x * 2; }
__global__ void write_value(int *p) { *p = 42; }
__global__ void add_one(int *p) { *p += 1; }
__global__ void twice(int *p) { *p = helper(*p); }
