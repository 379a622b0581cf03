#pragma once

// mma.cuh — the tensor-core steps of the attention ladder (3 to 5), f16 and bf16, forward and
// backward; 03_mma.cu, 04_swizzle.cu and 05_async.cu instantiate them.
//
// Forward. A block takes BR = 64 query rows of one head, 16 a warp, and walks the keys in tiles
// of BC = 64 held in shared memory. Each warp computes its 16 × 64 scores S = Q·Kᵀ with
// `mma.sync.m16n8k16` (16-bit inputs, f32 sums): its Q rows stay in registers as A fragments
// for the whole walk, and the K tile's rows are exactly the column-major B fragments the
// instruction wants (B[k][n] = K[n][k]). The online softmax runs on the accumulators: a thread
// holds two rows (g and g + 8 of the warp's 16), and a row's max is a quad reduction. Then
// O += P·V without P leaving the registers: the accumulator layout of two adjacent 16 × 8 score
// tiles is the A-fragment layout of one 16 × 16 tile, so P is rounded to 16 bits in place and
// fed straight back to the tensor cores.
//
// Backward: step 2's FlashAttention-2 recomputation on the tensor cores. The dK/dV kernel takes
// 64 keys (16 a warp) and walks the query tiles of 32: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ on the tensor
// cores, Pᵀ = exp(Sᵀ − lse) and dSᵀ = Pᵀ ⊙ (dPᵀ − Δ) in the accumulators, then dV += Pᵀ·dO and
// dK += dSᵀ·Q with Pᵀ and dSᵀ fed back as A fragments. The dQ kernel takes 64 queries and walks
// the key tiles: S, dP, dS as above and dQ += dS·K. Two kernels instead of atomics keep the
// gradients deterministic. P and dS are rounded to 16 bits before their products, as
// FlashAttention-2 does; every sum stays f32. With dropout, P is multiplied by its mask
// (attention.cuh) before P·V and dV, and dP before dS.
//
// How fragments leave shared memory (the difference between the steps):
//   SWZ = false (step 3): plain row-major tiles and 32-bit loads, one fragment register each.
//       The eight rows a load touches sit D·2 bytes apart, a multiple of 128: the same banks,
//       8-way conflicts. A B fragment of V (B[k][n] = V[k][n]) pairs elements of two rows: two
//       16-bit loads a register.
//   SWZ = true (step 4): `ldmatrix.x4` loads four 8 × 8 matrices a warp instruction (`.trans`
//       for V, whose fragments it transposes on the way), and the tiles' 16-byte chunks are
//       XOR-swizzled by row (hgemm::tile_off) so the eight rows of every ldmatrix phase hit
//       eight distinct bank groups.
//   ASYNC (step 5, forward): the K/V tiles are double-buffered and filled by cp.async, the next
//       pair in flight while the warps compute on the current one.
//
// Rows must start on 16-byte boundaries (the tiles move in 16-byte chunks): the launcher checks.

#include "attention/attention.cuh"
#include "common/half.cuh"
#include "matmul/hmma.cuh"  // mma16816<T>, ldmatrix_x4, tile_off

namespace {

using hgemm::u16;

constexpr int WARPS = 4;        // warps of a block (128 threads)
constexpr int BR = 16 * WARPS;  // forward and dQ: query rows of a block
constexpr int BC = 64;          // forward and dQ: keys of a tile
constexpr int BK = 16 * WARPS;  // dK/dV: keys of a block
constexpr int BQ = 32;          // dK/dV: queries of a tile

// Rows [r0, r0 + ROWS) of a [.., D] 16-bit operand with row stride `st` into the shared tile S
// (ROWS × D, chunks swizzled when SWZ), zeros past row n; 16-byte chunks shared among the block.
template <int D, int ROWS, bool SWZ>
__device__ __forceinline__ void load_rows(u16* S, const u16* __restrict__ base, long long st, long long r0,
                                          long long n) {
    for (int x = threadIdx.x; x < ROWS * D / 8; x += blockDim.x) {
        const int rr = x / (D / 8), cc = x % (D / 8);
        const long long r = r0 + rr;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < n) val = *reinterpret_cast<const uint4*>(base + r * st + 8 * cc);
        *reinterpret_cast<uint4*>(S + hgemm::tile_off<D, SWZ>(rr, 8 * cc)) = val;
    }
}

