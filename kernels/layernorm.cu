// LayerNorm over the last dim (memory-bound issue), y = (x − mean)·rstd·γ + β with
// rstd = 1/√(var + eps), var biased (÷ cols), as PyTorch. Launchers:
// crates/camel-cuda/src/kernels/layernorm.rs. A warp owns a row (8 rows per block of 256), so
// nothing waits on __syncthreads in the forward; rows move as float4 when cols % 4 == 0.
//
// Forward: one Welford pass per lane (per float4 group when vectorized: the group's mean and
// M2 merged with Chan's formula, one division per 4 elements), lanes merged with shuffles, then
// the write pass re-reads the row from L1. Saves mean and rstd per row for the backward.
//
// Backward: with x̂ = (x − mean)·rstd and ĝ = g·γ,
//   dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)),  dγ = Σ_rows g·x̂,  dβ = Σ_rows g.
// Each warp walks rows (grid-stride) and accumulates dγ, dβ for the columns its lanes own in
// its own slice of shared memory (no atomics: deterministic); the block then sums its warps
// into one partial row per block, and a second small kernel sums the partials per column.
#include "common/rows.cuh"

template <bool VEC>
__device__ __forceinline__ void ln_fwd_row(const float* __restrict__ x, const float* __restrict__ gamma,
                                           const float* __restrict__ beta, float* __restrict__ y,
                                           float* __restrict__ mean, float* __restrict__ rstd, long long rows,
                                           long long cols, float eps) {
    long long r = camel::group_row<true>();
    if (r >= rows) return;
    const int lane = threadIdx.x % 32;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float n = 0.0f, mu = 0.0f, m2 = 0.0f;
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (long long c = lane; c < cols / 4; c += 32) {
            float4 v = x4[c];
            float gm = ((v.x + v.y) + (v.z + v.w)) * 0.25f;
            float dx = v.x - gm, dy = v.y - gm, dz = v.z - gm, dw = v.w - gm;
            camel::welford_merge(n, mu, m2, 4.0f, gm, (dx * dx + dy * dy) + (dz * dz + dw * dw));
        }
    } else {
        for (long long c = lane; c < cols; c += 32) camel::welford_add(n, mu, m2, xr[c]);
    }
    camel::warp_welford(n, mu, m2);
    // the butterfly is not symmetric for Welford: take lane 0's result everywhere
    mu = __shfl_sync(camel::FULL_MASK, mu, 0);
    m2 = __shfl_sync(camel::FULL_MASK, m2, 0);
    float rs = 1.0f / sqrtf(m2 / (float)cols + eps);
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const float4* g4 = reinterpret_cast<const float4*>(gamma);
        const float4* b4 = reinterpret_cast<const float4*>(beta);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long c = lane; c < cols / 4; c += 32) {
            float4 v = x4[c], g = g4[c], b = b4[c];
            y4[c] = make_float4((v.x - mu) * rs * g.x + b.x, (v.y - mu) * rs * g.y + b.y, (v.z - mu) * rs * g.z + b.z,
                                (v.w - mu) * rs * g.w + b.w);
        }
    } else {
        for (long long c = lane; c < cols; c += 32) yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    }
    if (lane == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

extern "C" __global__ void layernorm_fwd_f32(const float* __restrict__ x, const float* __restrict__ gamma,
                                             const float* __restrict__ beta, float* __restrict__ y,
                                             float* __restrict__ mean, float* __restrict__ rstd, long long rows,
                                             long long cols, float eps) {
    CAMEL_PDL_WAIT();
    ln_fwd_row<false>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
}
extern "C" __global__ void layernorm_fwd_vec_f32(const float* __restrict__ x, const float* __restrict__ gamma,
                                                 const float* __restrict__ beta, float* __restrict__ y,
                                                 float* __restrict__ mean, float* __restrict__ rstd, long long rows,
                                                 long long cols, float eps) {
    CAMEL_PDL_WAIT();
    ln_fwd_row<true>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
}

// Dynamic shared memory: (blockDim.x / 32) × 2 × cols floats. partial: [2, gridDim.x, cols].
template <bool VEC>
__device__ __forceinline__ void ln_bwd(const float* __restrict__ x, const float* __restrict__ gamma,
                                       const float* __restrict__ g, const float* __restrict__ mean,
                                       const float* __restrict__ rstd, float* __restrict__ dx,
                                       float* __restrict__ partial, long long rows, long long cols) {
    extern __shared__ float acc[];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, W = blockDim.x / 32;
    float* dg = acc + (long long)w * 2 * cols;
    float* db = dg + cols;
    for (long long c = lane; c < 2 * cols; c += 32) dg[c] = 0.0f;  // this warp's own slice
    __syncwarp();
    const float inv_cols = 1.0f / (float)cols;
    for (long long r = (long long)blockIdx.x * W + w; r < rows; r += (long long)gridDim.x * W) {
        const float* xr = x + r * cols;
        const float* gr = g + r * cols;
        float* dr = dx + r * cols;
        const float mu = mean[r], rs = rstd[r];
        float s1 = 0.0f, s2 = 0.0f;  // Σ ĝ, Σ ĝ·x̂
        if (VEC) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            const float4* g4 = reinterpret_cast<const float4*>(gr);
            const float4* w4 = reinterpret_cast<const float4*>(gamma);
            for (long long c = lane; c < cols / 4; c += 32) {
                float4 v = x4[c], a = g4[c], k = w4[c];
                float h0 = a.x * k.x, h1 = a.y * k.y, h2 = a.z * k.z, h3 = a.w * k.w;
                s1 += (h0 + h1) + (h2 + h3);
                s2 += (h0 * (v.x - mu) + h1 * (v.y - mu)) + (h2 * (v.z - mu) + h3 * (v.w - mu));
            }
        } else {
            for (long long c = lane; c < cols; c += 32) {
                float h = gr[c] * gamma[c];
                s1 += h;
                s2 += h * (xr[c] - mu);
            }
        }
        s1 = camel::warp_sum(s1) * inv_cols;
        s2 = camel::warp_sum(s2) * rs * inv_cols;
        if (VEC) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            const float4* g4 = reinterpret_cast<const float4*>(gr);
            const float4* w4 = reinterpret_cast<const float4*>(gamma);
            float4* d4 = reinterpret_cast<float4*>(dr);
            float4* dg4 = reinterpret_cast<float4*>(dg);
            float4* db4 = reinterpret_cast<float4*>(db);
            for (long long c = lane; c < cols / 4; c += 32) {
                float4 v = x4[c], a = g4[c], k = w4[c];
                float4 xh = make_float4((v.x - mu) * rs, (v.y - mu) * rs, (v.z - mu) * rs, (v.w - mu) * rs);
                d4[c] = make_float4(rs * (a.x * k.x - s1 - xh.x * s2), rs * (a.y * k.y - s1 - xh.y * s2),
                                    rs * (a.z * k.z - s1 - xh.z * s2), rs * (a.w * k.w - s1 - xh.w * s2));
                float4 pg = dg4[c], pb = db4[c];
                dg4[c] = make_float4(pg.x + a.x * xh.x, pg.y + a.y * xh.y, pg.z + a.z * xh.z, pg.w + a.w * xh.w);
                db4[c] = make_float4(pb.x + a.x, pb.y + a.y, pb.z + a.z, pb.w + a.w);
            }
        } else {
            for (long long c = lane; c < cols; c += 32) {
                float a = gr[c], xh = (xr[c] - mu) * rs;
                dr[c] = rs * (a * gamma[c] - s1 - xh * s2);
                dg[c] += a * xh;
                db[c] += a;
            }
        }
    }
    __syncthreads();
    for (long long c = threadIdx.x; c < 2 * cols; c += blockDim.x) {
        float s = 0.0f;
        for (int k = 0; k < W; ++k) s += acc[(long long)k * 2 * cols + c];
        long long which = c / cols, col = c % cols;  // 0: dγ, 1: dβ
        partial[(which * gridDim.x + blockIdx.x) * cols + col] = s;
    }
}

