// Step 2: K and V tiles in shared memory, the FlashAttention-1 shape, f32, forward and backward.
//
// Forward. A block takes BR = 32 query rows of one head and walks the keys in tiles of BC = 32:
// the block loads a K tile and a V tile into shared memory once and all its rows use them, so a
// key is read from global memory once per 32 queries instead of once per query. Four threads (a
// quad) share a row, each holding D/4 of its features in registers (q, pre-scaled, and the
// output accumulator); a score is a quad sum of two shuffles. A thread's features are the
// float4 chunks qd, qd + 4, qd + 8, … so the four threads of a quad read 64 contiguous bytes of
// a tile row: no bank conflicts, and the eight quads of a warp read the same row (a broadcast).
// The online softmax runs per tile: the tile's max, one rescale of the accumulator per tile
// instead of per key, and exp2 with log2(e) folded into the scale. A causal block stops at the
// last tile its last row sees; a key past a row's bound scores −inf. Rows need 16-byte aligned
// starts (the launcher runs step 1 otherwise).
//
// Backward (the FlashAttention-2 recomputation, also step 1's backward). With P = softmax(S)
// recomputed from the saved log-sum-exp and Δ_i = Σ_d dO_id · O_id (attn_bwd_delta_f32):
//     dV = Pᵀ · dO,   dP = dO · Vᵀ,   dS = P ⊙ (dP − Δ),   dQ = scale · dS · K,   dK = scale · dSᵀ · Q
// without the Tq × Tk matrices: attn02_bwd_dkdv takes a tile of 32 keys (a quad per key, k, v
// and their gradients in registers) and walks the query tiles; attn02_bwd_dq takes a tile of
// 32 queries and walks the key tiles as the forward does. Two kernels instead of atomics keep
// the gradients deterministic.

#include "attention/attention.cuh"

namespace {

constexpr int BR = 32;  // query rows of a tile
constexpr int BC = 32;  // keys of a tile

// Loads rows [r0, r0 + ROWS) of a [.., D] operand with row stride `st` into `tile` (zeros past
// `n` rows), each thread a share of the float4s.
template <int D, int ROWS>
__device__ __forceinline__ void load_tile(float4 (*tile)[D / 4], const float* __restrict__ base, long long st,
                                          long long r0, long long n) {
    for (int x = threadIdx.x; x < ROWS * D / 4; x += blockDim.x) {
        const int rr = x / (D / 4), cc = x % (D / 4);
        const long long r = r0 + rr;
        tile[rr][cc] = r < n ? *reinterpret_cast<const float4*>(base + r * st + 4 * cc) : make_float4(0, 0, 0, 0);
    }
}

}  // namespace