// load_rows through cp.async into a swizzled tile: each thread's 16-byte chunks go from global
// to shared memory without registers; rows past n are zero-filled (a copy of 0 source bytes).
// The caller commits the group and waits for it.
template <int D, int ROWS>
__device__ __forceinline__ void copy_rows_async(u16* S, const u16* __restrict__ base, long long st, long long r0,
                                                long long n) {
    for (int x = threadIdx.x; x < ROWS * D / 8; x += blockDim.x) {
        const int rr = x / (D / 8), cc = x % (D / 8);
        const long long r = r0 + rr;
        hgemm::cp_async16(S + hgemm::tile_off<D, true>(rr, 8 * cc), r < n ? base + r * st + 8 * cc : base,
                          r < n ? 16 : 0);
    }
}

__device__ __forceinline__ unsigned ld32(const u16* p) { return *reinterpret_cast<const unsigned*>(p); }
__device__ __forceinline__ unsigned pack2(u16 lo, u16 hi) { return (unsigned)lo | ((unsigned)hi << 16); }

// The A fragment of the 16 × 16 tile at (r0, c0) of a shared tile W elements wide:
// (g, 2t), (g + 8, 2t), (g, 2t + 8), (g + 8, 2t + 8), each a pair of adjacent elements.
template <int W, bool SWZ>
__device__ __forceinline__ void frag_a(unsigned (&a)[4], const u16* S, int r0, int c0, int lane) {
    if constexpr (SWZ) {
        // lane l addresses row l % 16 of the four 8 × 8 matrices (rows 0–7 / 8–15, columns 0–7 / 8–15)
        hgemm::ldmatrix_x4<false>(a, S + hgemm::tile_off<W, true>(r0 + lane % 16, c0 + lane / 16 * 8));
    } else {
        const u16* p = S + (r0 + lane / 4) * W + c0 + 2 * (lane % 4);
        a[0] = ld32(p);
        a[1] = ld32(p + 8 * W);
        a[2] = ld32(p + 8);
        a[3] = ld32(p + 8 * W + 8);
    }
}

// The B fragments of two 16 × 8 tiles, columns n0 … n0 + 15, with B[k][n] = S[n0 + n][c0 + k]:
// the tile's rows are B's columns (K in Q·Kᵀ), each register a pair of adjacent elements of one
// row. b[0], b[1] are the first tile's two registers, b[2], b[3] the second's.
template <int W, bool SWZ>
__device__ __forceinline__ void frag_b_nk(unsigned (&b)[4], const u16* S, int n0, int c0, int lane) {
    if constexpr (SWZ) {
        hgemm::ldmatrix_x4<false>(b, S + hgemm::tile_off<W, true>(n0 + lane / 16 * 8 + lane % 8, c0 + lane / 8 % 2 * 8));
    } else {
        const u16* p = S + (n0 + lane / 4) * W + c0 + 2 * (lane % 4);
        b[0] = ld32(p);
        b[1] = ld32(p + 8);
        b[2] = ld32(p + 8 * W);
        b[3] = ld32(p + 8 * W + 8);
    }
}

