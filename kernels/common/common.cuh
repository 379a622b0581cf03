// common.cuh — helpers shared by every camel kernel. Included by each kernels/**/*.cu as
// `#include "common/common.cuh"` (build-kernels passes -I kernels, so every file includes it the
// same way). A change here, or to any kernels/**/*.cuh, rebuilds all PTX.
//
// Conventions:
// - Every kernel is `extern "C" __global__`, so its PTX name is its C name: the name its Rust
//   launcher looks up (crates/camel-cuda/src/kernels/<family>.rs).
// - Every kernel's first statement is CAMEL_PDL_WAIT() (pdl.cuh: programmatic dependent launch).
// - Element counts and flat indices are `long long` (i64 on the Rust side): tensors may exceed
//   2^31 elements.
// - Elementwise kernels loop with GRID_STRIDE_LOOP, so any grid covers any n (camel_cuda's
//   launch_1d caps the grid at 65535 blocks of 256 threads).
// - No fast-math: results are compared against f64 CPU references.
#pragma once

#include "pdl.cuh"  // CAMEL_PDL_WAIT(): the first statement of every kernel

// for (long long i = global thread index; i < n; i += threads in the grid)
#define GRID_STRIDE_LOOP(i, n)                                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (long long)(n); \
         i += (long long)gridDim.x * blockDim.x)

namespace camel {

constexpr unsigned FULL_MASK = 0xffffffffu;
constexpr int WARP_SIZE = 32;

__host__ __device__ __forceinline__ long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

// Sum / max over the 32 lanes of a warp; every lane gets the result.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ int warp_sum(int v) {
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// Inclusive prefix sum over the lanes of a warp: lane i gets v_0 + … + v_i.
__device__ __forceinline__ int warp_inclusive_scan(int v) {
    const int lane = threadIdx.x % WARP_SIZE;
#pragma unroll
    for (int o = 1; o < WARP_SIZE; o <<= 1) {
        const int y = __shfl_up_sync(FULL_MASK, v, o);
        if (lane >= o) v += y;
    }
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// Sum / max over a whole block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result. `scratch` is a __shared__ float[32]. Contains __syncthreads(): call from every
// thread of the block.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int warps = blockDim.x / WARP_SIZE;
    v = warp_sum(v);
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ int block_sum(int v, int* scratch) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int warps = blockDim.x / WARP_SIZE;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int warps = blockDim.x / WARP_SIZE;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

}  // namespace camel
