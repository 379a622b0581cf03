// LayerNorm steps 3 and 4 share this row code: the row lives in registers. Forward: a warp
// loads its row once into registers (NV float4 or scalars per lane, compile time, so rows up to
// 1024 columns), takes the mean (one shuffle sum), the variance as Σ(x − mean)² from the registers
// (the exact two-pass formula, no Welford merges) and writes y from the registers; step 2 reads x
// twice and divides once per float4 in Welford's update. Backward: the row and dγ/dβ in
// registers (03_row_registers.cu says how; 04_streaming.cu gives a row a pair of warps).
#pragma once

#include "common/rows.cuh"

// CS: streaming loads of x and stores of y (step 4 of the forward; step 3 is CS = false).
// T: the element type of x, γ, β and y (float, __half, __nv_bfloat16), widened to f32 as loaded,
// y rounded once as stored (rows.cuh's ldv and stv); mean and rstd are f32 whatever T.
template <int VEC, int NV, bool CS = false, typename T = float>
__device__ __forceinline__ void ln3_fwd_row(const T* __restrict__ x, const T* __restrict__ gamma,
                                            const T* __restrict__ beta, T* __restrict__ y,
                                            float* __restrict__ mean, float* __restrict__ rstd, long long rows,
                                            long long cols, float eps) {
    long long r = camel::group_row<true>();
    if (r >= rows) return;  // whole warps: a warp owns a row
    const int lane = threadIdx.x % 32;
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float v[NV * VEC];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * 32 + lane) * VEC;
        if (c < cols) {
            camel::ldv<CS, VEC>(xr + c, v + VEC * i);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[VEC * i + k] = 0.0f;
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) s += v[VEC * i + k];
    }
    const float mu = camel::warp_reduce(0, s) / (float)cols;
    float q = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * 32 + lane) * VEC;
        if (c < cols) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                float d = v[VEC * i + k] - mu;
                q += d * d;
            }
        }
    }
    const float rs = 1.0f / sqrtf(camel::warp_reduce(0, q) / (float)cols + eps);
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * 32 + lane) * VEC;
        if (c < cols) {
            float g[VEC], b[VEC], o[VEC];
            camel::ldv<false, VEC>(gamma + c, g);
            camel::ldv<false, VEC>(beta + c, b);
#pragma unroll
            for (int k = 0; k < VEC; ++k) o[k] = (v[VEC * i + k] - mu) * rs * g[k] + b[k];
            camel::stv<CS, VEC>(yr + c, o);
        }
    }
    if (lane == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

// One row of the backward from the registers (steps 3 and 4): xv = x, gv = g of this thread's
// columns (zeros past cols) in, dx written; adds the row's g·x̂ and g into this thread's dγ/dβ
// sums. The row belongs to a group of G threads: G = 32, a warp (step 3), or G = 64, a pair of
// warps (step 4), whose two warp sums meet in `xch` (this pair's [2 parities][2 warps] of
// (Σ ĝ, Σ ĝ·x̂)) behind a __syncthreads (the block's pairs run their rows in lockstep, see
// ln3_bwd); `par` alternates per row, so a warp cannot overwrite a sum its partner has not read
// yet (it would first have to pass the next row's barrier, which the partner reaches only after
// reading). Both warps add the two halves in the same order: the same bits. t: the thread's
// index in its group; `active` false: a pair past the last row (no store). wreg: step 4's γ.
// T: the element type of γ and dx (dx rounds once as stored).
template <int VEC, int NV, int G = 32, typename T = float>
__device__ __forceinline__ void ln3_bwd_row(float (&xv)[NV * VEC], float (&gv)[NV * VEC], float (&ag)[NV * VEC],
                                            float (&ab)[NV * VEC], const T* __restrict__ gamma,
                                            T* __restrict__ dr, float mu, float rs, float inv_cols,
                                            long long cols, int t, float2 (*xch)[2] = nullptr, int par = 0,
                                            bool active = true, const float* wreg = nullptr) {
    // x → x̂, g → ĝ = g·γ in place; dγ, dβ need g and x̂ only, so they accumulate here
    float s1 = 0.0f, s2 = 0.0f;  // Σ ĝ, Σ ĝ·x̂ over this thread's columns
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + t) * VEC;
        if (c < cols) {
            float wv[VEC];
            if (G == 64) {  // step 4: this thread's γ, loaded once before its first row
#pragma unroll
                for (int k = 0; k < VEC; ++k) wv[k] = wreg[VEC * i + k];
            } else {
                camel::ldv<false, VEC>(gamma + c, wv);  // L1/L2: γ is small
            }
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const int j = VEC * i + k;
                const float xh = (xv[j] - mu) * rs;
                ag[j] += gv[j] * xh;
                ab[j] += gv[j];
                const float h = gv[j] * wv[k];
                xv[j] = xh;
                gv[j] = h;
                s1 += h;
                s2 += h * xh;
            }
        }
    }
    s1 = camel::warp_sum(s1);
    s2 = camel::warp_sum(s2);
    if (G == 64) {
        const int h = t / 32;
        if (t % 32 == 0) xch[par][h] = make_float2(s1, s2);
        __syncthreads();  // the whole block: its pairs are in the same round (see ln3_bwd)
        const float2 a = xch[par][0], b = xch[par][1];
        s1 = a.x + b.x;
        s2 = a.y + b.y;
    }
    s1 *= inv_cols;
    s2 *= inv_cols;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + t) * VEC;
        if (active && c < cols) {
            float o[VEC];
#pragma unroll
            for (int k = 0; k < VEC; ++k) o[k] = rs * (gv[VEC * i + k] - s1 - xv[VEC * i + k] * s2);
            camel::stv<false, VEC>(dr + c, o);
        }
    }
}