// The B fragments of two 16 × 8 tiles with B[k][n] = S[k0 + k][n0 + n]: the tile's rows are
// B's rows (V in P·V), so each register pairs elements of two rows (ldmatrix.trans transposes
// the 8 × 8 matrices into that layout).
template <int W, bool SWZ>
__device__ __forceinline__ void frag_b_kn(unsigned (&b)[4], const u16* S, int k0, int n0, int lane) {
    if constexpr (SWZ) {
        hgemm::ldmatrix_x4<true>(b, S + hgemm::tile_off<W, true>(k0 + lane / 8 % 2 * 8 + lane % 8, n0 + lane / 16 * 8));
    } else {
        const u16* p = S + (k0 + 2 * (lane % 4)) * W + n0 + lane / 4;
        b[0] = pack2(p[0], p[W]);
        b[1] = pack2(p[8 * W], p[9 * W]);
        b[2] = pack2(p[8], p[W + 8]);
        b[3] = pack2(p[8 * W + 8], p[9 * W + 8]);
    }
}

// Two f32 rounded to a pair of T, `lo` in the low half.
template <typename T>
__device__ __forceinline__ unsigned pack_f(float lo, float hi);
template <>
__device__ __forceinline__ unsigned pack_f<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
}
template <>
__device__ __forceinline__ unsigned pack_f<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
}

// Two adjacent 16 × 8 accumulator tiles (columns 0–7 and 8–15) as the A fragment of one
// 16 × 16 tile: the layouts coincide, so this is only the rounding to T.
template <typename T>
__device__ __forceinline__ void c_to_a(unsigned (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
    a[0] = pack_f<T>(c0[0], c0[1]);
    a[1] = pack_f<T>(c0[2], c0[3]);
    a[2] = pack_f<T>(c1[0], c1[1]);
    a[3] = pack_f<T>(c1[2], c1[3]);
}

// c += A·Bᵀ over 16 features (columns c0 … c0 + 15): A's 16 rows given as an A fragment, B the
// N rows of a shared tile D wide, whose rows are the B fragments' columns (K in Q·Kᵀ).
template <typename T, int D, int N, bool SWZ>
__device__ __forceinline__ void mma_abt_chunk(float (&c)[N / 8][4], const unsigned (&a)[4], const u16* B, int c0,
                                              int lane) {
#pragma unroll
    for (int nt = 0; nt < N / 8; nt += 2) {
        unsigned b[4];
        frag_b_nk<D, SWZ>(b, B, 8 * nt, c0, lane);
        hgemm::mma16816<T>(c[nt], a, b[0], b[1]);
        hgemm::mma16816<T>(c[nt + 1], a, b[2], b[3]);
    }
}

// c += A·Bᵀ over all D features: the warp's 16 rows of the shared tile A from row r0, against
// the N rows of the shared tile B (the backward's K·Qᵀ, V·dOᵀ, Q·Kᵀ and dO·Vᵀ).
template <typename T, int D, int N, bool SWZ>
__device__ __forceinline__ void mma_abt(float (&c)[N / 8][4], const u16* A, int r0, const u16* B, int lane) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        unsigned a[4];
        frag_a<D, SWZ>(a, A, r0, 16 * kk, lane);
        mma_abt_chunk<T, D, N, SWZ>(c, a, B, 16 * kk, lane);
    }
}

// acc += P·B: the warp's 16 × K accumulators p (probabilities or dS), rounded to T and fed back
// as A fragments (c_to_a), times the K × D shared tile B (P·V, Pᵀ·dO, dSᵀ·Q, dS·K).
template <typename T, int D, int K, bool SWZ>
__device__ __forceinline__ void mma_pb(float (&acc)[D / 8][4], const float (&p)[K / 8][4], const u16* B, int lane) {
#pragma unroll
    for (int kc = 0; kc < K / 16; ++kc) {
        unsigned pa[4];
        c_to_a<T>(pa, p[2 * kc], p[2 * kc + 1]);
#pragma unroll
        for (int nd = 0; nd < D / 8; nd += 2) {
            unsigned b[4];
            frag_b_kn<D, SWZ>(b, B, 16 * kc, 8 * nd, lane);
            hgemm::mma16816<T>(acc[nd], pa, b[0], b[1]);
            hgemm::mma16816<T>(acc[nd + 1], pa, b[2], b[3]);
        }
    }
}