extern "C" __global__ void layernorm_bwd_f32(const float* __restrict__ x, const float* __restrict__ gamma,
                                             const float* __restrict__ g, const float* __restrict__ mean,
                                             const float* __restrict__ rstd, float* __restrict__ dx,
                                             float* __restrict__ partial, long long rows, long long cols) {
    CAMEL_PDL_WAIT();
    ln_bwd<false>(x, gamma, g, mean, rstd, dx, partial, rows, cols);
}
extern "C" __global__ void layernorm_bwd_vec_f32(const float* __restrict__ x, const float* __restrict__ gamma,
                                                 const float* __restrict__ g, const float* __restrict__ mean,
                                                 const float* __restrict__ rstd, float* __restrict__ dx,
                                                 float* __restrict__ partial, long long rows, long long cols) {
    CAMEL_PDL_WAIT();
    ln_bwd<true>(x, gamma, g, mean, rstd, dx, partial, rows, cols);
}

// dγ[c] = Σ_b partial[0, b, c], dβ[c] = Σ_b partial[1, b, c], in block order (deterministic).
extern "C" __global__ void layernorm_param_grad_f32(const float* __restrict__ partial, float* __restrict__ dgamma,
                                                    float* __restrict__ dbeta, long long nblocks, long long cols) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(k, 2 * cols) {
        long long which = k / cols, col = k % cols;
        const float* p = partial + which * nblocks * cols + col;
        float s = 0.0f;
        for (long long b = 0; b < nblocks; ++b) s += p[b * cols];
        (which == 0 ? dgamma : dbeta)[col] = s;
    }
}

