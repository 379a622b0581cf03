// LayerNorm over the last dim, step 2 (step 1 is this kernel too), y = (x − mean)·rstd·γ + β
// with rstd = 1/√(var + eps), var biased (÷ cols), as PyTorch. Launchers:
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