__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(camel::FULL_MASK, v, 1));
    return fmaxf(v, __shfl_xor_sync(camel::FULL_MASK, v, 2));
}

// Stores a 16 × D accumulator (rows r_lo = row g and r_hi = row g + 8 of the warp's 16) times
// `mul[r]` as T into the dense [B, T, H, D] `out`, rows at or past `n` skipped.
template <typename T, int D>
__device__ __forceinline__ void store_rows(u16* out, const AttnArgs& a, long long bb, long long hh, long long T_,
                                           long long r_lo, long long n, const float (&acc)[D / 8][4],
                                           const float (&mul)[2], int t) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const long long row = r_lo + 8 * r;
        if (row >= n) continue;
        u16* p = out + camel::bthd(a, bb, hh, row, T_, D) + 2 * t;
#pragma unroll
        for (int nd = 0; nd < D / 8; ++nd)
            *reinterpret_cast<unsigned*>(p + 8 * nd) = pack_f<T>(acc[nd][2 * r] * mul[r], acc[nd][2 * r + 1] * mul[r]);
    }
}

}  // namespace

// The dynamic shared memory of every kernel here (sizes in the launcher).
extern __shared__ __align__(16) unsigned char attn_mma_smem[];

// ASYNC (step 5): two K/V buffers, the next tile's copies (cp.async) in flight while the warps
// compute on the current one. Otherwise one buffer, filled through registers between barriers.
template <typename T, int D, bool SWZ, bool ASYNC>
__device__ __forceinline__ void attn_mma_fwd(const u16* __restrict__ q, const u16* __restrict__ k,
                                             const u16* __restrict__ v, u16* __restrict__ o,
                                             float* __restrict__ lse, const AttnArgs a) {
    static_assert(SWZ || !ASYNC, "the asynchronous step builds on the swizzled one");
    constexpr int BUFS = ASYNC ? 2 : 1;
    u16* qs = reinterpret_cast<u16*>(attn_mma_smem);  // [BR][D]
    u16* kbuf = qs + BR * D;                          // [BUFS][BC][D]
    u16* vbuf = kbuf + BUFS * BC * D;                 // [BUFS][BC][D]
    const long long tiles = camel::ceil_div(a.tq, BR);
    const long long bh = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * BR;
    const long long hh = bh % a.h, bb = bh / a.h;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u16* kb = k + bb * a.k_sb + hh * a.k_sh;
    const u16* vb = v + bb * a.v_sb + hh * a.v_sh;
    load_rows<D, BR, SWZ>(qs, q + bb * a.q_sb + hh * a.q_sh, a.q_st, i0, a.tq);
    __syncthreads();
    unsigned qf[D / 16][4];  // the warp's 16 query rows as A fragments
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) frag_a<D, SWZ>(qf[kk], qs, 16 * w, 16 * kk, lane);
    const long long r_lo = i0 + 16 * w + g;  // this thread's rows: r_lo and r_lo + 8
    const long long n[2] = {camel::attn_visible(a, r_lo), camel::attn_visible(a, r_lo + 8)};
    const long long n_blk = camel::attn_visible(a, min(i0 + BR, a.tq) - 1);
    const unsigned drow[2] = {camel::attn_drop_row(a, bh, r_lo), camel::attn_drop_row(a, bh, r_lo + 8)};
    const float ss = a.scale * camel::LOG2E;  // scores in log2 units
    float acc[D / 8][4] = {};
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    if constexpr (ASYNC) {
        copy_rows_async<D, BC>(kbuf, kb, a.k_st, 0, a.tk);
        copy_rows_async<D, BC>(vbuf, vb, a.v_st, 0, a.tk);
        hgemm::cp_async_commit();
    }
    for (long long j0 = 0, it = 0; j0 < n_blk; j0 += BC, ++it) {
        const int cur = ASYNC ? it & 1 : 0;
        u16* ks = kbuf + cur * BC * D;
        u16* vs = vbuf + cur * BC * D;
        __syncthreads();  // the tiles of the previous iteration are used up
        if constexpr (ASYNC) {
            if (j0 + BC < n_blk) {  // the next tiles, into the other buffer
                copy_rows_async<D, BC>(kbuf + (cur ^ 1) * BC * D, kb, a.k_st, j0 + BC, a.tk);
                copy_rows_async<D, BC>(vbuf + (cur ^ 1) * BC * D, vb, a.v_st, j0 + BC, a.tk);
                hgemm::cp_async_commit();
                hgemm::cp_async_wait<1>();  // this iteration's group has landed
            } else {
                hgemm::cp_async_wait<0>();
            }
        } else {
            load_rows<D, BC, SWZ>(ks, kb, a.k_st, j0, a.tk);
            load_rows<D, BC, SWZ>(vs, vb, a.v_st, j0, a.tk);
        }
        __syncthreads();
        float s[BC / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) mma_abt_chunk<T, D, BC, SWZ>(s, qf[kk], ks, 16 * kk, lane);
        // scale and mask; each row's max over the tile (a NaN score is skipped here and
        // reaches l through its exp)
        float mt[2] = {m[0], m[1]};
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const long long j = j0 + 8 * nt + 2 * t + (e & 1);
                const float x = j < n[e >> 1] ? s[nt][e] * ss : -INFINITY;
                s[nt][e] = x;
                mt[e >> 1] = fmaxf(mt[e >> 1], x);
            }
        float mu[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mt[r] = quad_max(mt[r]);
            mu[r] = mt[r] == -INFINITY ? 0.0f : mt[r];  // a row with nothing visible yet: no −inf − −inf
            const float corr = exp2f(m[r] - mu[r]);     // 0 at the first tile (m = −inf)
            l[r] *= corr;
#pragma unroll
            for (int nd = 0; nd < D / 8; ++nd) {
                acc[nd][2 * r] *= corr;
                acc[nd][2 * r + 1] *= corr;
            }
            m[r] = mt[r];
        }
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float p = exp2f(s[nt][e] - mu[e >> 1]);
                l[e >> 1] += p;  // the weights before dropout
                s[nt][e] = p * camel::attn_dropout(a, drow[e >> 1], j0 + 8 * nt + 2 * t + (e & 1));
            }
        mma_pb<T, D, BC, SWZ>(acc, s, vs, lane);  // O += P·V, P straight from the accumulators
    }
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] = camel::quad_sum(l[r]);  // each thread summed its own columns
        inv[r] = 1.0f / l[r];
        const long long row = r_lo + 8 * r;
        if (t == 0 && row < a.tq) lse[bh * a.tq + row] = (m[r] + log2f(l[r])) * camel::LN2;
    }
    store_rows<T, D>(o, a, bb, hh, a.tq, r_lo, a.tq, acc, inv, t);
}

