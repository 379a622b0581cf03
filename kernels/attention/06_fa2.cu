// Step 6: the FlashAttention-2 work split, tuned (f16 and bf16, forward and backward).
//
// What the forward adds over step 5, whose warps already own their query rows and walk the K/V
// tiles:
// - Two 16-row tiles a warp (128 query rows a block of four warps). Every K and V fragment a warp
//   loads with ldmatrix feeds four mma.sync instead of two, so shared memory, not the tensor
//   cores, stops being the limit; the Q fragments are reloaded from shared memory each tile (they
//   no longer fit the registers beside the 16 × 128 accumulators of two row tiles).
// - Masks only where they cut: a tile every row of the warp sees whole skips the causal and
//   length tests, and a warp skips a tile none of its rows sees (the upper triangle inside the
//   diagonal block). Dropout's multiply runs only with dropout.
// - Causal grids launch the longest query tiles first (the last rows see the most keys), so the
//   short tiles fill the tail of the grid instead of one long tile running alone at the end.
// - Q, the first K/V tiles and every later pair arrive by cp.async; two K/V buffers, as step 5.
//
// Rows must start on 16-byte boundaries (the tiles move in 16-byte chunks): the launcher checks.

#include "attention/mma.cuh"

namespace {

constexpr int F6_WARPS = 4;                    // warps of a block (128 threads)
constexpr int F6_MT = 2;                       // 16-row tiles a warp
constexpr int F6_BR = 16 * F6_MT * F6_WARPS;  // query rows of a block
constexpr int F6_BC = 64;                      // keys of a tile (the kernels' choice)

// The cp.async copies of rows [r0, r0 + ROWS) of a [.., D] operand into a swizzled ROWS × D tile,
// zeros past row n (a copy of 0 source bytes), by the block's 128 threads. Thread `tid` copies
// chunk tid % (D/8) of rows tid / (D/8) + p · RPP: the swizzle depends on the row mod 8, which
// those rows share (RPP is a multiple of 8), so its shared-memory offsets are one base plus
// constants and its sources one pointer stepping RPP rows. (copy_rows_async, with the thread
// count unknown, recomputes a division, a swizzle and a 64-bit address for every chunk.)
template <int D, int ROWS>
struct TileCopy {
    static constexpr int CPR = D / 8, RPP = 128 / CPR;
    static_assert(RPP % 8 == 0 && ROWS % RPP == 0, "whole passes of rows sharing their swizzle");
    int row, col, soff;
    __device__ __forceinline__ explicit TileCopy(int tid)
        : row(tid / CPR), col(8 * (tid % CPR)), soff(hgemm::tile_off<D, true>(tid / CPR, 8 * (tid % CPR))) {}
    __device__ __forceinline__ void operator()(u16* S, const u16* __restrict__ base, long long st, long long r0,
                                               long long n) const {
        const u16* src = base + (r0 + row) * st + col;
#pragma unroll
        for (int p = 0; p < ROWS / RPP; ++p) {
            const bool in = r0 + row + p * RPP < n;
            hgemm::cp_async16(S + soff + p * RPP * D, in ? src : base, in ? 16 : 0);
            src += RPP * st;
        }
    }
};

// The softmax update of one 16-row tile against a score tile s (scaled to log2 units in place),
// leaving P (after dropout) in s for O += P·V. The thread's rows are `row` and `row` + 8 of head
// `bh`; `mask`: some key of the tile is hidden from some row of the warp (the limits and the
// dropout rows are recomputed here, off the common path, rather than held in registers).
template <typename T, int D, int BC>
__device__ __forceinline__ void fa2_rows(float (&s)[BC / 8][4], float (&acc)[D / 8][4], float (&m)[2],
                                         float (&l)[2], long long row, long long bh, bool mask, long long j0,
                                         float ss, const AttnArgs& a, int t) {
    // each row's max over the tile, in log2 units (a NaN score is skipped here and reaches l
    // through its exp). Unmasked, the raw scores keep their units and their max is scaled once
    // (the min for a negative scale); the exponent below is then one fused multiply-add.
    float mt[2] = {m[0], m[1]};
    if (mask) {
        const long long lim[2] = {camel::attn_visible(a, row) - j0, camel::attn_visible(a, row + 8) - j0};
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int jj = 8 * nt + 2 * t + (e & 1);
                const float x = jj < lim[e >> 1] ? s[nt][e] * ss : -INFINITY;
                s[nt][e] = x;
                mt[e >> 1] = fmaxf(mt[e >> 1], x);
            }
    } else {
        float ext[2] = {s[0][0], s[0][2]};
        if (ss >= 0.0f) {
#pragma unroll
            for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) ext[e >> 1] = fmaxf(ext[e >> 1], s[nt][e]);
        } else {
#pragma unroll
            for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) ext[e >> 1] = fminf(ext[e >> 1], s[nt][e]);
        }
        mt[0] = fmaxf(mt[0], ext[0] * ss);
        mt[1] = fmaxf(mt[1], ext[1] * ss);
    }
    // the running sums rescale only when some row of the warp has a new max (a factor of exactly
    // 1 otherwise): after the first tiles that is rare, and the warp skips the multiplies
    float mu[2], corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        mt[r] = quad_max(mt[r]);
        mu[r] = mt[r] == -INFINITY ? 0.0f : mt[r];  // nothing visible yet: no −inf − −inf
        corr[r] = exp2f(m[r] - mu[r]);              // 0 at the first tile (m = −inf)
        l[r] *= corr[r];
    }
    if (__any_sync(camel::FULL_MASK, mt[0] != m[0] || mt[1] != m[1])) {
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int nd = 0; nd < D / 8; ++nd) {
                acc[nd][2 * r] *= corr[r];
                acc[nd][2 * r + 1] *= corr[r];
            }
    }
    m[0] = mt[0];
    m[1] = mt[1];
    // P = 2^(x − m), one ex2.approx.ftz instruction a weight (camel::exp2_ftz)
    const float sm = mask ? 1.0f : ss, nmu[2] = {-mu[0], -mu[1]};