// ---------------------------------------------------------------------------------------------
// Step 3 of the forward (`CAMEL_LAYERNORM=3`): the row lives in registers. The
// kernel above reads x twice (Welford pass, then the write pass from L1) and divides once per
// float4 in Welford's update; on the H200 it got 2628 GB/s at 16384×768 (62 % of copy).
// Here a warp loads its row once into registers (NV float4 or scalars per lane, compile time,
// so rows up to 1024 columns), then takes the mean (one shuffle sum), the variance as Σ(x − mean)²
// from the registers (the exact two-pass formula, no Welford merges), and writes y from the
// registers. Longer rows stay on the kernel above. Measured (H200, 16384×768): 2606 → 3155 GB/s
// (74 % of copy; PyTorch 1536).
// CS: streaming loads of x and stores of y (step 4 of the forward; step 3 is CS = false).
template <int VEC, int NV, bool CS = false>
__device__ __forceinline__ void ln3_fwd_row(const float* __restrict__ x, const float* __restrict__ gamma,
                                            const float* __restrict__ beta, float* __restrict__ y,
                                            float* __restrict__ mean, float* __restrict__ rstd, long long rows,
                                            long long cols, float eps) {
    long long r = camel::group_row<true>();
    if (r >= rows) return;  // whole warps: a warp owns a row
    const int lane = threadIdx.x % 32;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float v[NV * VEC];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * 32 + lane) * VEC;
        if (c < cols) {
            if (VEC == 4) {
                float4 q = camel::ld4<CS>(xr + c);
                v[4 * i] = q.x;
                v[4 * i + 1] = q.y;
                v[4 * i + 2] = q.z;
                v[4 * i + 3] = q.w;
            } else {
                v[i] = camel::ld1<CS>(xr + c);
            }
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
            if (VEC == 4) {
                float4 g = *reinterpret_cast<const float4*>(gamma + c), b = *reinterpret_cast<const float4*>(beta + c);
                const float* w = v + 4 * i;
                camel::st4<CS>(yr + c, make_float4((w[0] - mu) * rs * g.x + b.x, (w[1] - mu) * rs * g.y + b.y,
                                                   (w[2] - mu) * rs * g.z + b.z, (w[3] - mu) * rs * g.w + b.w));
            } else {
                camel::st1<CS>(yr + c, (v[i] - mu) * rs * gamma[c] + beta[c]);
            }
        }
    }
    if (lane == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

// Step 4 of the forward (`CAMEL_LAYERNORM=4`, the default): step 3 with the cache-streaming
// hints on the row's load and store (ld.global.cs / st.global.cs: evict first; x is read once
// and y written once, γ and β stay cached). Same arithmetic and shapes as step 3 (the same
// results bit for bit). Measured (H100, 16384×768, streamed): 89–90 % of copy against step 3's
// 87 % over three calls (bench_memory; lab dev/labs/layernorm_lab.cu: 37.0 against 38.3 µs).

// Kernel names: layernorm3_fwd_v{VEC}_n{NV}_f32 and, step 4, layernorm4_fwd_v{VEC}_n{NV}_f32 (the
// launchers build the same names).
#define LAYERNORM3(VEC, NV)                                                                                \
    extern "C" __global__ void __launch_bounds__(256) layernorm3_fwd_v##VEC##_n##NV##_f32(                 \
        const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,      \
        float* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd, long long rows,          \
        long long cols, float eps) {                                                                        \
        CAMEL_PDL_WAIT();                                                                                   \
        ln3_fwd_row<VEC, NV>(x, gamma, beta, y, mean, rstd, rows, cols, eps);                              \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(256) layernorm4_fwd_v##VEC##_n##NV##_f32(                 \
        const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,      \
        float* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd, long long rows,          \
        long long cols, float eps) {                                                                        \
        CAMEL_PDL_WAIT();                                                                                   \
        ln3_fwd_row<VEC, NV, true>(x, gamma, beta, y, mean, rstd, rows, cols, eps);                        \
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

// ---------------------------------------------------------------------------------------------
// Step 3 of the backward (`CAMEL_LAYERNORM=3`; step 4 below is this with a pair of warps per row):
// the row in registers, dγ/dβ in registers. The backward above reads x, g and γ twice per row (the two sums, then the write
// pass from L1), adds each row's dγ/dβ into shared memory (a read-modify-write of 2·cols floats
// per row), and its column sum of the partials is one thread per column walking every block's
// partial row in a dependent chain (≈ 500 loads in a row at 16384×768): 39 % of copy on the
// H200. Here, for rows up to 1024 columns:
// - a warp owns a row at a time (grid-stride over rows, a few blocks per SM); each lane loads
//   its columns of x and g once (NV float4 or scalars, unrolled, all loads independent),
//   recomputes x̂ = (x − mean)·rstd from the saved statistics, takes Σ ĝ and Σ ĝ·x̂ (ĝ = g·γ)
//   with two warp sums and writes dx from the registers;
// - a lane owns the *same columns* in every row it visits, so it keeps its dγ, dβ partial sums
//   in registers across rows: no shared memory per row, no atomics;
// - at the end the block adds its warps' registers in warp order (each warp's own slice of
//   shared memory, one barrier) and writes one partial row per block, [2][nblocks][cols] as
//   the kernel above;
// - the partials are summed per column in a fixed order inside the kernel once every block has
//   written its own (ln3_fused_colsum, when the grid is all resident), or else by
//   `layernorm3_param_grad_f32` after it: 64 threads per column (each a short strided chain,
//   unrolled), then one thread adds the 64 sums in order: deterministic either way, and no long
//   dependent chain.
// Bytes that must move: x, g read, dx written (12 B/element) plus γ, mean, rstd and dγ/dβ.
// Longer rows stay on the kernel above.
// Measured (H100, copy 2988 GB/s, bench_memory, layernorm_bwd 16384×768): step 2 1450 GB/s (49 %)
// → step 3 2219 GB/s (74 % of copy, 83 % of a same-size copy), 2.27× PyTorch.
// One row of the backward from the registers (steps 3 and 4): xv = x, gv = g of this thread's
// columns (zeros past cols) in, dx written; adds the row's g·x̂ and g into this thread's dγ/dβ
// sums. The row belongs to a group of G threads: G = 32, a warp (step 3), or G = 64, a pair of
// warps (step 4), whose two warp sums meet in `xch` (this pair's [2 parities][2 warps] of
// (Σ ĝ, Σ ĝ·x̂)) behind a __syncthreads (the block's pairs run their rows in lockstep, see
// ln3_bwd); `par` alternates per row, so a warp cannot overwrite a sum its partner has not read
// yet (it would first have to pass the next row's barrier, which the partner reaches only after
// reading). Both warps add the two halves in the same order: the same bits. t: the thread's
// index in its group; `active` false: a pair past the last row (no store). wreg: step 4's γ.
template <int VEC, int NV, int G = 32>
__device__ __forceinline__ void ln3_bwd_row(float (&xv)[NV * VEC], float (&gv)[NV * VEC], float (&ag)[NV * VEC],
                                            float (&ab)[NV * VEC], const float* __restrict__ gamma,
                                            float* __restrict__ dr, float mu, float rs, float inv_cols,
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
            } else if (VEC == 4) {
                float4 q = *reinterpret_cast<const float4*>(gamma + c);  // L1/L2: γ is small
                wv[0] = q.x, wv[1 % VEC] = q.y, wv[2 % VEC] = q.z, wv[3 % VEC] = q.w;
            } else {
                wv[0] = gamma[c];
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
            if (VEC == 4) {
                *reinterpret_cast<float4*>(dr + c) = make_float4(o[0], o[1 % VEC], o[2 % VEC], o[3 % VEC]);
            } else {
                dr[c] = o[0];
            }
        }
    }
}