// dK and dV of a tile of BK keys (16 a warp), walking the query tiles that see them.
template <typename T, int D, bool SWZ>
__device__ __forceinline__ void attn_mma_dkdv(const u16* __restrict__ q, const u16* __restrict__ k,
                                            const u16* __restrict__ v, const u16* __restrict__ dout,
                                            const float* __restrict__ lse, const float* __restrict__ delta,
                                            u16* __restrict__ dk, u16* __restrict__ dv, const AttnArgs a) {
    u16* ks = reinterpret_cast<u16*>(attn_mma_smem);  // [BK][D]
    u16* vs = ks + BK * D;                          // [BK][D]
    u16* qs = vs + BK * D;                          // [BQ][D]
    u16* dos = qs + BQ * D;                         // [BQ][D]
    float* lse_s = reinterpret_cast<float*>(dos + BQ * D);
    float* del_s = lse_s + BQ;
    unsigned* drow_s = reinterpret_cast<unsigned*>(del_s + BQ);
    const long long tiles = camel::ceil_div(a.tk, BK);
    const long long bh = blockIdx.x / tiles, j0 = (blockIdx.x % tiles) * BK;
    const long long hh = bh % a.h, bb = bh / a.h;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    load_rows<D, BK, SWZ>(ks, k + bb * a.k_sb + hh * a.k_sh, a.k_st, j0, a.tk);
    load_rows<D, BK, SWZ>(vs, v + bb * a.v_sb + hh * a.v_sh, a.v_st, j0, a.tk);
    const u16* qb = q + bb * a.q_sb + hh * a.q_sh;
    const u16* db = dout + camel::bthd(a, bb, hh, 0, a.tq, D);  // dO rows: a stride of H·D
    const long long j_lo = j0 + 16 * w + g;                     // this thread's keys: j_lo, j_lo + 8
    const long long off = a.tk - a.tq;
    const float ss = a.scale * camel::LOG2E;
    float gk[D / 8][4] = {}, gv[D / 8][4] = {};
    for (long long i0 = camel::first_query(a, j0) / BQ * BQ; i0 < a.tq; i0 += BQ) {
        __syncthreads();  // the previous tiles are used up (the first time: K and V are loaded)
        load_rows<D, BQ, SWZ>(qs, qb, a.q_st, i0, a.tq);
        load_rows<D, BQ, SWZ>(dos, db, a.h * D, i0, a.tq);
        if (threadIdx.x < BQ) {
            const long long i = i0 + threadIdx.x;
            lse_s[threadIdx.x] = i < a.tq ? lse[bh * a.tq + i] * camel::LOG2E : INFINITY;
            del_s[threadIdx.x] = i < a.tq ? delta[bh * a.tq + i] : 0.0f;
            drow_s[threadIdx.x] = camel::attn_drop_row(a, bh, i);
        }
        __syncthreads();
        // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ: the warp's 16 keys × BQ queries
        float st[BQ / 8][4] = {}, dpt[BQ / 8][4] = {};
        mma_abt<T, D, BQ, SWZ>(st, ks, 16 * w, qs, lane);
        mma_abt<T, D, BQ, SWZ>(dpt, vs, 16 * w, dos, lane);
        // Pᵀ = exp(Sᵀ − lse), dSᵀ = Pᵀ ⊙ (dPᵀ − Δ), zero where the key is hidden or past the end
#pragma unroll
        for (int nt = 0; nt < BQ / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int ii = 8 * nt + 2 * t + (e & 1);
                const long long i = i0 + ii, j = j_lo + 8 * (e >> 1);
                const bool seen = i < a.tq && j < a.tk && (!a.causal || j <= i + off);
                const float p = seen ? exp2f(st[nt][e] * ss - lse_s[ii]) : 0.0f;
                const float z = camel::attn_dropout(a, drow_s[ii], j);
                dpt[nt][e] = seen ? p * (z * dpt[nt][e] - del_s[ii]) : 0.0f;
                st[nt][e] = p * z;
            }
        mma_pb<T, D, BQ, SWZ>(gv, st, dos, lane);  // dV += Pᵀ·dO
        mma_pb<T, D, BQ, SWZ>(gk, dpt, qs, lane);  // dK += dSᵀ·Q
    }
    const float one[2] = {1.0f, 1.0f}, sc[2] = {a.scale, a.scale};
    store_rows<T, D>(dv, a, bb, hh, a.tk, j_lo, a.tk, gv, one, t);
    store_rows<T, D>(dk, a, bb, hh, a.tk, j_lo, a.tk, gk, sc, t);
}