template <int D>
__device__ __forceinline__ void attn02(const float* __restrict__ q, const float* __restrict__ k,
                                       const float* __restrict__ v, float* __restrict__ o,
                                       float* __restrict__ lse, const AttnArgs a) {
    constexpr int C = D / 16;  // float4 chunks a thread holds
    __shared__ float4 ks[BC][D / 4], vs[BC][D / 4];
    const long long tiles = camel::ceil_div(a.tq, BR);
    const long long bh = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * BR;
    const long long hh = bh % a.h, bb = bh / a.h;
    const int r = threadIdx.x / 4, qd = threadIdx.x % 4;
    const long long i = i0 + r;
    const bool live = i < a.tq;
    const float* qr = q + bb * a.q_sb + hh * a.q_sh + (live ? i : 0) * a.q_st;
    const float* kb = k + bb * a.k_sb + hh * a.k_sh;
    const float* vb = v + bb * a.v_sb + hh * a.v_sh;
    const float qs = a.scale * camel::LOG2E;  // scores in log2 units
    float4 qv[C], acc[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
        qv[c] = camel::scale4(reinterpret_cast<const float4*>(qr)[4 * c + qd], live ? qs : 0.0f);
        acc[c] = make_float4(0, 0, 0, 0);
    }
    const long long n = live ? camel::attn_visible(a, i) : 0;
    const long long n_blk = camel::attn_visible(a, min(i0 + BR, a.tq) - 1);  // the block's last row sees most
    const unsigned drow = camel::attn_drop_row(a, bh, i);
    float m = -INFINITY, l = 0.0f;
    for (long long j0 = 0; j0 < n_blk; j0 += BC) {
        __syncthreads();  // the previous tile is used up
        load_tile<D, BC>(ks, kb, a.k_st, j0, a.tk);
        load_tile<D, BC>(vs, vb, a.v_st, j0, a.tk);
        __syncthreads();
        float s[BC];
        float mt = m;
#pragma unroll
        for (int jj = 0; jj < BC; ++jj) {
            float d = 0.0f;
#pragma unroll
            for (int c = 0; c < C; ++c) d += camel::dot4(qv[c], ks[jj][4 * c + qd]);
            d = camel::quad_sum(d);
            s[jj] = j0 + jj < n ? d : -INFINITY;
            mt = fmaxf(mt, s[jj]);  // a NaN score is skipped here and reaches l through its exp
        }
        const float corr = exp2f(m - mt);  // 0 at the first tile (m = −inf)
        l *= corr;
#pragma unroll
        for (int c = 0; c < C; ++c) acc[c] = camel::scale4(acc[c], corr);
#pragma unroll
        for (int jj = 0; jj < BC; ++jj) {
            const float p = exp2f(s[jj] - mt);
            l += p;  // the weights before dropout
            const float pz = p * camel::attn_dropout(a, drow, j0 + jj);
#pragma unroll
            for (int c = 0; c < C; ++c) acc[c] = camel::axpy4(pz, vs[jj][4 * c + qd], acc[c]);
        }
        m = mt;
    }
    if (!live) return;
    float4* orow = reinterpret_cast<float4*>(o + camel::bthd(a, bb, hh, i, a.tq, D));
    const float inv = 1.0f / l;
#pragma unroll
    for (int c = 0; c < C; ++c) orow[4 * c + qd] = camel::scale4(acc[c], inv);
    if (qd == 0) lse[bh * a.tq + i] = (m + log2f(l)) * camel::LN2;
}

// Δ of each query row (camel::attn_delta), blocks of 256 threads, a warp per row.
extern "C" __global__ void __launch_bounds__(256)
    attn_bwd_delta_f32(const float* __restrict__ o, const float* __restrict__ dout, float* __restrict__ delta,
                       long long b, long long h, long long tq, int d) {
    CAMEL_PDL_WAIT();
    camel::attn_delta(o, dout, delta, b, h, tq, d);
}