// The block's partial row of the step-3 backward: every warp stores its registers to its own
// slice of `slices` (dynamic shared memory, W × 2 × CAP floats: dγ then dβ), one barrier, then
// each thread adds the W slices of its columns in warp order (deterministic) and writes
// partial[0, blockIdx.x, :] (dγ) and partial[1, blockIdx.x, :] (dβ).
// The first form added the warps in turns into one shared row (W barriers, a warp at a time):
// the same sums bit for bit, but the block's tail was W times longer. Measured (H100, 16384×768,
// streamed, column sum included): bench_memory 63.7 → 61.7–62.4 µs (79 → 80–81 % of copy);
// lab dev/labs/layernorm_lab.cu 64.4 → 62.9.
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
// zero: the last block past the wait resets them.
// Why: the separate kernel costs its launch and ramp (~3 µs of ~62). Measured (H100, lab
// dev/labs/layernorm_lab.cu, 16384×768, streamed): 61.7–63.2 → 60.4–61.1 µs. A first fused form
// with a warp per entry and its lanes over the partial rows (each 4-byte read a 32-byte sector of
// its own, 8× the L2 traffic) was slower than the separate kernel: 63.3–66.0 µs.
__device__ __forceinline__ void ln3_fused_colsum(const float* __restrict__ partial, float* __restrict__ dgamma,
                                                 float* __restrict__ dbeta, int* counters, long long cols) {
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
            if (e < cols) dgamma[e] = tot;
            else dbeta[e - cols] = tot;
        }
        __syncthreads();
    }
    if (t == 0 && atomicAdd(counters + 1, 1) == (int)gridDim.x - 1) {
        counters[0] = 0;  // every block is past the wait: ready for the next launch
        counters[1] = 0;
    }
}