// dQ of a tile of BR queries (16 a warp), walking the key tiles they see.
template <typename T, int D, bool SWZ>
__device__ __forceinline__ void attn_mma_dq(const u16* __restrict__ q, const u16* __restrict__ k,
                                          const u16* __restrict__ v, const u16* __restrict__ dout,
                                          const float* __restrict__ lse, const float* __restrict__ delta,
                                          u16* __restrict__ dq, const AttnArgs a) {
    u16* qs = reinterpret_cast<u16*>(attn_mma_smem);  // [BR][D]
    u16* dos = qs + BR * D;                         // [BR][D]
    u16* ks = dos + BR * D;                         // [BC][D]
    u16* vs = ks + BC * D;                          // [BC][D]
    const long long tiles = camel::ceil_div(a.tq, BR);
    const long long bh = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * BR;
    const long long hh = bh % a.h, bb = bh / a.h;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u16* kb = k + bb * a.k_sb + hh * a.k_sh;
    const u16* vb = v + bb * a.v_sb + hh * a.v_sh;
    load_rows<D, BR, SWZ>(qs, q + bb * a.q_sb + hh * a.q_sh, a.q_st, i0, a.tq);
    load_rows<D, BR, SWZ>(dos, dout + camel::bthd(a, bb, hh, 0, a.tq, D), a.h * D, i0, a.tq);
    const long long r_lo = i0 + 16 * w + g;  // this thread's rows: r_lo and r_lo + 8
    const long long n[2] = {camel::attn_visible(a, r_lo), camel::attn_visible(a, r_lo + 8)};
    const long long n_blk = camel::attn_visible(a, min(i0 + BR, a.tq) - 1);
    float lse2[2], del[2];
    unsigned drow[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const long long row = r_lo + 8 * r;
        lse2[r] = row < a.tq ? lse[bh * a.tq + row] * camel::LOG2E : INFINITY;
        del[r] = row < a.tq ? delta[bh * a.tq + row] : 0.0f;
        drow[r] = camel::attn_drop_row(a, bh, row);
    }
    const float ss = a.scale * camel::LOG2E;
    float gq[D / 8][4] = {};
    for (long long j0 = 0; j0 < n_blk; j0 += BC) {
        __syncthreads();
        load_rows<D, BC, SWZ>(ks, kb, a.k_st, j0, a.tk);
        load_rows<D, BC, SWZ>(vs, vb, a.v_st, j0, a.tk);
        __syncthreads();
        // S = Q·Kᵀ and dP = dO·Vᵀ: the warp's 16 queries × BC keys
        float s[BC / 8][4] = {}, dp[BC / 8][4] = {};
        mma_abt<T, D, BC, SWZ>(s, qs, 16 * w, ks, lane);
        mma_abt<T, D, BC, SWZ>(dp, dos, 16 * w, vs, lane);
        // dS = P ⊙ (dP − Δ), zero where the key is hidden or past the end
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const long long j = j0 + 8 * nt + 2 * t + (e & 1);
                const int r = e >> 1;
                const float z = camel::attn_dropout(a, drow[r], j);
                s[nt][e] = j < n[r] ? exp2f(s[nt][e] * ss - lse2[r]) * (z * dp[nt][e] - del[r]) : 0.0f;
            }
        mma_pb<T, D, BC, SWZ>(gq, s, ks, lane);  // dQ += dS·K
    }
    const float sc[2] = {a.scale, a.scale};
    store_rows<T, D>(dq, a, bb, hh, a.tq, r_lo, a.tq, gq, sc, t);
}

