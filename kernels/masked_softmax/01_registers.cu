// The scaled, masked softmax of attention scores [.., Tq, Tk] (and its backward) in one pass
// over each row: the scale, the causal mask and the softmax that the naive attention would
// otherwise run as three kernels over its Tq × Tk scores. Row r is query i = r % Tq; with the
// causal mask it sees the keys j ≤ i + (Tk − Tq), the first `n` of the row.
//
// The row lives in registers as in softmax step 3 (softmax/softmax.cuh, shapes from
// common/rows.cuh's CAMEL_ROW3_SHAPES, picked by the same `softmax3_shape`): a group of G threads
// loads the visible part of its row once, scaled, with −inf in the masked slots, so the masked
// keys are neither read nor summed (exp(−inf) = 0) and are written as 0 · (1 / Σ), which is 0,
// or NaN when the row holds a NaN, as PyTorch's masked_fill then softmax gives. The backward
// holds the visible parts of y and g and writes 0 on the masked keys. Rows longer than the
// registers hold (> 16384 keys) run a block per row with three passes over global memory
// (masked_softmax_block_f32 below).

#include "softmax/softmax.cuh"

// Keys row r sees: all `cols`, or (r % tq) + 1 + (cols − tq) with the causal mask.
__device__ __forceinline__ long long masked_visible(long long r, long long cols, long long tq, int causal) {
    return causal ? (r % tq) + 1 + (cols - tq) : cols;
}

// T: the element type of x and y (float, __half, __nv_bfloat16): the row widens to f32 registers
// as it loads and each output rounds once as it is stored (rows.cuh's ldv and stv).
template <int G, int VEC, int NV, typename T>
__device__ __forceinline__ void masked3_row(const T* __restrict__ x, T* __restrict__ y, long long rows,
                                            long long cols, long long tq, float scale, int causal) {
    __shared__ float scratch[32];
    constexpr int PER_BLOCK = G <= 32 ? 256 / G : 1;  // rows per block (blocks of 256 for G ≤ 32)
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const long long r = G <= 32 ? b * PER_BLOCK + threadIdx.x / G : b;
    const int lane = G <= 32 ? threadIdx.x % G : threadIdx.x;
    // A group past the last row still takes part in its warp's shuffles (full mask), with no loads.
    const bool live = r < rows;
    if (G > 32 && !live) return;  // the whole block: uniform
    const T* xr = x + (live ? r : 0) * cols;
    T* yr = y + (live ? r : 0) * cols;
    const long long n = live ? masked_visible(r, cols, tq, causal) : 0;
    float v[NV * VEC];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < n) {
            camel::ldv<false, VEC>(xr + c, v + VEC * i);
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[VEC * i + k] = c + k < n ? v[VEC * i + k] * scale : -INFINITY;
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[VEC * i + k] = -INFINITY;
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, v[VEC * i + k]);  // NaN reaches the sum instead
    }
    mx = camel::g_reduce<G>(1, mx, scratch);
    const float mref = mx == -INFINITY ? 0.0f : mx;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV * VEC; ++i) {
        v[i] = expf(v[i] - mref);
        s += v[i];
    }
    s = camel::g_reduce<G>(0, s, scratch);
    if (!live) return;
    const float inv = camel::rcp_sum(s);
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < cols) {
            float o[VEC];
#pragma unroll
            for (int k = 0; k < VEC; ++k) o[k] = v[VEC * i + k] * inv;
            camel::stv<false, VEC>(yr + c, o);
        }
    }
}

// T as in masked3_row: y, g and dx of T, dx computed in f32 and rounded once.
template <int G, int VEC, int NV, typename T>
__device__ __forceinline__ void masked3_bwd_row(const T* __restrict__ y, const T* __restrict__ g,
                                                T* __restrict__ dx, long long rows, long long cols, long long tq,
                                                float scale, int causal) {
    __shared__ float scratch[32];
    constexpr int PER_BLOCK = G <= 32 ? 256 / G : 1;
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const long long r = G <= 32 ? b * PER_BLOCK + threadIdx.x / G : b;
    const int lane = G <= 32 ? threadIdx.x % G : threadIdx.x;
    const bool live = r < rows;
    if (G > 32 && !live) return;
    const long long base = (live ? r : 0) * cols;
    const long long n = live ? masked_visible(r, cols, tq, causal) : 0;
    float yv[NV * VEC], gv[NV * VEC];
    float dot = 0.0f;  // Σ g·y over this thread's visible keys
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < n) {
            camel::ldv<false, VEC>(y + base + c, yv + VEC * i);
            camel::ldv<false, VEC>(g + base + c, gv + VEC * i);
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            if (c + k >= n) yv[VEC * i + k] = gv[VEC * i + k] = 0.0f;  // masked: adds nothing
            dot += gv[VEC * i + k] * yv[VEC * i + k];
        }
    }
    dot = camel::g_reduce<G>(0, dot, scratch);
    if (!live) return;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
