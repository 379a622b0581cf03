// Softmax steps 3 and 4 share this row code: the row lives in registers. Step 2 reads the row
// once for the online (max, Σ exp) and once more (from L1/L2) for the write, pays an exp per
// element in each pass, and gives a whole warp to every row, however short. Here the row is loaded
// from global memory exactly once into registers (NV loads of VEC floats per thread, unrolled, a
// compile-time capacity), then the max, each exp once, the sum, and the stores from the
// registers: a plain max, no online rescaling. The row belongs to a group of G threads: G ≤ 32
// lanes of a warp (short rows pack 32/G rows per warp, shuffles limited to the group's width),
// or the whole block (G = blockDim.x ∈ {128 … 1024}, one shared-memory hop) for rows longer than
// 1024. Rows too long for the registers (> 16384 columns) stay on step 2; the launcher
// (`softmax3_f32`) picks (G, VEC, NV). The forward's arithmetic, not where its bytes are, bounds
// it on short rows, so its shape matters: exact NV (rows.cuh's shapes) and a kernel each for
// softmax and log-softmax keep every exp unconditional, side by side
// (docs/kernels/softmax.md).
// Element j of a thread's registers is column (j·G + lane)·VEC (+0..3): each load instruction of
// a group is contiguous, so a warp's loads coalesce.
#pragma once

#include "common/rows.cuh"

// camel::g_reduce<G> (rows.cuh): the sum or max over a group of G threads.

// CS: streaming loads of x and stores of y (step 4 of the forward; step 3 is CS = false).
// LOG: log-softmax, else softmax (a kernel each: see the kernel names below).
// T: the element type of x and y (float, __half, __nv_bfloat16): the row widens to f32 registers
// as it loads, and each output rounds once as it is stored (rows.cuh's ldv and stv).
template <int G, int VEC, int NV, bool CS, bool LOG, typename T = float>
__device__ __forceinline__ void softmax3_row(const T* __restrict__ x, T* __restrict__ y, long long rows,
                                             long long cols) {
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
    float v[NV * VEC];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (live && c < cols) {
            camel::ldv<CS, VEC>(xr + c, v + VEC * i);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[VEC * i + k] = -INFINITY;
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, v[VEC * i + k]);  // NaN reaches the sum instead
    }
    mx = camel::g_reduce<G>(1, mx, scratch);
    const float mref = mx == -INFINITY ? 0.0f : mx;  // an all −inf row: exp(−inf) = 0, then 0/0
    // Every exp unconditional, side by side (the padding is −inf: exp adds 0). Short rows have
    // an exact NV (rows.cuh), so only the last slot holds padding; a per-lane test skipping the
    // padding's exps would make the compiler put each exp in a branch of its own, one after
    // another (dev/labs/exp_lab.cu).
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV * VEC; ++i) {
        const float e = expf(v[i] - mref);
        s += e;
        if (!LOG) v[i] = e;
    }
    s = camel::g_reduce<G>(0, s, scratch);
    if (!live) return;
    // log: (x − max) − log Σ, in that order: folding max + log Σ first rounds at the ulp of the
    // max, far above the tolerance of the CPU-compared tests with large logits.
    // 1 / Σ by camel::rcp_sum (rows.cuh): the same bits as 1.0f / s for a sum ≥ 1, without the
    // slow-path test and call.
    const float lse = LOG ? logf(s) : 0.0f, inv = LOG ? 0.0f : camel::rcp_sum(s);
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < cols) {
            float o[VEC];
#pragma unroll
            for (int k = 0; k < VEC; ++k) o[k] = LOG ? (v[VEC * i + k] - mref) - lse : v[VEC * i + k] * inv;
            camel::stv<CS, VEC>(yr + c, o);
        }
    }
}

