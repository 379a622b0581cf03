// LayerNorm step 3: the row in registers, read once (layernorm/layernorm.cuh has the row code).
// Backward, for rows up to 1024 columns (longer rows stay on step 2):
// - a warp owns a row at a time (grid-stride over rows, a few blocks per SM); each lane loads
//   its columns of x and g once (NV float4 or scalars, unrolled, all loads independent),
//   recomputes x̂ = (x − mean)·rstd from the saved statistics, takes Σ ĝ and Σ ĝ·x̂ (ĝ = g·γ)
//   with two warp sums and writes dx from the registers; step 2 reads x, g and γ twice a row;
// - a lane owns the *same columns* in every row it visits, so it keeps its dγ, dβ partial sums
//   in registers across rows: no shared memory per row, no atomics;
// - at the end the block adds its warps' registers in warp order (each warp's own slice of
//   shared memory, one barrier) and writes one partial row per block, [2][nblocks][cols] as
//   step 2;
// - the partials are summed per column in a fixed order inside the kernel once every block has
//   written its own (ln3_fused_colsum, when the grid is all resident), or else by
//   `layernorm3_param_grad_f32` after it: deterministic either way, and no long dependent chain.
// Bytes that must move: x, g read, dx written (12 B/element) plus γ, mean, rstd and dγ/dβ.

#include "layernorm/layernorm.cuh"

// Kernel names: layernorm3_fwd_v{VEC}_n{NV}_f32 (the launchers build the same names).
#define LAYERNORM3(VEC, NV)                                                                                \
    extern "C" __global__ void __launch_bounds__(256) layernorm3_fwd_v##VEC##_n##NV##_f32(                 \
        const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,      \
        float* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd, long long rows,          \
        long long cols, float eps) {                                                                        \
        CAMEL_PDL_WAIT();                                                                                   \
        ln3_fwd_row<VEC, NV>(x, gamma, beta, y, mean, rstd, rows, cols, eps);                              \
    }

LAYERNORM3(4, 1)
LAYERNORM3(4, 2)
LAYERNORM3(4, 3)
LAYERNORM3(4, 4)
LAYERNORM3(4, 6)
LAYERNORM3(4, 8)
LAYERNORM3(1, 1)
LAYERNORM3(1, 2)
LAYERNORM3(1, 4)
LAYERNORM3(1, 8)
LAYERNORM3(1, 16)
LAYERNORM3(1, 24)
LAYERNORM3(1, 32)

// Kernel names: layernorm3_bwd_v{VEC}_n{NV}_f32 (the launcher builds the same name). Blocks of
// 256 threads, dynamic shared memory 8 warps × 2 × 32·VEC·NV floats (48 KiB at 768 columns);
// rows of up to 768 float4 columns (512 scalar) fit 2 blocks per SM in registers (≤ 128 a
// thread, no spills with nvcc 13 for sm_90), longer ones get the registers of 1.
#define LAYERNORM3_BWD(VEC, NV)                                                                            \
    extern "C" __global__ void __launch_bounds__(256, ((VEC) == 4 ? (NV) <= 6 : (NV) <= 16) ? 2 : 1)       \
        layernorm3_bwd_v##VEC##_n##NV##_f32(const float* __restrict__ x, const float* __restrict__ gamma,   \
                                            const float* __restrict__ g, const float* __restrict__ mean,   \
                                            const float* __restrict__ rstd, float* __restrict__ dx,        \
                                            float* __restrict__ partial, long long rows, long long cols,   \
                                            float* __restrict__ dgamma, float* __restrict__ dbeta,         \
                                            int* counters) {                                               \
        CAMEL_PDL_WAIT();                                                                                  \
        ln3_bwd<VEC, NV>(x, gamma, g, mean, rstd, dx, partial, rows, cols, dgamma, dbeta, counters);       \
    }
LAYERNORM3_BWD(4, 1)
LAYERNORM3_BWD(4, 2)
LAYERNORM3_BWD(4, 3)
LAYERNORM3_BWD(4, 4)
LAYERNORM3_BWD(4, 6)
LAYERNORM3_BWD(4, 8)
LAYERNORM3_BWD(1, 1)
LAYERNORM3_BWD(1, 2)
LAYERNORM3_BWD(1, 4)
LAYERNORM3_BWD(1, 8)
LAYERNORM3_BWD(1, 16)
LAYERNORM3_BWD(1, 24)
LAYERNORM3_BWD(1, 32)

// dγ[c] = Σ_b partial[0, b, c], dβ[c] = Σ_b partial[1, b, c] for steps 3 and 4 when the grid
// cannot be all resident (ln3_fused_colsum sums them otherwise). Blocks of 8 × 64 threads:
// threadIdx.x picks one of 8 consecutive entries of the [2·cols] output (a 32-byte sector of a
// partial row), threadIdx.y sums the partial rows b ≡ y (mod 64) in order, then thread y = 0 adds
// the 64 sums in y order from shared memory: the same order on every run. The kernel is bound by
// its latency (a cold round trip to DRAM, the barrier and the ordered sum), not by its number of
// blocks, hence the sum inside the backward where the grid allows.
// T: the element type of dγ and dβ (each sum rounds once as stored): layernorm3_param_grad_{dtype}.
template <typename T>
__device__ __forceinline__ void ln3_param_grad(const float* __restrict__ partial, T* __restrict__ dgamma,
                                               T* __restrict__ dbeta, long long nblocks, long long cols) {
    CAMEL_PDL_WAIT();
    __shared__ float part[64][9];
    const long long k = (long long)blockIdx.x * 8 + threadIdx.x;  // index into [dγ | dβ]
    float s = 0.0f;
    if (k < 2 * cols) {
        const long long which = k / cols, col = k % cols;
        const float* p = partial + which * nblocks * cols + col;
#pragma unroll 4
        for (long long b = threadIdx.y; b < nblocks; b += 64) s += p[b * cols];
    }
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && k < 2 * cols) {
        float t = 0.0f;
#pragma unroll
        for (int y = 0; y < 64; ++y) t += part[y][threadIdx.x];
        (k < cols ? dgamma : dbeta)[k < cols ? k : k - cols] = camel::from_float<T>(t);
    }
}

#define LAYERNORM3_PARAM_GRAD(T, SUF)                                                                      \
    extern "C" __global__ void __launch_bounds__(512) layernorm3_param_grad_##SUF(                         \
        const float* __restrict__ partial, T* __restrict__ dgamma, T* __restrict__ dbeta, long long nblocks, \
        long long cols) {                                                                                  \
        ln3_param_grad<T>(partial, dgamma, dbeta, nblocks, cols);                                          \
    }
LAYERNORM3_PARAM_GRAD(float, f32)
LAYERNORM3_PARAM_GRAD(__half, f16)
LAYERNORM3_PARAM_GRAD(__nv_bfloat16, bf16)