#pragma unroll
    for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const float p = camel::exp2_ftz(fmaf(s[nt][e], sm, nmu[e >> 1]));
            l[e >> 1] += p;  // the weights before dropout
            s[nt][e] = p;
        }
    if (a.drop_thr != 0) {
        const unsigned drow[2] = {camel::attn_drop_row(a, bh, row), camel::attn_drop_row(a, bh, row + 8)};
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                s[nt][e] *= camel::attn_dropout(a, drow[e >> 1], j0 + 8 * nt + 2 * t + (e & 1));
    }
}

// The (batch · head, tile) of this block: causal grids tile-major, tile `tiles - 1` first when
// `last_first` (query tiles: the last see the most keys) else tile 0 first (key tiles: the first
// are seen by the most queries); other grids head-major, a head's tiles together in L2.
__device__ __forceinline__ void f6_block(long long tiles, long long bhs, bool causal, bool last_first,
                                         long long& bh, long long& tile) {
    if (causal) {
        const long long r = blockIdx.x / bhs;
        tile = last_first ? tiles - 1 - r : r;
        bh = blockIdx.x % bhs;
    } else {
        bh = blockIdx.x / tiles;
        tile = blockIdx.x % tiles;
    }
}

template <typename T, int D, int BC = F6_BC>
__device__ __forceinline__ void attn_fa2_fwd(const u16* __restrict__ q, const u16* __restrict__ k,
                                             const u16* __restrict__ v, u16* __restrict__ o,
                                             float* __restrict__ lse, const AttnArgs a) {
    u16* qs = reinterpret_cast<u16*>(attn_mma_smem);  // [BR][D]
    u16* kbuf = qs + F6_BR * D;                       // [2][BC][D]
    u16* vbuf = kbuf + 2 * BC * D;                 // [2][BC][D]
    long long bh, tile;
    f6_block(camel::ceil_div(a.tq, F6_BR), a.b * a.h, a.causal, true, bh, tile);
    const long long i0 = tile * F6_BR, hh = bh % a.h, bb = bh / a.h;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u16* kb = k + bb * a.k_sb + hh * a.k_sh;
    const u16* vb = v + bb * a.v_sb + hh * a.v_sh;
    const TileCopy<D, BC> kv_copy(threadIdx.x);
    TileCopy<D, F6_BR>(threadIdx.x)(qs, q + bb * a.q_sb + hh * a.q_sh, a.q_st, i0, a.tq);
    kv_copy(kbuf, kb, a.k_st, 0, a.tk);
    kv_copy(vbuf, vb, a.v_st, 0, a.tk);
    hgemm::cp_async_commit();
    const long long w0 = i0 + 16 * F6_MT * w;  // the warp's first row
    const long long n_lo = camel::attn_visible(a, w0);                    // keys all its rows see
    const long long n_hi = camel::attn_visible(a, w0 + 16 * F6_MT - 1);  // keys any of its rows sees
    const long long n_blk = camel::attn_visible(a, min(i0 + F6_BR, a.tq) - 1);
    const float ss = a.scale * camel::LOG2E;  // scores in log2 units
    // the fragments' rows: Q's A fragments and V's transposed B fragments address row lane % 16
    // and column half lane / 16 of a 16 × 16 block, K's B fragments rows lane / 16 · 8 + lane % 8
    // and half lane / 8 % 2 (as frag_a, frag_b_kn and frag_b_nk in mma.cuh)
    const hgemm::SwzRows<D> rows_a(lane % 16, lane / 16 * 8), rows_k(lane / 16 * 8 + lane % 8, lane / 8 % 2 * 8);
    const unsigned sq = hgemm::smem_addr(qs) + 2 * (16 * F6_MT * w) * D;  // the warp's Q rows
    float acc[F6_MT][D / 8][4] = {};
    float m[F6_MT][2], l[F6_MT][2];
#pragma unroll
    for (int mt = 0; mt < F6_MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
    for (long long j0 = 0, it = 0; j0 < n_blk; j0 += BC, ++it) {
        const int cur = it & 1;
        const unsigned sk = hgemm::smem_addr(kbuf) + cur * BC * D * 2;
        const unsigned sv = hgemm::smem_addr(vbuf) + cur * BC * D * 2;
        __syncthreads();  // the tiles of the previous iteration are used up
        if (j0 + BC < n_blk) {  // the next tiles, into the other buffer
            kv_copy(kbuf + (cur ^ 1) * BC * D, kb, a.k_st, j0 + BC, a.tk);
            kv_copy(vbuf + (cur ^ 1) * BC * D, vb, a.v_st, j0 + BC, a.tk);
            hgemm::cp_async_commit();
            hgemm::cp_async_wait<1>();  // this iteration's group (and Q) has landed
        } else {
            hgemm::cp_async_wait<0>();
        }
        __syncthreads();
        if (j0 >= n_hi) continue;  // no row of this warp sees a key of the tile
        // S = Q·Kᵀ for both row tiles: each K fragment feeds both
        float s[F6_MT][BC / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            unsigned qa[F6_MT][4];
#pragma unroll
            for (int mt = 0; mt < F6_MT; ++mt) hgemm::ldmatrix_x4<false>(qa[mt], sq + rows_a.at(16 * mt, 16 * kk));
#pragma unroll
            for (int nt = 0; nt < BC / 8; nt += 2) {
                unsigned b[4];
                hgemm::ldmatrix_x4<false>(b, sk + rows_k.at(8 * nt, 16 * kk));
#pragma unroll
                for (int mt = 0; mt < F6_MT; ++mt) {
                    hgemm::mma16816<T>(s[mt][nt], qa[mt], b[0], b[1]);
                    hgemm::mma16816<T>(s[mt][nt + 1], qa[mt], b[2], b[3]);
                }
            }
        }
        // P, rounded to 16 bits as A fragments as soon as a row tile has it: half the registers
        const bool mask = j0 + BC > n_lo;
        unsigned pa[F6_MT][BC / 16][4];
#pragma unroll
        for (int mt = 0; mt < F6_MT; ++mt) {
            fa2_rows<T, D, BC>(s[mt], acc[mt], m[mt], l[mt], w0 + 16 * mt + g, bh, mask, j0, ss, a, t);
#pragma unroll
            for (int kc = 0; kc < BC / 16; ++kc) c_to_a<T>(pa[mt][kc], s[mt][2 * kc], s[mt][2 * kc + 1]);
        }
        // O += P·V for both row tiles: each V fragment feeds both
#pragma unroll
        for (int kc = 0; kc < BC / 16; ++kc) {
#pragma unroll
            for (int nd = 0; nd < D / 8; nd += 2) {
                unsigned b[4];
                hgemm::ldmatrix_x4<true>(b, sv + rows_a.at(16 * kc, 8 * nd));
#pragma unroll
                for (int mt = 0; mt < F6_MT; ++mt) {
                    hgemm::mma16816<T>(acc[mt][nd], pa[mt][kc], b[0], b[1]);
                    hgemm::mma16816<T>(acc[mt][nd + 1], pa[mt][kc], b[2], b[3]);
                }
            }
        }
    }
#pragma unroll
    for (int mt = 0; mt < F6_MT; ++mt) {
        const long long r_lo = w0 + 16 * mt + g;
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            l[mt][r] = camel::quad_sum(l[mt][r]);  // each thread summed its own columns
            inv[r] = 1.0f / l[mt][r];
            const long long row = r_lo + 8 * r;
            if (t == 0 && row < a.tq) lse[bh * a.tq + row] = (m[mt][r] + log2f(l[mt][r])) * camel::LN2;
        }
        store_rows<T, D>(o, a, bb, hh, a.tq, r_lo, a.tq, acc[mt], inv, t);
    }
}