// The block's partial row of the step-3 backward: every warp stores its registers to its own
// slice of `slices` (dynamic shared memory, W × 2 × CAP floats: dγ then dβ), one barrier, then
// each thread adds the W slices of its columns in warp order (deterministic) and writes
// partial[0, blockIdx.x, :] (dγ) and partial[1, blockIdx.x, :] (dβ).

// Step 4 (G = 64): a slice per pair of warps, each warp storing its own columns of it.
template <int VEC, int NV, int G = 32>
__device__ __forceinline__ void ln3_bwd_block_partial(const float (&ag)[NV * VEC], const float (&ab)[NV * VEC],
                                                      float* slices, float* __restrict__ partial, long long cols) {
    constexpr int CAP = G * NV * VEC;
    const int t = threadIdx.x % G, w = threadIdx.x / G, W = blockDim.x / G;
    float* const mine = slices + w * 2 * CAP;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const int c = (i * G + t) * VEC;
        if (c < cols) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                mine[c + k] = ag[VEC * i + k];
                mine[CAP + c + k] = ab[VEC * i + k];
            }
        }
    }
    __syncthreads();
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        float sg = slices[c], sb = slices[CAP + c];
        for (int ww = 1; ww < W; ++ww) {
            sg += slices[ww * 2 * CAP + c];
            sb += slices[ww * 2 * CAP + CAP + c];
        }
        partial[(long long)blockIdx.x * cols + c] = sg;                      // dγ
        partial[((long long)gridDim.x + blockIdx.x) * cols + c] = sb;        // dβ
    }
}

// The column sum of the blocks' partial rows inside the step-3 backward (the launcher passes
// `counters` only when every block of the grid is resident at once; else null, and
// `layernorm3_param_grad_f32` runs after the kernel). Each block counts itself in once its
// partial row is written and waits until all have; then block q sums the entries 8q … 8q + 7 of
// [dγ | dβ] (one 32-byte sector of every partial row): thread t the partial rows b ≡ t / 8
// (mod 32) of entry t % 8, then thread t < 8 adds the 32 sums in order. The same order on every
// run (deterministic). Blocks of 256 threads. `counters` (2 ints) are zero at launch and left
// zero: the last block past the wait resets them. T: the element type of dγ and dβ (each sum
// rounds once as stored).
template <typename T>
__device__ __forceinline__ void ln3_fused_colsum(const float* __restrict__ partial, T* __restrict__ dgamma,
                                                 T* __restrict__ dbeta, int* counters, long long cols) {
    __shared__ float red[32][9];
    __threadfence();  // this block's partial row is visible before it counts itself in
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(counters, 1);
        while (camel::ld_acquire_gpu(counters) < (int)gridDim.x) __nanosleep(32);
    }
    __syncthreads();
    const int t = threadIdx.x;
    const long long nb = gridDim.x, n = 2 * cols;
    for (long long q = blockIdx.x; q * 8 < n; q += gridDim.x) {
        const long long e = q * 8 + t % 8;
        float sum = 0.0f;
        if (e < n) {
            const float* p = partial + (e / cols) * nb * cols + e % cols;
#pragma unroll 4
            for (long long b = t / 8; b < nb; b += 32) sum += __ldcg(p + b * cols);  // L2: other blocks wrote it
        }
        red[t / 8][t % 8] = sum;
        __syncthreads();
        if (t < 8 && e < n) {
            float tot = 0.0f;
#pragma unroll
            for (int r = 0; r < 32; ++r) tot += red[r][t];
            if (e < cols) dgamma[e] = camel::from_float<T>(tot);
            else dbeta[e - cols] = camel::from_float<T>(tot);
        }
        __syncthreads();
    }
    if (t == 0 && atomicAdd(counters + 1, 1) == (int)gridDim.x - 1) {
        counters[0] = 0;  // every block is past the wait: ready for the next launch
        counters[1] = 0;
    }
}