#pragma unroll
        for (int k = 0; k < VEC; ++k)
            gv[VEC * i + k] = c + k < n ? scale * yv[VEC * i + k] * (gv[VEC * i + k] - dot) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < cols) camel::stv<false, VEC>(dx + base + c, gv + VEC * i);
    }
}

// Kernel names: masked_softmax3_g{G}_v{VEC}_n{NV}_{T} and masked_softmax3_bwd_g{G}_v{VEC}_n{NV}_{T}
// for T in f32, f16, bf16, one pair per shape of CAMEL_ROW3_SHAPES; the launcher builds the same
// names.
#define MASKED3_T(G, VEC, NV, T, SUF)                                                                     \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G)                                       \
        masked_softmax3_g##G##_v##VEC##_n##NV##_##SUF(const T* __restrict__ x, T* __restrict__ y,          \
                                                      long long rows, long long cols, long long tq,       \
                                                      float scale, int causal) {                          \
        CAMEL_PDL_WAIT();                                                                                 \
        masked3_row<G, VEC, NV>(x, y, rows, cols, tq, scale, causal);                                     \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G)                                       \
        masked_softmax3_bwd_g##G##_v##VEC##_n##NV##_##SUF(const T* __restrict__ y, const T* __restrict__ g, \
                                                          T* __restrict__ dx, long long rows, long long cols, \
                                                          long long tq, float scale, int causal) {        \
        CAMEL_PDL_WAIT();                                                                                 \
        masked3_bwd_row<G, VEC, NV>(y, g, dx, rows, cols, tq, scale, causal);                             \
    }

#define MASKED3(G, VEC, NV)                                                                               \
    MASKED3_T(G, VEC, NV, float, f32)                                                                     \
    MASKED3_T(G, VEC, NV, __half, f16)                                                                    \
    MASKED3_T(G, VEC, NV, __nv_bfloat16, bf16)

CAMEL_ROW3_SHAPES(MASKED3)

// Rows longer than the registers hold: a block per row, three passes (max, Σ exp, write) over
// the visible keys, the masked keys written as 0 · (1 / Σ).
extern "C" __global__ void masked_softmax_block_f32(const float* __restrict__ x, float* __restrict__ y,
                                                    long long rows, long long cols, long long tq, float scale,
                                                    int causal) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];
    const long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const long long n = masked_visible(r, cols, tq, causal);
    float mx = -INFINITY;
    for (long long c = threadIdx.x; c < n; c += blockDim.x) mx = fmaxf(mx, xr[c] * scale);
    mx = camel::block_max(mx, scratch);
    const float mref = mx == -INFINITY ? 0.0f : mx;
    float s = 0.0f;
    for (long long c = threadIdx.x; c < n; c += blockDim.x) s += expf(xr[c] * scale - mref);
    s = camel::block_sum(s, scratch);
    const float inv = 1.0f / s;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x)
        yr[c] = (c < n ? expf(xr[c] * scale - mref) : 0.0f) * inv;
}

extern "C" __global__ void masked_softmax_bwd_block_f32(const float* __restrict__ y, const float* __restrict__ g,
                                                        float* __restrict__ dx, long long rows, long long cols,
                                                        long long tq, float scale, int causal) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];
    const long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* yr = y + r * cols;
    const float* gr = g + r * cols;
    float* dr = dx + r * cols;
    const long long n = masked_visible(r, cols, tq, causal);
    float dot = 0.0f;
    for (long long c = threadIdx.x; c < n; c += blockDim.x) dot += gr[c] * yr[c];
    dot = camel::block_sum(dot, scratch);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) dr[c] = c < n ? scale * yr[c] * (gr[c] - dot) : 0.0f;
}