// The backward of steps 3 (G = 32: a warp per row) and 4 (G = 64: a pair of warps per row).
template <int VEC, int NV, int G = 32>
__device__ __forceinline__ void ln3_bwd(const float* __restrict__ x, const float* __restrict__ gamma,
                                        const float* __restrict__ g, const float* __restrict__ mean,
                                        const float* __restrict__ rstd, float* __restrict__ dx,
                                        float* __restrict__ partial, long long rows, long long cols,
                                        float* __restrict__ dgamma, float* __restrict__ dbeta, int* counters) {
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
                wg[VEC * i + k] = c < cols ? gamma[c] : 0.0f;
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
        const float* xr = x + r * cols;
        const float* gr = g + r * cols;
        const float mu = active ? mean[r] : 0.0f, rs = active ? rstd[r] : 0.0f;
        float xv[PER_LANE], gv[PER_LANE];
        // element j·VEC + k of a thread is column (j·G + t)·VEC + k: each load instruction of a
        // warp is contiguous
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const long long c = (long long)(i * G + t) * VEC;
            if (active && c < cols) {
                if (VEC == 4) {
                    float4 a = *reinterpret_cast<const float4*>(xr + c);
                    float4 b = *reinterpret_cast<const float4*>(gr + c);
                    xv[4 * i] = a.x, xv[4 * i + 1] = a.y, xv[4 * i + 2] = a.z, xv[4 * i + 3] = a.w;
                    gv[4 * i] = b.x, gv[4 * i + 1] = b.y, gv[4 * i + 2] = b.z, gv[4 * i + 3] = b.w;
                } else {
                    xv[i] = xr[c];
                    gv[i] = gr[c];
                }
            } else {
#pragma unroll
                for (int k = 0; k < VEC; ++k) xv[VEC * i + k] = gv[VEC * i + k] = 0.0f;
            }
        }
        ln3_bwd_row<VEC, NV, G>(xv, gv, ag, ab, gamma, dx + r * cols, mu, rs, inv_cols, cols, t,
                                xch[G == 64 ? w : 0], par, active, wg);
    }
    ln3_bwd_block_partial<VEC, NV, G>(ag, ab, ln3_slices, partial, cols);
    if (counters != nullptr) ln3_fused_colsum(partial, dgamma, dbeta, counters, cols);
}