// ---------------------------------------------------------------------------------------------
// Backward: the FlashAttention-2 backward. A block owns a tile of keys and walks the query tiles
// that see them: it recomputes Sᵀ and dPᵀ, adds into dK and dV in registers, and adds dS·K of
// its keys into an f32 copy of dQ with atomics, five products a tile. The forward's machinery
// carries over: cp.async tile copies double-buffered, fragment bases, masks only on the tiles
// that need them, and causal grids longest first. The order of dQ's sums then depends on the
// blocks' timing; step 4's split (a second kernel for dQ walking the key tiles, no atomics, seven
// products) keeps the gradients bit-for-bit reproducible, and runs with these kernels'
// machinery where determinism is asked for (CAMEL_DETERMINISTIC).

constexpr int F6_BK = 16 * F6_WARPS;        // dK/dV of the split pair: keys of a block, 16 a warp
constexpr int F6_BK_FUSED = 32 * F6_WARPS;  // the fused kernels: keys of a block, 32 a warp
// dK/dV: queries of a tile. Its Sᵀ and dPᵀ accumulators sit beside dK's and dV's: 64 queries fill
// the registers at D = 128; below, 32 queries make twice the tiles but run faster.
template <int D>
constexpr int F6_BQ = D >= 128 ? 64 : 32;
constexpr int F6_BRQ = 16 * F6_WARPS;  // dQ: query rows of a block, 16 a warp


// acc[m][n] and acc[m][n + 1] += a[m] · b for each of the MT 16-row tiles: b holds the two
// 16 × 8 B fragments of one ldmatrix_x4, shared by the tiles.
template <typename T, int MT, int N>
__device__ __forceinline__ void mma_tiles(float (&acc)[MT][N][4], const unsigned (&a)[MT][4], const unsigned (&b)[4],
                                          int n) {
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        hgemm::mma16816<T>(acc[m][n], a[m], b[0], b[1]);
        hgemm::mma16816<T>(acc[m][n + 1], a[m], b[2], b[3]);
    }
}