// The backward of steps 3 (G = 32: a warp per row) and 4 (G = 64: a pair of warps per row).
// T: the element type of x, γ, g, dx, dγ and dβ (widened as loaded, rounded once as stored); the
// statistics and the partial rows are f32.
template <int VEC, int NV, int G = 32, typename T = float>
__device__ __forceinline__ void ln3_bwd(const T* __restrict__ x, const T* __restrict__ gamma,
                                        const T* __restrict__ g, const float* __restrict__ mean,
                                        const float* __restrict__ rstd, T* __restrict__ dx,
                                        float* __restrict__ partial, long long rows, long long cols,
                                        T* __restrict__ dgamma, T* __restrict__ dbeta, int* counters) {
    static_assert(G == 32 || G == 64, "a warp or a pair of warps per row");
    constexpr int PER_LANE = NV * VEC;         // floats of a row a thread holds
    extern __shared__ __align__(16) float ln3_slices[];  // groups × 2 × G·PER_LANE: their dγ/dβ
    __shared__ float2 xch[G == 64 ? 8 : 1][2][2];        // step 4: each pair's two warp sums
    const int t = threadIdx.x % G, w = threadIdx.x / G, W = blockDim.x / G;  // W ≤ 8 for G = 64
    float ag[PER_LANE], ab[PER_LANE];  // this thread's Σ g·x̂ (dγ) and Σ g (dβ) over its rows
#pragma unroll
    for (int j = 0; j < PER_LANE; ++j) ag[j] = ab[j] = 0.0f;
    const float inv_cols = 1.0f / (float)cols;
    // step 4: a thread's columns are the same in every row, and its half-size arrays leave room
    // for their γ in registers (12 at 768 columns), so γ is read once, not once per row
    float wg[G == 64 ? PER_LANE : 1];
    if (G == 64) {
#pragma unroll
        for (int i = 0; i < NV; ++i) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const long long c = (long long)(i * G + t) * VEC + k;
                wg[VEC * i + k] = c < cols ? camel::to_float(gamma[c]) : 0.0f;
            }
        }
    }
    int par = 0;
    // Step 4: the block's pairs go through the rows in lockstep (r0, the round's first row, is the
    // same for the whole block), so the pair exchange can wait on __syncthreads; a pair past the
    // last row rides along on zeros and stores nothing.
    const long long first = (long long)blockIdx.x * W + (G == 64 ? 0 : w), stride = (long long)gridDim.x * W;
    for (long long r0 = first; r0 < rows; r0 += stride, par ^= 1) {
        const long long r = G == 64 ? r0 + w : r0;
        const bool active = G == 32 || r < rows;
        const T* xr = x + r * cols;
        const T* gr = g + r * cols;
        const float mu = active ? mean[r] : 0.0f, rs = active ? rstd[r] : 0.0f;
        float xv[PER_LANE], gv[PER_LANE];
        // element j·VEC + k of a thread is column (j·G + t)·VEC + k: each load instruction of a
        // warp is contiguous
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const long long c = (long long)(i * G + t) * VEC;
            if (active && c < cols) {
                camel::ldv<false, VEC>(xr + c, xv + VEC * i);
                camel::ldv<false, VEC>(gr + c, gv + VEC * i);
            } else {
#pragma unroll
                for (int k = 0; k < VEC; ++k) xv[VEC * i + k] = gv[VEC * i + k] = 0.0f;
            }
        }
        ln3_bwd_row<VEC, NV, G, T>(xv, gv, ag, ab, gamma, dx + r * cols, mu, rs, inv_cols, cols, t,
                                xch[G == 64 ? w : 0], par, active, wg);
    }
    ln3_bwd_block_partial<VEC, NV, G>(ag, ab, ln3_slices, partial, cols);
    if (counters != nullptr) ln3_fused_colsum(partial, dgamma, dbeta, counters, cols);
}