// Variants of this step-3 backward tried and dropped (H100, 16384×768, streamed, column sum
// included; bench_memory and the lab dev/labs/layernorm_lab.cu):
// - cache-streaming hints on x, g and dx, as the forward's step 4: 0.5–1.2 µs slower than these
//   in three bench_memory calls, 0.3–1.9 µs faster in the lab (by how many buffer sets it
//   rotates): no reliable gain;
// - the next row staged in shared memory by cp.async while a warp works on the current one
//   (step 4 before, in the git history): 70 % of copy against 73 %;
// - dγ/dβ sums in each warp's shared memory instead of registers (80 registers, 3 blocks an
//   SM): 70.1 against 62.9 µs (spills, a read-modify-write per row);
// A kernel with dx only (no dγ/dβ) ran at 55.9 µs, 90 % of copy: the dγ/dβ sums cost ~4 µs
// here (128 registers against 72, and the block's partial row at the end) and ~3 µs in the
// separate column-sum kernel (its launch and a pass over the partials), ~1.5 µs with the column
// sum fused into this kernel (ln3_fused_colsum).
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

// ---------------------------------------------------------------------------------------------
// Step 4 of the backward (`CAMEL_LAYERNORM=4`, the default): step 3 with a PAIR of warps per
// row. Step 3's lane holds 24 floats each of x, g, dγ and dβ at 768 columns (128 registers,
// the most that lets 2 blocks of 256 share an SM); a kernel writing dx alone ran at 90 % of
// copy against step 3's 81 %, so the sums' registers and what they cost the loop were the gap.
// Here the row's 64 threads hold half as much each (12 floats of each at 768 columns), and
// their γ in registers, read once (86 registers, no spills). The row's two sums, Σ ĝ and
// Σ ĝ·x̂, are each warp's shuffle sum plus its partner's, met in shared memory behind one
// __syncthreads per round of rows (`ln3_bwd_row`). Everything else is step 3's: the block's
// partial row from one slice per pair, the column sum fused when the grid is all resident.
// Measured (H100, 16384×768, streamed, column sum fused): bench_memory 57.8–57.9 µs (87 % of
// copy, 92 % of a same-size copy) against step 3's 60.9–61.2 (82 %); lab dev/labs/layernorm_lab.cu
// 57.5 against 61.3. Forms measured on the way (lab): γ re-read per row 59.2 µs; 3 blocks an SM
// (80 registers, 8 bytes spilled) 60.1–60.6, 4 (64 registers, 100 bytes spilled) 75.5: kept at
// 2. The exchange first waited on a named barrier of the pair's 64 threads (bar.sync id, 64),
// the same speed, but compute-sanitizer racecheck reported hazards across the later
// __syncthreads (block partial, column sum) that small probes of the same barrier pattern did
// not reproduce. Unexplained, so not kept: the lockstep form is clean under racecheck,
// synccheck and memcheck, and no slower.
// On Hopper the kernel asks L2 for its first 4 rows of x and g before the PDL wait and triggers
// its successor right after it (kernels/common/pdl.cuh), and the launcher gives it the fewest blocks that
// keep the rounds (bwd_blocks: 256 at 16384 rows, 16 full rounds, rather than 264 and a half-idle
// 16th): bench_memory 56.0 → 55.3 µs (89.5 → 90.6 % of copy); lab 55.9 → 55.1.
// Kernel names: layernorm4_bwd_v{VEC}_n{NV}_f32 (NV loads of VEC floats per thread, a row of up
// to 64·VEC·NV columns; the launcher builds the same name). Blocks of 256 threads (4 pairs),
// dynamic shared memory 4 pairs × 2 × 64·VEC·NV floats (24 KiB at 768 columns).
#define LAYERNORM4_BWD(VEC, NV)                                                                            \
    extern "C" __global__ void __launch_bounds__(256, 2)                                                   \
        layernorm4_bwd_v##VEC##_n##NV##_f32(const float* __restrict__ x, const float* __restrict__ gamma,   \
                                            const float* __restrict__ g, const float* __restrict__ mean,   \
                                            const float* __restrict__ rstd, float* __restrict__ dx,        \
                                            float* __restrict__ partial, long long rows, long long cols,   \
                                            float* __restrict__ dgamma, float* __restrict__ dbeta,         \
                                            int* counters) {                                               \
        if (threadIdx.x == 0) { /* the block's first round: 4 rows of x and of g (kernels/common/pdl.cuh) */     \
            camel::l2_prefetch_rows(x, (long long)blockIdx.x * 4, 4, rows, cols);                          \
            camel::l2_prefetch_rows(g, (long long)blockIdx.x * 4, 4, rows, cols);                          \
        }                                                                                                  \
        CAMEL_PDL_WAIT();                                                                                  \
        CAMEL_PDL_TRIGGER();                                                                               \
        ln3_bwd<VEC, NV, 64>(x, gamma, g, mean, rstd, dx, partial, rows, cols, dgamma, dbeta, counters);   \
    }