// attn{STEP}_fwd_d{D}_{f16,bf16} and attn{STEP}_bwd_{dkdv,dq}_d{D}_{f16,bf16}: blocks of 128
// threads (4 warps), one block per (batch · head, 64-row tile) on x, dynamic shared memory as
// the launcher sizes it.
#define ATTN_MMA_FWD(STEP, SWZ, ASYNC, T, SFX, D)                                                               \
    extern "C" __global__ void __launch_bounds__(128)                                                           \
        attn##STEP##_fwd_d##D##_##SFX(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, \
                                      T* __restrict__ o, float* __restrict__ lse, const AttnArgs a) {           \
        CAMEL_PDL_WAIT();                                                                                       \
        attn_mma_fwd<T, D, SWZ, ASYNC>(reinterpret_cast<const u16*>(q), reinterpret_cast<const u16*>(k),        \
                                       reinterpret_cast<const u16*>(v), reinterpret_cast<u16*>(o), lse, a);     \
    }
#define ATTN_MMA_BWD(STEP, SWZ, T, SFX, D)                                                                      \
    extern "C" __global__ void __launch_bounds__(128) attn##STEP##_bwd_dkdv_d##D##_##SFX(                       \
        const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ dout,  \
        const float* __restrict__ lse, const float* __restrict__ delta, T* __restrict__ dk,                     \
        T* __restrict__ dv, const AttnArgs a) {                                                                 \
        CAMEL_PDL_WAIT();                                                                                       \
        attn_mma_dkdv<T, D, SWZ>(reinterpret_cast<const u16*>(q), reinterpret_cast<const u16*>(k),              \
                                 reinterpret_cast<const u16*>(v), reinterpret_cast<const u16*>(dout), lse,      \
                                 delta, reinterpret_cast<u16*>(dk), reinterpret_cast<u16*>(dv), a);             \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(128) attn##STEP##_bwd_dq_d##D##_##SFX(                         \
        const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ dout,  \
        const float* __restrict__ lse, const float* __restrict__ delta, T* __restrict__ dq, const AttnArgs a) { \
        CAMEL_PDL_WAIT();                                                                                       \
        attn_mma_dq<T, D, SWZ>(reinterpret_cast<const u16*>(q), reinterpret_cast<const u16*>(k),                \
                               reinterpret_cast<const u16*>(v), reinterpret_cast<const u16*>(dout), lse, delta, \
                               reinterpret_cast<u16*>(dq), a);                                                  \
    }