// The backward of steps 3 and 4: the rows of y and g live in registers, with the forward's
// layout and shapes. A group of G threads loads its row of y and g from global memory exactly once
// (NV loads of VEC floats each, unrolled and independent), reduces the dot product over the
// group, and writes dx = y ⊙ (g − Σ g⊙y) (softmax) or g − exp(y)·Σ g (log-softmax) from the
// registers. Same (G, VEC, NV) as the forward for the same row (`softmax3_shape`), twice the
// registers (y and g: at most 64 floats a thread). Every output is computed before the first
// store: with the log-softmax's exp inside each store's `if`, the stores leave one exp apart.
// T: the element type of y, g and dx, widened to f32 as loaded; dx rounds once as stored.
template <int G, int VEC, int NV, typename T = float>
__device__ __forceinline__ void softmax3_bwd_row(const T* __restrict__ y, const T* __restrict__ g,
                                                 T* __restrict__ dx, long long rows, long long cols,
                                                 int log_out) {
    __shared__ float scratch[32];
    constexpr int PER_BLOCK = G <= 32 ? 256 / G : 1;
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const long long r = G <= 32 ? b * PER_BLOCK + threadIdx.x / G : b;
    const int lane = G <= 32 ? threadIdx.x % G : threadIdx.x;
    // A group past the last row still takes part in its warp's shuffles (full mask), with no loads.
    const bool live = r < rows;
    if (G > 32 && !live) return;  // the whole block: uniform
    const long long base = (live ? r : 0) * cols;
    float yv[NV * VEC], gv[NV * VEC];
    float dot = 0.0f;  // Σ g·y (softmax) or Σ g (log-softmax) over this thread's columns
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (live && c < cols) {
            camel::ldv<false, VEC>(y + base + c, yv + VEC * i);
            camel::ldv<false, VEC>(g + base + c, gv + VEC * i);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) yv[VEC * i + k] = gv[VEC * i + k] = 0.0f;  // adds nothing
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) dot += log_out ? gv[VEC * i + k] : gv[VEC * i + k] * yv[VEC * i + k];
    }
    dot = camel::g_reduce<G>(0, dot, scratch);
    if (!live) return;
    // Every output first (padding included: harmless, never stored), then the stores in one
    // burst. Computed inside each store's `if`, the log-softmax's exp made the compiler branch
    // around every element, and the stores trickled out one exp apart.
#pragma unroll
    for (int i = 0; i < NV * VEC; ++i) gv[i] = log_out ? gv[i] - expf(yv[i]) * dot : yv[i] * (gv[i] - dot);
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < cols) camel::stv<false, VEC>(dx + base + c, gv + VEC * i);
    }
}

// Step 3's entry with programmatic dependent launch (common/pdl.cuh): thread 0 asks L2 for the
// block's rows of a (and b, if not null) before the PDL wait, and the kernel triggers its
// successor right after it, so the next kernel's first blocks fetch their rows while this one's
// last blocks finish. The forward does it only for short rows (G ≤ 16, at most 16 rows of < 128
// vector elements a block): for larger blocks it costs more than it gains. Step 4 keeps the
// plain wait.
// T is deduced from a alone (b may be nullptr).
template <class T>
struct softmax3_same {
    using type = T;
};
template <int G, typename T>
__device__ __forceinline__ void softmax3_prefetch(const T* a, const typename softmax3_same<T>::type* b, long long rows,
                                                  long long cols) {
    if (threadIdx.x != 0) return;
    constexpr long long PER_BLOCK = G <= 32 ? 256 / G : 1;
    const long long r0 = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * PER_BLOCK;
    camel::l2_prefetch_rows(a, r0, PER_BLOCK, rows, cols);
    if (b != nullptr) camel::l2_prefetch_rows(b, r0, PER_BLOCK, rows, cols);
}

// Kernel names: softmax3_g{G}_v{VEC}_n{NV}_{dtype} and log_softmax3_… (forward, step 3),
// softmax3_bwd_g{G}_v{VEC}_n{NV}_{dtype} (backward, both: the argument log_out picks) and
// softmax4_… / log_softmax4_… (forward, step 4, f32 only); dtype is f32, f16 or bf16, the element
// type of every tensor argument. The launchers build the same names. Softmax and log-softmax are
// separate forward kernels, each one body (one kernel behind the argument runs slower on short
// rows).
#define SOFTMAX3_FWD(NAME, G, VEC, NV, CS, LOG, T, SUF)                                                    \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G)                                       \
        NAME##_g##G##_v##VEC##_n##NV##_##SUF(const T* __restrict__ x, T* __restrict__ y, long long rows,   \
                                             long long cols) {                                            \
        if (!CS && G <= 16) softmax3_prefetch<G, T>(x, nullptr, rows, cols);                              \
        CAMEL_PDL_WAIT();                                                                                 \
        if (!CS && G <= 16) CAMEL_PDL_TRIGGER();                                                          \
        softmax3_row<G, VEC, NV, CS, LOG, T>(x, y, rows, cols);                                           \
    }

#define SOFTMAX3_BWD(G, VEC, NV, T, SUF)                                                                  \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G)                                       \
        softmax3_bwd_g##G##_v##VEC##_n##NV##_##SUF(const T* __restrict__ y, const T* __restrict__ g,       \
                                                   T* __restrict__ dx, long long rows, long long cols,     \
                                                   int log_out) {                                         \
        softmax3_prefetch<G, T>(y, g, rows, cols);                                                        \
        CAMEL_PDL_WAIT();                                                                                 \
        CAMEL_PDL_TRIGGER();                                                                              \
        softmax3_bwd_row<G, VEC, NV, T>(y, g, dx, rows, cols, log_out);                                   \
    }