LAYERNORM4_BWD(4, 1)
LAYERNORM4_BWD(4, 2)
LAYERNORM4_BWD(4, 3)
LAYERNORM4_BWD(4, 4)
LAYERNORM4_BWD(1, 1)
LAYERNORM4_BWD(1, 2)
LAYERNORM4_BWD(1, 4)
LAYERNORM4_BWD(1, 8)
LAYERNORM4_BWD(1, 12)
LAYERNORM4_BWD(1, 16)

// dγ[c] = Σ_b partial[0, b, c], dβ[c] = Σ_b partial[1, b, c] for step 3 when its grid cannot be
// all resident (ln3_fused_colsum sums them otherwise). Blocks of 8 × 64 threads: threadIdx.x picks one of 8 consecutive entries of the [2·cols] output (a
// 32-byte sector of a partial row), threadIdx.y sums the partial rows b ≡ y (mod 64) in order,
// then thread y = 0 adds the 64 sums in y order from shared memory: the same order on every run.
// The first form (32 × 16 threads, 2·cols/32 blocks) gave 48 blocks at 768 columns, a third of
// the H100's SMs, each thread a chain of 17 loads: 5.31 µs (ncu, caches flushed) for 1.6 MB.
// With 8 columns a block the grid is 192 blocks and each chain 4–5 loads, but it measured the
// same, 5.18 µs: the kernel is bound by its latency (a cold round trip to DRAM, the barrier and
// the ordered sum), not by the number of blocks; the sum inside the backward (ln3_fused_colsum)
// removed it where the grid allows.
extern "C" __global__ void __launch_bounds__(512) layernorm3_param_grad_f32(const float* __restrict__ partial,
                                                                            float* __restrict__ dgamma,
                                                                            float* __restrict__ dbeta,
                                                                            long long nblocks, long long cols) {
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
        (k < cols ? dgamma : dbeta)[k < cols ? k : k - cols] = t;
    }
}