// Adds dS·K of the block's BKB keys for queries i_lo … i_lo + 15, head columns C0 … C0 + DW − 1,
// into dq_acc (f32, dense [B, Tq, H, D]) with atomics: dS is the tile's dSᵀ in shared memory
// (BKB rows of LDS elements) read transposed by ldmatrix (`sds`: this lane's row address for
// the warp's queries), K the block's key tile (`sks`). Rows past the last query are skipped.
template <typename T, int D, int BKB, int LDS, int C0, int DW>
__device__ __forceinline__ void fa2_dq_add(float* __restrict__ dq_acc, const AttnArgs& a, long long bb,
                                           long long hh, long long i_lo, unsigned sds, unsigned sks,
                                           const hgemm::SwzRows<D>& rows_a, int lane) {
    constexpr int DC = DW < 64 ? DW : 64;  // columns a pass: at most 32 accumulators a thread
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int c0 = C0; c0 < C0 + DW; c0 += DC) {
        float acc[DC / 8][4] = {};
#pragma unroll
        for (int kc = 0; kc < BKB / 16; ++kc) {
            unsigned da[4];
            hgemm::ldmatrix_x4<true>(da, sds + 2 * 16 * kc * LDS);
#pragma unroll
            for (int nd = 0; nd < DC / 8; nd += 2) {
                unsigned b[4];
                hgemm::ldmatrix_x4<true>(b, sks + rows_a.at(16 * kc, c0 + 8 * nd));
                hgemm::mma16816<T>(acc[nd], da, b[0], b[1]);
                hgemm::mma16816<T>(acc[nd + 1], da, b[2], b[3]);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const long long row = i_lo + g + 8 * r;
            if (row >= a.tq) continue;
            float* p = dq_acc + camel::bthd(a, bb, hh, row, a.tq, D) + c0 + 2 * t;
#pragma unroll
            for (int nd = 0; nd < DC / 8; ++nd) {
#if __CUDA_ARCH__ >= 900
                asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p + 8 * nd), "f"(acc[nd][2 * r]),
                             "f"(acc[nd][2 * r + 1])
                             : "memory");
#else
                atomicAdd(p + 8 * nd, acc[nd][2 * r]);
                atomicAdd(p + 8 * nd + 1, acc[nd][2 * r + 1]);
#endif
            }
        }
    }
}