// attn_bwd_delta_{f16,bf16}: blocks of 256 threads, a warp per query row.
#define ATTN_MMA_DELTA(T, SFX)                                                                          \
    extern "C" __global__ void __launch_bounds__(256)                                                   \
        attn_bwd_delta_##SFX(const T* __restrict__ o, const T* __restrict__ dout, float* __restrict__ delta, \
                             long long b, long long h, long long tq, int d) {                          \
        CAMEL_PDL_WAIT();                                                                               \
        camel::attn_delta<T>(o, dout, delta, b, h, tq, d);                                                 \
    }

// The forward kernels of a step: both dtypes, every head dim.
#define ATTN_MMA_FWD_ALL(STEP, SWZ, ASYNC)                     \
    ATTN_MMA_FWD(STEP, SWZ, ASYNC, __half, f16, 32)            \
    ATTN_MMA_FWD(STEP, SWZ, ASYNC, __half, f16, 64)            \
    ATTN_MMA_FWD(STEP, SWZ, ASYNC, __half, f16, 128)           \
    ATTN_MMA_FWD(STEP, SWZ, ASYNC, __nv_bfloat16, bf16, 32)    \
    ATTN_MMA_FWD(STEP, SWZ, ASYNC, __nv_bfloat16, bf16, 64)    \
    ATTN_MMA_FWD(STEP, SWZ, ASYNC, __nv_bfloat16, bf16, 128)

// The backward kernels of a step and Δ: both dtypes, every head dim.
#define ATTN_MMA_BWD_ALL(STEP, SWZ)                  \
    ATTN_MMA_DELTA(__half, f16)                      \
    ATTN_MMA_DELTA(__nv_bfloat16, bf16)              \
    ATTN_MMA_BWD(STEP, SWZ, __half, f16, 32)         \
    ATTN_MMA_BWD(STEP, SWZ, __half, f16, 64)         \
    ATTN_MMA_BWD(STEP, SWZ, __half, f16, 128)        \
    ATTN_MMA_BWD(STEP, SWZ, __nv_bfloat16, bf16, 32) \
    ATTN_MMA_BWD(STEP, SWZ, __nv_bfloat16, bf16, 64) \
    ATTN_MMA_BWD(STEP, SWZ, __nv_bfloat16, bf16, 128)