// dK and dV of a tile of BC keys: a quad per key, walking the query tiles that see the keys.
template <int D>
__device__ __forceinline__ void attn02_dkdv(const float* __restrict__ q, const float* __restrict__ k,
                                            const float* __restrict__ v, const float* __restrict__ dout,
                                            const float* __restrict__ lse, const float* __restrict__ delta,
                                            float* __restrict__ dk, float* __restrict__ dv, const AttnArgs a) {
    constexpr int C = D / 16;
    __shared__ float4 qs[BR][D / 4], dos[BR][D / 4];
    __shared__ float lse_s[BR], del_s[BR];
    __shared__ unsigned drow_s[BR];
    const long long tiles = camel::ceil_div(a.tk, BC);
    const long long bh = blockIdx.x / tiles, j0 = (blockIdx.x % tiles) * BC;
    const long long hh = bh % a.h, bb = bh / a.h;
    const int r = threadIdx.x / 4, qd = threadIdx.x % 4;
    const long long j = j0 + r;
    const bool live = j < a.tk;
    const float4* kr = reinterpret_cast<const float4*>(k + bb * a.k_sb + hh * a.k_sh + (live ? j : 0) * a.k_st);
    const float4* vr = reinterpret_cast<const float4*>(v + bb * a.v_sb + hh * a.v_sh + (live ? j : 0) * a.v_st);
    const float* qb = q + bb * a.q_sb + hh * a.q_sh;
    // dO rows of this head: dense [B, Tq, H, D], a row stride of H·D
    const float* db = dout + camel::bthd(a, bb, hh, 0, a.tq, D);
    const float ss = a.scale * camel::LOG2E;
    float4 kv[C], vv[C], gk[C], gv[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
        kv[c] = kr[4 * c + qd];
        vv[c] = vr[4 * c + qd];
        gk[c] = gv[c] = make_float4(0, 0, 0, 0);
    }
    const long long off = a.tk - a.tq;
    for (long long i0 = camel::first_query(a, j0) / BR * BR; i0 < a.tq; i0 += BR) {
        __syncthreads();
        load_tile<D, BR>(qs, qb, a.q_st, i0, a.tq);
        load_tile<D, BR>(dos, db, a.h * D, i0, a.tq);
        if (threadIdx.x < BR) {
            const long long i = i0 + threadIdx.x;
            // a row past the end gets lse = +inf: p = 0
            lse_s[threadIdx.x] = i < a.tq ? lse[bh * a.tq + i] * camel::LOG2E : INFINITY;
            del_s[threadIdx.x] = i < a.tq ? delta[bh * a.tq + i] : 0.0f;
            drow_s[threadIdx.x] = camel::attn_drop_row(a, bh, i);
        }
        __syncthreads();
#pragma unroll 4
        for (int ii = 0; ii < BR; ++ii) {
            const long long i = i0 + ii;
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int c = 0; c < C; ++c) {
                s += camel::dot4(kv[c], qs[ii][4 * c + qd]);
                dp += camel::dot4(vv[c], dos[ii][4 * c + qd]);
            }
            s = camel::quad_sum(s);
            dp = camel::quad_sum(dp);
            const bool seen = live && i < a.tq && (!a.causal || j <= i + off);
            const float p = seen ? exp2f(s * ss - lse_s[ii]) : 0.0f;
            const float z = camel::attn_dropout(a, drow_s[ii], j);
            const float ds = seen ? p * (z * dp - del_s[ii]) : 0.0f;
#pragma unroll
            for (int c = 0; c < C; ++c) {
                gv[c] = camel::axpy4(p * z, dos[ii][4 * c + qd], gv[c]);
                gk[c] = camel::axpy4(ds, qs[ii][4 * c + qd], gk[c]);
            }
        }
    }
    if (!live) return;
    float4* dkr = reinterpret_cast<float4*>(dk + camel::bthd(a, bb, hh, j, a.tk, D));
    float4* dvr = reinterpret_cast<float4*>(dv + camel::bthd(a, bb, hh, j, a.tk, D));
#pragma unroll
    for (int c = 0; c < C; ++c) {
        dkr[4 * c + qd] = camel::scale4(gk[c], a.scale);
        dvr[4 * c + qd] = gv[c];
    }
}