// dK and dV of a block's keys, MT tiles of 16 a warp, walking the query tiles that see them:
// Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, Pᵀ = exp(Sᵀ − lse), dSᵀ = Pᵀ ⊙ (Z ⊙ dPᵀ − Δ), dV += (Pᵀ ⊙ Z)·dO,
// dK += dSᵀ·Q. FUSE: also dQ += dS·K into the f32 `dq_acc` (fa2_dq_add), dSᵀ going through
// shared memory so that each query row sums the block's keys before its one atomic add; and two
// key tiles a warp (128 keys a block), so that every Q and dO fragment a warp loads feeds twice
// the products and each query row takes half the atomic adds (the fused kernels exist up to
// D = 64, whose accumulators leave room for the second tile).
// DROP: with dropout (a kernel instantiates both; without, the mask's code and registers are
// gone from the inner loop, which has none to spare at D = 128).
template <typename T, int D, bool DROP, bool FUSE, int BQ = F6_BQ<D>, int MT = FUSE ? 2 : 1>
__device__ __forceinline__ void attn_fa2_dkdv(const u16* __restrict__ q, const u16* __restrict__ k,
                                              const u16* __restrict__ v, const u16* __restrict__ dout,
                                              const float* __restrict__ lse, const float* __restrict__ delta,
                                              u16* __restrict__ dk, u16* __restrict__ dv,
                                              float* __restrict__ dq_acc, const AttnArgs a) {
    constexpr int KW = 16 * MT, BKB = F6_WARPS * KW;  // keys of a warp, of the block
    static_assert(BKB == (FUSE ? F6_BK_FUSED : F6_BK), "the launcher sizes the grid by these");
    u16* ks = reinterpret_cast<u16*>(attn_mma_smem);     // [BKB][D]
    u16* vs = ks + BKB * D;                              // [BKB][D]
    u16* qbuf = vs + BKB * D;                            // [2][BQ][D]
    u16* dobuf = qbuf + 2 * BQ * D;                      // [2][BQ][D]
    float* lse_s = reinterpret_cast<float*>(dobuf + 2 * BQ * D);  // [2][BQ]
    float* del_s = lse_s + 2 * BQ;                                 // [2][BQ]
    unsigned* drow_s = reinterpret_cast<unsigned*>(del_s + 2 * BQ);  // [2][BQ]
    // FUSE: the tile's dSᵀ, rows padded by 8 elements (the pair stores of a warp's 8 rows, and
    // ldmatrix's 8 rows, hit distinct banks)
    constexpr int LDS = BQ + 8;
    u16* dss = reinterpret_cast<u16*>(drow_s + 2 * BQ);  // [BKB][LDS]
    long long bh, tile;
    // FUSE: head-major grids, causal ones too, so that the blocks running at once add into the
    // dQ rows of a few heads, which stay in L2
    f6_block(camel::ceil_div(a.tk, BKB), a.b * a.h, a.causal && !FUSE, false, bh, tile);
    const long long j0 = tile * BKB, hh = bh % a.h, bb = bh / a.h;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u16* qb = q + bb * a.q_sb + hh * a.q_sh;
    const u16* db = dout + camel::bthd(a, bb, hh, 0, a.tq, D);  // dO rows: a stride of H·D
    const TileCopy<D, BKB> key_copy(threadIdx.x);
    const TileCopy<D, BQ> query_copy(threadIdx.x);
    key_copy(ks, k + bb * a.k_sb + hh * a.k_sh, a.k_st, j0, a.tk);
    key_copy(vs, v + bb * a.v_sb + hh * a.v_sh, a.v_st, j0, a.tk);
    // query tile i0 into buffer b: Q, dO and each query's lse and Δ by cp.async (zeros past the
    // last query, whose weights the masked path drops), the dropout row hashes through registers
    // (the barrier before the tile's use orders them). Loading lse and Δ through registers would
    // put a global-memory round trip before every tile's barrier.
    auto stage = [&](long long i0, int b) {
        query_copy(qbuf + b * BQ * D, qb, a.q_st, i0, a.tq);
        query_copy(dobuf + b * BQ * D, db, a.h * D, i0, a.tq);
        if (threadIdx.x < BQ) {
            const long long i = i0 + threadIdx.x;
            const bool in = i < a.tq;
            camel::cp_async4(lse_s + b * BQ + threadIdx.x, lse + bh * a.tq + (in ? i : 0), in);
            camel::cp_async4(del_s + b * BQ + threadIdx.x, delta + bh * a.tq + (in ? i : 0), in);
            if (DROP) drow_s[b * BQ + threadIdx.x] = camel::attn_drop_row(a, bh, i);
        }
    };
    // the query tiles that see the block's keys, from the first; FUSE without the causal mask:
    // each block starts at the tile of its own keys and wraps around, so that the blocks of a
    // head add into different rows of dQ at any one time
    const long long q_first = camel::first_query(a, j0) / BQ, count = camel::ceil_div(a.tq, BQ) - q_first;
    const long long rot = FUSE && !a.causal ? tile * BKB / BQ : 0;
    auto tile_at = [&](long long it) { return (q_first + (rot != 0 ? (it + rot) % count : it)) * BQ; };
    stage(tile_at(0), 0);
    hgemm::cp_async_commit();
    const long long jw = j0 + KW * w, off = a.tk - a.tq;  // the warp's first key
    const float ss = a.scale * camel::LOG2E;
    const hgemm::SwzRows<D> rows_a(lane % 16, lane / 16 * 8), rows_k(lane / 16 * 8 + lane % 8, lane / 8 % 2 * 8);
    const unsigned sk = hgemm::smem_addr(ks) + 2 * KW * w * D, sv = hgemm::smem_addr(vs) + 2 * KW * w * D;
    float gk[MT][D / 8][4] = {}, gv[MT][D / 8][4] = {};
    for (long long it = 0; it < count; ++it) {
        const long long i0 = tile_at(it);
        const int cur = it & 1;
        __syncthreads();  // the previous tile is used up
        if (it + 1 < count) {
            stage(tile_at(it + 1), cur ^ 1);
            hgemm::cp_async_commit();
            hgemm::cp_async_wait<1>();
        } else {
            hgemm::cp_async_wait<0>();
        }
        __syncthreads();
        // no query of the tile sees a key of the warp's
        if (jw >= a.tk || (a.causal && jw > i0 + BQ - 1 + off)) {
            if constexpr (FUSE) {  // the warp's rows of dSᵀ are zero
#pragma unroll
                for (int c = lane; c < KW * BQ / 8; c += 32)
                    *reinterpret_cast<uint4*>(dss + (KW * w + c / (BQ / 8)) * LDS + c % (BQ / 8) * 8) =
                        make_uint4(0, 0, 0, 0);
            } else {
                continue;
            }
        } else {
            const unsigned sq = hgemm::smem_addr(qbuf) + 2 * cur * BQ * D;
            const unsigned sdo = hgemm::smem_addr(dobuf) + 2 * cur * BQ * D;
            const float* ls = lse_s + cur * BQ;
            const float* dl = del_s + cur * BQ;
            const unsigned* dr = drow_s + cur * BQ;
            // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ: the warp's KW keys (MT tiles of 16) × BQ queries; each
            // Q and dO fragment feeds the MT tiles
            float st[MT][BQ / 8][4] = {}, dpt[MT][BQ / 8][4] = {};
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                unsigned ka[MT][4], va[MT][4];
#pragma unroll
                for (int m = 0; m < MT; ++m) {
                    hgemm::ldmatrix_x4<false>(ka[m], sk + rows_a.at(16 * m, 16 * kk));
                    hgemm::ldmatrix_x4<false>(va[m], sv + rows_a.at(16 * m, 16 * kk));
                }
#pragma unroll
                for (int nt = 0; nt < BQ / 8; nt += 2) {
                    unsigned b[4];
                    hgemm::ldmatrix_x4<false>(b, sq + rows_k.at(8 * nt, 16 * kk));
                    mma_tiles<T>(st, ka, b, nt);
                    hgemm::ldmatrix_x4<false>(b, sdo + rows_k.at(8 * nt, 16 * kk));
                    mma_tiles<T>(dpt, va, b, nt);
                }
            }
            // Pᵀ and dSᵀ; on a tile where some query is past the end or some key hidden from some
            // query, those weights are zero (and a NaN of dO or V there stays out)
            const bool full = i0 + BQ <= a.tq && jw + KW <= a.tk && (!a.causal || jw + KW - 1 <= i0 + off);
#pragma unroll
            for (int nt = 0; nt < BQ / 8; ++nt) {
                const int i2 = 8 * nt + 2 * t;  // this thread's two queries of the column pair
                const float2 l2 = *reinterpret_cast<const float2*>(ls + i2);
                const float2 d2 = *reinterpret_cast<const float2*>(dl + i2);
                const float nl[2] = {-l2.x * camel::LOG2E, -l2.y * camel::LOG2E};  // −lse in log2 units
#pragma unroll
                for (int m = 0; m < MT; ++m)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const long long i = i0 + i2 + (e & 1), j = jw + 16 * m + g + 8 * (e >> 1);
                        const float p = camel::exp2_ftz(fmaf(st[m][nt][e], ss, nl[e & 1]));
                        const float z = DROP ? camel::attn_dropout(a, dr[i2 + (e & 1)], j) : 1.0f;
                        const bool seen = full || (i < a.tq && j < a.tk && (!a.causal || j <= i + off));
                        dpt[m][nt][e] = seen ? p * (z * dpt[m][nt][e] - ((e & 1) ? d2.y : d2.x)) : 0.0f;
                        st[m][nt][e] = seen ? p * z : 0.0f;
                    }
            }
            if constexpr (FUSE) {  // the warp's KW rows of dSᵀ, rounded as the products read them
#pragma unroll
                for (int m = 0; m < MT; ++m)
#pragma unroll
                    for (int nt = 0; nt < BQ / 8; ++nt) {
                        u16* r = dss + (KW * w + 16 * m + g) * LDS + 8 * nt + 2 * t;
                        *reinterpret_cast<unsigned*>(r) = pack_f<T>(dpt[m][nt][0], dpt[m][nt][1]);
                        *reinterpret_cast<unsigned*>(r + 8 * LDS) = pack_f<T>(dpt[m][nt][2], dpt[m][nt][3]);
                    }
            }
            // dV += Pᵀ·dO and dK += dSᵀ·Q, Pᵀ and dSᵀ straight from the accumulators, each dO and
            // Q fragment feeding the MT tiles
#pragma unroll
            for (int kc = 0; kc < BQ / 16; ++kc) {
                unsigned pa[MT][4], da[MT][4];
#pragma unroll
                for (int m = 0; m < MT; ++m) {
                    c_to_a<T>(pa[m], st[m][2 * kc], st[m][2 * kc + 1]);
                    c_to_a<T>(da[m], dpt[m][2 * kc], dpt[m][2 * kc + 1]);
                }
#pragma unroll
                for (int nd = 0; nd < D / 8; nd += 2) {
                    unsigned b[4];
                    hgemm::ldmatrix_x4<true>(b, sdo + rows_a.at(16 * kc, 8 * nd));
                    mma_tiles<T>(gv, pa, b, nd);
                    hgemm::ldmatrix_x4<true>(b, sq + rows_a.at(16 * kc, 8 * nd));
                    mma_tiles<T>(gk, da, b, nd);
                }
            }
        }
        if constexpr (FUSE) {
            __syncthreads();  // every warp's rows of dSᵀ are in place
            // warp w: queries qr … qr + 15 of the tile, the (w / RT)-th of CG column ranges
            constexpr int RT = BQ / 16, CG = F6_WARPS / RT, DW = D / CG;
            const int qr = 16 * (w % RT);
            const unsigned sds =
                hgemm::smem_addr(dss) + 2 * ((lane / 16 * 8 + lane % 8) * LDS + qr + lane / 8 % 2 * 8);
            const unsigned sks = hgemm::smem_addr(ks);
            if (w / RT == 0) {
                fa2_dq_add<T, D, BKB, LDS, 0, DW>(dq_acc, a, bb, hh, i0 + qr, sds, sks, rows_a, lane);
            } else if constexpr (CG > 1) {
                fa2_dq_add<T, D, BKB, LDS, DW, DW>(dq_acc, a, bb, hh, i0 + qr, sds, sks, rows_a, lane);
            }
        }
    }
    const float one[2] = {1.0f, 1.0f}, sc[2] = {a.scale, a.scale};
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        store_rows<T, D>(dv, a, bb, hh, a.tk, jw + 16 * m + g, a.tk, gv[m], one, t);
        store_rows<T, D>(dk, a, bb, hh, a.tk, jw + 16 * m + g, a.tk, gk[m], sc, t);
    }
}

// dQ of F6_BRQ queries (16 a warp), walking the key tiles they see: S = Q·Kᵀ, dP = dO·Vᵀ,
// dS = P ⊙ (Z ⊙ dP − Δ), dQ += dS·K.
template <typename T, int D, bool DROP, int BC = F6_BC>
__device__ __forceinline__ void attn_fa2_dq(const u16* __restrict__ q, const u16* __restrict__ k,
                                            const u16* __restrict__ v, const u16* __restrict__ dout,
                                            const float* __restrict__ lse, const float* __restrict__ delta,
                                            u16* __restrict__ dq, const AttnArgs a) {
    u16* qs = reinterpret_cast<u16*>(attn_mma_smem);  // [BRQ][D]
    u16* dos = qs + F6_BRQ * D;                       // [BRQ][D]
    u16* kbuf = dos + F6_BRQ * D;                     // [2][BC][D]
    u16* vbuf = kbuf + 2 * BC * D;                    // [2][BC][D]
    long long bh, tile;
    f6_block(camel::ceil_div(a.tq, F6_BRQ), a.b * a.h, a.causal, true, bh, tile);
    const long long i0 = tile * F6_BRQ, hh = bh % a.h, bb = bh / a.h;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u16* kb = k + bb * a.k_sb + hh * a.k_sh;
    const u16* vb = v + bb * a.v_sb + hh * a.v_sh;
    const TileCopy<D, F6_BRQ> row_copy(threadIdx.x);
    const TileCopy<D, BC> kv_copy(threadIdx.x);
    row_copy(qs, q + bb * a.q_sb + hh * a.q_sh, a.q_st, i0, a.tq);
    row_copy(dos, dout + camel::bthd(a, bb, hh, 0, a.tq, D), a.h * D, i0, a.tq);
    kv_copy(kbuf, kb, a.k_st, 0, a.tk);
    kv_copy(vbuf, vb, a.v_st, 0, a.tk);
    hgemm::cp_async_commit();
    const long long r_lo = i0 + 16 * w + g;  // this thread's rows: r_lo and r_lo + 8
    float lse2[2], del[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const long long row = r_lo + 8 * r;
        lse2[r] = row < a.tq ? lse[bh * a.tq + row] * camel::LOG2E : INFINITY;
        del[r] = row < a.tq ? delta[bh * a.tq + row] : 0.0f;
    }
    const long long n_lo = camel::attn_visible(a, i0 + 16 * w);       // keys all the warp's rows see
    const long long n_hi = camel::attn_visible(a, i0 + 16 * w + 15);  // keys any of them sees
    const long long n_blk = camel::attn_visible(a, min(i0 + F6_BRQ, a.tq) - 1);
    const float ss = a.scale * camel::LOG2E;
    const hgemm::SwzRows<D> rows_a(lane % 16, lane / 16 * 8), rows_k(lane / 16 * 8 + lane % 8, lane / 8 % 2 * 8);
    const unsigned sq = hgemm::smem_addr(qs) + 2 * 16 * w * D, sdo = hgemm::smem_addr(dos) + 2 * 16 * w * D;
    float gq[D / 8][4] = {};
    for (long long j0 = 0, it = 0; j0 < n_blk; j0 += BC, ++it) {
        const int cur = it & 1;
        __syncthreads();
        if (j0 + BC < n_blk) {
            kv_copy(kbuf + (cur ^ 1) * BC * D, kb, a.k_st, j0 + BC, a.tk);
            kv_copy(vbuf + (cur ^ 1) * BC * D, vb, a.v_st, j0 + BC, a.tk);
            hgemm::cp_async_commit();
            hgemm::cp_async_wait<1>();
        } else {
            hgemm::cp_async_wait<0>();
        }
        __syncthreads();
        if (j0 >= n_hi) continue;  // no row of this warp sees a key of the tile
        const unsigned sk = hgemm::smem_addr(kbuf) + 2 * cur * BC * D;
        const unsigned sv = hgemm::smem_addr(vbuf) + 2 * cur * BC * D;
        // S = Q·Kᵀ and dP = dO·Vᵀ: the warp's 16 queries × BC keys
        float s[BC / 8][4] = {}, dp[BC / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            unsigned qa[4], da[4];
            hgemm::ldmatrix_x4<false>(qa, sq + rows_a.at(0, 16 * kk));
            hgemm::ldmatrix_x4<false>(da, sdo + rows_a.at(0, 16 * kk));
#pragma unroll
            for (int nt = 0; nt < BC / 8; nt += 2) {
                unsigned b[4];
                hgemm::ldmatrix_x4<false>(b, sk + rows_k.at(8 * nt, 16 * kk));
                hgemm::mma16816<T>(s[nt], qa, b[0], b[1]);
                hgemm::mma16816<T>(s[nt + 1], qa, b[2], b[3]);
                hgemm::ldmatrix_x4<false>(b, sv + rows_k.at(8 * nt, 16 * kk));
                hgemm::mma16816<T>(dp[nt], da, b[0], b[1]);
                hgemm::mma16816<T>(dp[nt + 1], da, b[2], b[3]);
            }
        }
        // dS = P ⊙ (Z ⊙ dP − Δ), zero where the key is hidden or past the end
        const bool mask = j0 + BC > n_lo;
        long long lim[2] = {BC, BC};
        unsigned drow[2] = {0, 0};
        if (mask) lim[0] = camel::attn_visible(a, r_lo) - j0, lim[1] = camel::attn_visible(a, r_lo + 8) - j0;
        if (DROP) drow[0] = camel::attn_drop_row(a, bh, r_lo), drow[1] = camel::attn_drop_row(a, bh, r_lo + 8);
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int jj = 8 * nt + 2 * t + (e & 1), r = e >> 1;
                const float p = camel::exp2_ftz(fmaf(s[nt][e], ss, -lse2[r]));
                const float z = DROP ? camel::attn_dropout(a, drow[r], j0 + jj) : 1.0f;
                s[nt][e] = jj < lim[r] ? p * (z * dp[nt][e] - del[r]) : 0.0f;
            }
        // dQ += dS·K
#pragma unroll
        for (int kc = 0; kc < BC / 16; ++kc) {
            unsigned pa[4];
            c_to_a<T>(pa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
            for (int nd = 0; nd < D / 8; nd += 2) {
                unsigned b[4];
                hgemm::ldmatrix_x4<true>(b, sk + rows_a.at(16 * kc, 8 * nd));
                hgemm::mma16816<T>(gq[nd], pa, b[0], b[1]);
                hgemm::mma16816<T>(gq[nd + 1], pa, b[2], b[3]);
            }
        }
    }
    const float sc[2] = {a.scale, a.scale};
    store_rows<T, D>(dq, a, bb, hh, a.tq, r_lo, a.tq, gq, sc, t);
}

}  // namespace