// dQ of a tile of BR queries: a quad per query, walking the key tiles it sees.
template <int D>
__device__ __forceinline__ void attn02_dq(const float* __restrict__ q, const float* __restrict__ k,
                                          const float* __restrict__ v, const float* __restrict__ dout,
                                          const float* __restrict__ lse, const float* __restrict__ delta,
                                          float* __restrict__ dq, const AttnArgs a) {
    constexpr int C = D / 16;
    __shared__ float4 ks[BC][D / 4], vs[BC][D / 4];
    const long long tiles = camel::ceil_div(a.tq, BR);
    const long long bh = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * BR;
    const long long hh = bh % a.h, bb = bh / a.h;
    const int r = threadIdx.x / 4, qd = threadIdx.x % 4;
    const long long i = i0 + r;
    const bool live = i < a.tq;
    const float4* qr = reinterpret_cast<const float4*>(q + bb * a.q_sb + hh * a.q_sh + (live ? i : 0) * a.q_st);
    const float4* dr = reinterpret_cast<const float4*>(dout + camel::bthd(a, bb, hh, live ? i : 0, a.tq, D));
    const float* kb = k + bb * a.k_sb + hh * a.k_sh;
    const float* vb = v + bb * a.v_sb + hh * a.v_sh;
    const float ss = a.scale * camel::LOG2E;
    const float lse_i = live ? lse[bh * a.tq + i] * camel::LOG2E : INFINITY;
    const float del_i = live ? delta[bh * a.tq + i] : 0.0f;
    const unsigned drow = camel::attn_drop_row(a, bh, i);
    float4 qv[C], dov[C], g[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
        qv[c] = qr[4 * c + qd];
        dov[c] = dr[4 * c + qd];
        g[c] = make_float4(0, 0, 0, 0);
    }
    const long long n = live ? camel::attn_visible(a, i) : 0;
    const long long n_blk = camel::attn_visible(a, min(i0 + BR, a.tq) - 1);
    for (long long j0 = 0; j0 < n_blk; j0 += BC) {
        __syncthreads();
        load_tile<D, BC>(ks, kb, a.k_st, j0, a.tk);
        load_tile<D, BC>(vs, vb, a.v_st, j0, a.tk);
        __syncthreads();
#pragma unroll 4
        for (int jj = 0; jj < BC; ++jj) {
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int c = 0; c < C; ++c) {
                s += camel::dot4(qv[c], ks[jj][4 * c + qd]);
                dp += camel::dot4(dov[c], vs[jj][4 * c + qd]);
            }
            s = camel::quad_sum(s);
            dp = camel::quad_sum(dp);
            const bool seen = j0 + jj < n;
            const float z = camel::attn_dropout(a, drow, j0 + jj);
            const float ds = seen ? exp2f(s * ss - lse_i) * (z * dp - del_i) : 0.0f;
#pragma unroll
            for (int c = 0; c < C; ++c) g[c] = camel::axpy4(ds, ks[jj][4 * c + qd], g[c]);
        }
    }
    if (!live) return;
    float4* dqr = reinterpret_cast<float4*>(dq + camel::bthd(a, bb, hh, i, a.tq, D));
#pragma unroll
    for (int c = 0; c < C; ++c) dqr[4 * c + qd] = camel::scale4(g[c], a.scale);
}

// attn02_{fwd,bwd_dkdv,bwd_dq}_d{D}_f32: blocks of 128 threads (32 rows × a quad), one block per
// (batch · head, 32-row tile) on x.
#define ATTN02(D)                                                                                         \
    extern "C" __global__ void __launch_bounds__(128)                                                     \
        attn02_fwd_d##D##_f32(const float* __restrict__ q, const float* __restrict__ k,                   \
                              const float* __restrict__ v, float* __restrict__ o, float* __restrict__ lse, \
                              const AttnArgs a) {                                                         \
        CAMEL_PDL_WAIT();                                                                                 \
        attn02<D>(q, k, v, o, lse, a);                                                                    \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(128) attn02_bwd_dkdv_d##D##_f32(                         \
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,            \
        const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,   \
        float* __restrict__ dk, float* __restrict__ dv, const AttnArgs a) {                               \
        CAMEL_PDL_WAIT();                                                                                 \
        attn02_dkdv<D>(q, k, v, dout, lse, delta, dk, dv, a);                                             \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(128) attn02_bwd_dq_d##D##_f32(                           \
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,            \
        const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,   \
        float* __restrict__ dq, const AttnArgs a) {                                                       \
        CAMEL_PDL_WAIT();                                                                                 \
        attn02_dq<D>(q, k, v, dout, lse, delta, dq, a);                                                   \
    }
ATTN02(32)
ATTN02(64)
ATTN02(128)