// attn06_fwd_d{D}_{f16,bf16}: blocks of 128 threads (4 warps), one block per (batch · head, 128-row
// tile) on x (causal: tile-major, the last tiles first), dynamic shared memory for the Q tile and
// two K/V pairs.
#define ATTN_FA2_FWD(T, SFX, D)                                                                           \
    extern "C" __global__ void __launch_bounds__(128)                                                     \
        attn06_fwd_d##D##_##SFX(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, \
                                T* __restrict__ o, float* __restrict__ lse, const AttnArgs a) {           \
        CAMEL_PDL_WAIT();                                                                                 \
        attn_fa2_fwd<T, D>(reinterpret_cast<const u16*>(q), reinterpret_cast<const u16*>(k),              \
                           reinterpret_cast<const u16*>(v), reinterpret_cast<u16*>(o), lse, a);           \
    }

ATTN_FA2_FWD(__half, f16, 32)
ATTN_FA2_FWD(__half, f16, 64)
ATTN_FA2_FWD(__half, f16, 128)
ATTN_FA2_FWD(__nv_bfloat16, bf16, 32)
ATTN_FA2_FWD(__nv_bfloat16, bf16, 64)
ATTN_FA2_FWD(__nv_bfloat16, bf16, 128)

// attn06_bwd_dkdv_d{D}_{f16,bf16}: a block per (batch · head, 64-key tile), causal grids the
// first key tiles first; attn06_bwd_dq_d{D}_{f16,bf16}: a block per (batch · head, 64-query
// tile), causal grids the last query tiles first; attn06_bwd_fused_d{32,64}_{f16,bf16}: dK/dV
// and the atomic dQ, a block per (batch · head, 64-key tile), head-major. Blocks of 128 threads,
// dynamic shared memory as the launcher sizes it. attn06p_bwd_*: the same with dropout (p > 0),
// a kernel of its own so that the mask's code takes no registers from the kernels without it.
// At D = 128 only the split pair exists (the launcher's choice).
#define ATTN_FA2_BWD_ONE(PFX, DROP, T, SFX, D)                                                                  \
    extern "C" __global__ void __launch_bounds__(128) PFX##_bwd_dkdv_d##D##_##SFX(                              \
        const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ dout,  \
        const float* __restrict__ lse, const float* __restrict__ delta, T* __restrict__ dk,                     \
        T* __restrict__ dv, const AttnArgs a) {                                                                 \
        CAMEL_PDL_WAIT();                                                                                       \
        attn_fa2_dkdv<T, D, DROP, false>(reinterpret_cast<const u16*>(q), reinterpret_cast<const u16*>(k),      \
                                         reinterpret_cast<const u16*>(v), reinterpret_cast<const u16*>(dout),   \
                                         lse, delta, reinterpret_cast<u16*>(dk), reinterpret_cast<u16*>(dv),    \
                                         nullptr, a);                                                           \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(128) PFX##_bwd_dq_d##D##_##SFX(                                \
        const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ dout,  \
        const float* __restrict__ lse, const float* __restrict__ delta, T* __restrict__ dq, const AttnArgs a) { \
        CAMEL_PDL_WAIT();                                                                                       \
        attn_fa2_dq<T, D, DROP>(reinterpret_cast<const u16*>(q), reinterpret_cast<const u16*>(k),               \
                                reinterpret_cast<const u16*>(v), reinterpret_cast<const u16*>(dout), lse,       \
                                delta, reinterpret_cast<u16*>(dq), a);                                          \
    }
#define ATTN_FA2_BWD_FUSED(PFX, DROP, T, SFX, D)                                                                \
    extern "C" __global__ void __launch_bounds__(128) PFX##_bwd_fused_d##D##_##SFX(                             \
        const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ dout,  \
        const float* __restrict__ lse, const float* __restrict__ delta, T* __restrict__ dk,                     \
        T* __restrict__ dv, float* __restrict__ dq_acc, const AttnArgs a) {                                     \
        CAMEL_PDL_WAIT();                                                                                       \
        attn_fa2_dkdv<T, D, DROP, true>(reinterpret_cast<const u16*>(q), reinterpret_cast<const u16*>(k),       \
                                        reinterpret_cast<const u16*>(v), reinterpret_cast<const u16*>(dout),    \
                                        lse, delta, reinterpret_cast<u16*>(dk), reinterpret_cast<u16*>(dv),     \
                                        dq_acc, a);                                                             \
    }
// The kernels of one head dim: the split pair with and without dropout, and (FUSED) the fused ones.
#define ATTN_FA2_BWD_SPLIT(T, SFX, D)            \
    ATTN_FA2_BWD_ONE(attn06, false, T, SFX, D) \
    ATTN_FA2_BWD_ONE(attn06p, true, T, SFX, D)
#define ATTN_FA2_BWD(T, SFX, D)                    \
    ATTN_FA2_BWD_SPLIT(T, SFX, D)                  \
    ATTN_FA2_BWD_FUSED(attn06, false, T, SFX, D) \
    ATTN_FA2_BWD_FUSED(attn06p, true, T, SFX, D)

// attn06_bwd_dq_store_{f16,bf16}: dq = scale · dq_acc, rounded once, over n4 groups of four
// elements (dense [B, Tq, H, D], D a multiple of 4); blocks of 256 threads striding the groups.
#define ATTN_FA2_DQ_STORE(T, SFX)                                                                         \
    extern "C" __global__ void __launch_bounds__(256) attn06_bwd_dq_store_##SFX(                          \
        const float* __restrict__ dq_acc, T* __restrict__ dq, long long n4, float scale) {                \
        CAMEL_PDL_WAIT();                                                                                 \
        for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n4; i += 256LL * gridDim.x) {            \
            const float4 x = reinterpret_cast<const float4*>(dq_acc)[i];                                  \
            reinterpret_cast<uint2*>(dq)[i] =                                                             \
                make_uint2(pack_f<T>(x.x * scale, x.y * scale), pack_f<T>(x.z * scale, x.w * scale));     \
        }                                                                                                 \
    }

ATTN_MMA_DELTA(__half, f16)
ATTN_MMA_DELTA(__nv_bfloat16, bf16)
ATTN_FA2_DQ_STORE(__half, f16)
ATTN_FA2_DQ_STORE(__nv_bfloat16, bf16)
ATTN_FA2_BWD(__half, f16, 32)
ATTN_FA2_BWD(__half, f16, 64)
ATTN_FA2_BWD_SPLIT(__half, f16, 128)
ATTN_FA2_BWD(__nv_bfloat16, bf16, 32)
ATTN_FA2_BWD(__nv_bfloat16, bf16, 64)
ATTN_FA2_BWD_SPLIT(__nv_bfloat16, bf16, 128)
