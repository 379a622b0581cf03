// Step 7's backward: the FlashAttention-2 backward on Hopper's TMA and `wgmma` (f16 and bf16,
// head dims 64 and 128; sm_90a). Step 6's backward multiplies with `mma.sync`; here each
// warpgroup multiplies whole 64-row tiles with operands the tensor cores read themselves.
//
// A block owns 64 keys a warpgroup of one (batch, head) and walks the query tiles (64 queries)
// that see them: two warpgroups at D = 128, three at D = 64, whose smaller accumulators fit in
// 168 registers a thread. Warpgroup c owns keys k0 + c·64 … k0 + c·64 + 63 and works
// transposed, keys as rows, so that the probabilities and score gradients land in registers
// already laid out as `wgmma`'s A operand:
//   - Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ: m64n64 `wgmma`, both operands K-major in shared memory.
//   - Pᵀ = exp(scale·Sᵀ − lse) with each query's log-sum-exp from the forward (no softmax to
//     redo), and dSᵀ = Pᵀ ⊙ (dPᵀ − Δ) with Δ = rowsum(dO ⊙ O) (computed before this kernel).
//   - dV += Pᵀ·dO and dK += dSᵀ·Q: Pᵀ and dSᵀ rounded to the element type straight from the
//     accumulators into A registers, Q and dO read N-major from shared memory (the transpose
//     flag), so neither P nor dS goes through shared memory for these.
//   - dQ += dS·K needs dS with queries as rows and all 128 keys: both warpgroups write their
//     halves of dSᵀ into a 128-byte swizzled tile, read M-major (the transpose flag of A), and
//     warpgroup c computes dQ's features c·64 … c·64 + 63. It writes that 64 × 64 f32 tile into
//     shared memory, and one of its threads adds the tile into an f32 copy of dQ with one bulk
//     copy (`cp.reduce.async.bulk … .add.f32`). Adding from registers instead (a
//     `red.global.add` a pair) holds every source register until the memory system takes it,
//     and the next instructions that write those registers wait. The copy of dQ is laid out in
//     the order the tiles leave shared memory (see `dq_tile`); the launcher rounds it afterwards.
//   - At D = 64 a warpgroup's dQ tile already spans every feature, so each warpgroup multiplies
//     its own part of dSᵀ by its own 64 keys of K and adds that partial sum: three bulk adds
//     into one tile, and no warpgroup reads another's dSᵀ.
// TMA copies K and V once and the Q and dO tiles into three stages (thread 0 issues the copies;
// an mbarrier a stage counts the bytes); each query's lse and Δ go through registers into shared
// memory a tile ahead. One block barrier a tile (every warpgroup's dSᵀ written); dSᵀ has two
// buffers, so a warpgroup may start the next tile while another still multiplies this one's.
// Causal grids at D = 64 run the key tiles that see the most queries first (`causal_order`).
// Causal blocks start at the first query tile that sees their keys, and only tiles that cross
// the diagonal or the end of the keys apply the mask; queries past Tq read zero Q and dO and an
// lse of +∞, so their P and dS are 0.
// Measurements: docs/kernels/attention.md.
#include "hopper.cuh"  // TMA boxes, the P·V-shaped MMA with A from registers

namespace attn7b {
using namespace attn_hopper;

constexpr int BQ = 64, STAGES = 3;
// warpgroups a block, each owning 64 keys
template <int D>
constexpr int WARPGROUPS = D == 64 ? 3 : 2;
template <int D>
constexpr int BK = 64 * WARPGROUPS<D>;  // keys a block

template <int D>
struct Layout {
    static constexpr int CHUNKS = D / 64;              // 64-wide d chunks
    static constexpr unsigned KEYS = BK<D> * ROW;       // a chunk of the block's keys
    static constexpr unsigned K = CHUNKS * KEYS;        // K: [chunk] keys
    static constexpr unsigned V = CHUNKS * KEYS;        // V: the same
    static constexpr unsigned Q = CHUNKS * BOX64;       // a Q (or dO) tile: [chunk] 64 queries
    static constexpr unsigned STAGE = 2 * Q;            // Q, then dO
    static constexpr unsigned DS = KEYS;                // dSᵀ: the keys × 64 queries
    static constexpr unsigned DQ = BQ * 64 * 4;         // a warpgroup's dQ tile: 64 queries × 64 f32
    // K, V, the stages, two dSᵀ buffers, a dQ tile a warpgroup, and alignment to 1024 bytes
    static constexpr unsigned SMEM = K + V + STAGES * STAGE + 2 * DS + WARPGROUPS<D> * DQ + 1024;
};
// with the 1 KiB of `stats` and the barriers, the most a block may have
static_assert(Layout<64>::SMEM + 1024 + 64 <= 227 * 1024, "the block's shared memory exceeds the SM's");
static_assert(Layout<128>::SMEM + 1024 + 64 <= 227 * 1024, "the block's shared memory exceeds the SM's");

// dQ's f32 copy holds, for each (batch · head, 64-query tile, 64-feature chunk c), the 4096
// floats of that tile in the order a warpgroup's threads hold them: float4 j (of 8) of thread i
// (of 128) at [j][i], which is dq_acc[4j … 4j + 3], so that each st.shared.v4 of a warp is 512
// contiguous bytes. Thread i = 32·w + l holds queries 16w + l/4 (+ 8 for the second pair of a
// float4) and features c·64 + 8j + 2(l % 4) (+ 1). Rows past Tq are padding, never read back.
template <int D>
__device__ __forceinline__ long long dq_tile(long long bh, int qt, int qtiles, int c) {
    return ((bh * qtiles + qt) * (D / 64) + c) * (long long)(BQ * 64);
}

// One committed group: x = A·Bᵀ for a 64-row tile of A (keys, at shared address `a`: [chunk] of
// BK-row boxes) and the 64-row tile of B (queries, at `b`: [chunk] of 64-row boxes), both
// K-major over the D features: Sᵀ = K·Qᵀ or dPᵀ = V·dOᵀ.
template <typename T, int D>
__device__ __forceinline__ void tile_t(float (&x)[32], unsigned a, unsigned b) {
    Mma64First<T, 0, 0>::run(x, desc(a, 16, 1024), desc(b, 16, 1024));
#pragma unroll
    for (int kk = 1; kk < D / 16; ++kk)
        Mma<T, 64, 0, 0>::run(x, desc(a + (kk / 4) * Layout<D>::KEYS + (kk % 4) * 32, 16, 1024),
                              desc(b + (kk / 4) * BOX64 + (kk % 4) * 32, 16, 1024));
    wgmma_commit();
}

template <typename T, int D>
__device__ __forceinline__ void backward(const TmaMap& mq, const TmaMap& mk, const TmaMap& mv, const TmaMap& mdo,
                                         const float* __restrict__ lse, const float* __restrict__ delta,
                                         T* __restrict__ dk, T* __restrict__ dv, float* __restrict__ dq,
                                         const AttnArgs& a) {
    using L = Layout<D>;
    CAMEL_PDL_WAIT();
    extern __shared__ unsigned char attn7b_raw[];
    __shared__ __align__(8) unsigned long long kvbar, full[STAGES];
    __shared__ float2 stats[2][BQ];  // per query of a tile: (lse in log2 units, Δ), two tiles
    // the swizzle pattern repeats every 1024 bytes: tiles start on such a boundary
    unsigned char* smem = attn7b_raw + ((1024u - (smem_u32(attn7b_raw) & 1023u)) & 1023u);
    unsigned char* sk = smem;
    unsigned char* sv = sk + L::K;
    unsigned char* sqo = sv + L::V;  // the stages: Q then dO
    unsigned char* sds = sqo + STAGES * L::STAGE;  // two dSᵀ buffers
    unsigned char* sdq = sds + 2 * L::DS;          // the warpgroups' dQ tiles

    // With the mask, at D = 64 the key tiles that see the most queries (the first ones) run
    // first. At D = 128 every register is taken and the order's arithmetic would spill, so the
    // blocks keep the plain numbering (docs/kernels/attention.md, "Causal grids").
    const long long ktiles = (a.tk + BK<D> - 1) / BK<D>;
    const int piece = D == 64 && a.causal ? causal_order(a, (int)blockIdx.x, (int)ktiles, D)
                                          : (int)blockIdx.x;
    const long long bh = piece / ktiles;
    const int k0 = (int)(piece % ktiles) * BK<D>;
    const int bb = (int)(bh / a.h), hh = (int)(bh % a.h);
    const int tid = threadIdx.x, c = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
    const int qtiles = (int)((a.tq + BQ - 1) / BQ);
    // the query tiles that see these keys: from the one holding the first query that sees key k0
    const int first = (int)(camel::first_query(a, k0) / BQ), n = qtiles - first;
    // without the mask, a head's blocks start at different tiles, so that they add into
    // different rows of dQ at any one time
    const int start = a.causal || qtiles == 0 ? 0 : (k0 / BQ) % qtiles;
    auto qtile = [&](int t) { return first + (start + t) % n; };

    auto load_q = [&](int t) {  // Q and dO of the walk's tile t into stage t % STAGES
        unsigned char* s = sqo + (t % STAGES) * L::STAGE;
        unsigned long long* bar = &full[t % STAGES];
        const int q0 = qtile(t) * BQ;
        mbar_expect_tx(bar, L::STAGE);
#pragma unroll
        for (int ch = 0; ch < L::CHUNKS; ++ch) {
            tma_load4(s + ch * BOX64, mq, 64 * ch, q0, hh, bb, bar);
            tma_load4(s + L::Q + ch * BOX64, mdo, 64 * ch, q0, hh, bb, bar);
        }
    };
    auto load_stats = [&](int t) {  // thread tid < BQ: query tid of tile t
        const long long q = (long long)qtile(t) * BQ + tid;
        return q < a.tq ? make_float2(lse[bh * a.tq + q] * camel::LOG2E, delta[bh * a.tq + q])
                        : make_float2(INFINITY, 0.0f);
    };
    if (tid == 0) {
        mbar_init(&kvbar, 1);
#pragma unroll
        for (int i = 0; i < STAGES; ++i) mbar_init(&full[i], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        mbar_expect_tx(&kvbar, L::K + L::V);
#pragma unroll
        for (int ch = 0; ch < L::CHUNKS; ++ch) {
            tma_load4(sk + ch * L::KEYS, mk, 64 * ch, k0, hh, bb, &kvbar);
            tma_load4(sv + ch * L::KEYS, mv, 64 * ch, k0, hh, bb, &kvbar);
        }
#pragma unroll
        for (int t = 0; t < STAGES; ++t)
            if (t < n) load_q(t);
    }
    if (tid < BQ && n > 0) stats[0][tid] = load_stats(0);
    __syncthreads();

    const float ss = a.scale * camel::LOG2E;  // scores in log2 units
    // this thread's keys: kbase and kbase + 8 (rows of Sᵀ, dK and dV)
    const int kc0 = k0 + c * 64, kbase = kc0 + warp * 16 + lane / 4;
    // this warpgroup's 64 keys start c · 8 KiB into each K and V chunk
    const unsigned ka = smem_u32(sk) + c * BOX64, va = smem_u32(sv) + c * BOX64;
    // dQ's operands. At D = 128: dSᵀ of all 128 keys and K's feature chunk c. At D = 64: this
    // warpgroup's own 64 keys of dSᵀ and of K, a partial sum over its keys.
    constexpr int DQ_KEYS = D == 128 ? BK<D> : 64;
    const unsigned kb = smem_u32(sk) + (D == 128 ? c * L::KEYS : c * BOX64);
    const unsigned ds_own = D == 128 ? 0 : c * BOX64;
    // this warpgroup's dQ tile; its thread 0 issues the bulk adds
    const unsigned dqs = smem_u32(sdq) + c * L::DQ;
    const bool adder = tid % 128 == 0;

    float dk_acc[D / 2], dv_acc[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dk_acc[i] = dv_acc[i] = 0.0f;
    mbar_wait(&kvbar, 0);

    // One bulk add of this warpgroup's dQ tile, once every thread has stored its part. At D = 64
    // each tile adds the previous one's after issuing its own Sᵀ and dPᵀ, so that the fence and
    // the warpgroup's barrier wait while the tensor cores work; at D = 128, whose two warpgroups
    // run in step, that measures slower, and each tile adds its own at once.
    auto add_dq = [&](int query_tile) {
        // the bulk copy (async proxy) must see the generic-proxy writes of the whole warpgroup
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
        if (adder) {
            float* dst = dq + dq_tile<D>(bh, query_tile, qtiles, D == 128 ? c : 0);
            asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                         "cp.async.bulk.commit_group;\n" ::"l"(dst), "r"(dqs), "n"(L::DQ)
                         : "memory");
        }
    };

    for (int t = 0; t < n; ++t) {
        const int st = t % STAGES, q0 = qtile(t) * BQ;
        float2 next = make_float2(0.0f, 0.0f);
        if (tid < BQ && t + 1 < n) next = load_stats(t + 1);
        mbar_wait(&full[st], (t / STAGES) & 1);
        const unsigned qb = smem_u32(sqo + st * L::STAGE), ob = qb + L::Q;

        // Sᵀ = K·Qᵀ, then dPᵀ = V·dOᵀ, two groups
        float s[32], dp[32];
        wgmma_fence();
        tile_t<T, D>(s, ka, qb);
        tile_t<T, D>(dp, va, ob);
        if (D == 64 && t > 0) add_dq(qtile(t - 1));
        wgmma_wait<1>();  // Sᵀ

        // Pᵀ: s[4n + 2h + e] is key kbase + 8h, query q0 + 8n + 2(lane % 4) + e
        const float2* rs = stats[t % 2];
        const bool masked = kc0 + 63 >= a.tk || (a.causal && kc0 + 63 > q0 + (a.tk - a.tq));
        unsigned pa[4][4];
#pragma unroll
        for (int n8 = 0; n8 < 8; ++n8) {
            const int col = 8 * n8 + 2 * (lane % 4);
            const float l2[2] = {rs[col].x, rs[col + 1].x};
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float& x = s[4 * n8 + 2 * h + e];
                    x = camel::exp2_ftz(fmaf(x, ss, -l2[e]));
                    if (masked && kbase + 8 * h >= visible_keys(a, q0 + col + e)) x = 0.0f;
                }
                pa[n8 / 2][(n8 % 2) * 2 + h] = pack2<T>(s[4 * n8 + 2 * h], s[4 * n8 + 2 * h + 1]);
            }
        }
        // dV += Pᵀ·dO
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) PvMma<T, D>::run(dv_acc, pa[kk], desc(ob + kk * 16 * ROW, BOX64, 1024));
        wgmma_commit();
        wgmma_wait<1>();  // dPᵀ

        // dSᵀ = Pᵀ ⊙ (dPᵀ − Δ), rounded into A registers for dK and into shared memory for dQ
        unsigned da[4][4];
#pragma unroll
        for (int n8 = 0; n8 < 8; ++n8) {
            const int col = 8 * n8 + 2 * (lane % 4);
            const float dl[2] = {rs[col].y, rs[col + 1].y};
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int i = 4 * n8 + 2 * h;
                da[n8 / 2][(n8 % 2) * 2 + h] = pack2<T>(s[i] * (dp[i] - dl[0]), s[i + 1] * (dp[i + 1] - dl[1]));
            }
        }
        // dK += dSᵀ·Q
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) PvMma<T, D>::run(dk_acc, da[kk], desc(qb + kk * 16 * ROW, BOX64, 1024));
        wgmma_commit();
        // dSᵀ row r (a key) is 128 bytes of 64 queries; 16-byte chunk n8 lands at n8 ^ (r % 8).
        // Two buffers: the other warpgroup may still be reading the previous tile's.
        const unsigned ds = smem_u32(sds) + (t % 2) * L::DS;
#pragma unroll
        for (int n8 = 0; n8 < 8; ++n8)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const unsigned r = c * 64 + warp * 16 + lane / 4 + 8 * h;
                const unsigned addr = ds + r * ROW + ((n8 ^ (r % 8)) * 16) + 4 * (lane % 4);
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(da[n8 / 2][(n8 % 2) * 2 + h]) : "memory");
            }
        // the async proxy (wgmma) must see these generic-proxy writes
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        if (tid < BQ && t + 1 < n) stats[(t + 1) % 2][tid] = next;
        // the previous tile's bulk add has read this warpgroup's dQ tile (the barrier below tells
        // the warpgroup it may write it again)
        if (adder) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
        // dSᵀ of both warpgroups is in shared memory, and both are done with the MMAs of tile
        // t − 1 (each waits for all of a tile's before the next), so its stage takes tile t + 2
        __syncthreads();
        if (tid == 0 && t >= 1 && t + 2 < n) load_q(t + 2);

        // dQ (this warpgroup's part) = dS·K: A = dSᵀ read M-major, B = K read N-major
        float dq_acc[32];
        wgmma_fence();
        Mma64First<T, 1, 1>::run(dq_acc, desc(ds + ds_own, BOX64, 1024), desc(kb, BOX128, 1024));
#pragma unroll
        for (int kk = 1; kk < DQ_KEYS / 16; ++kk)
            Mma<T, 64, 1, 1>::run(dq_acc, desc(ds + ds_own + kk * 16 * ROW, BOX64, 1024),
                                  desc(kb + kk * 16 * ROW, BOX128, 1024));
        wgmma_commit();
        wgmma_wait<0>();

        // dQ's tile into shared memory in the order of `dq_tile`
#pragma unroll
        for (int j = 0; j < 8; ++j)
            asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(dqs + (j * 128 + tid % 128) * 16),
                         "f"(dq_acc[4 * j]), "f"(dq_acc[4 * j + 1]), "f"(dq_acc[4 * j + 2]), "f"(dq_acc[4 * j + 3])
                         : "memory");
        if (D == 128) add_dq(qtile(t));
    }
    if (D == 64 && n > 0) add_dq(qtile(n - 1));
    // the adds are done before the block exits
    if (adder) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");

    // dK = scale · Σ dSᵀ·Q and dV = Σ Pᵀ·dO, rows kbase and kbase + 8, into dense [B, Tk, H, D]
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const long long key = kbase + 8 * h;
        if (key >= a.tk) continue;
        T* pk = dk + camel::bthd(a, bb, hh, key, a.tk, D);
        T* pv = dv + camel::bthd(a, bb, hh, key, a.tk, D);
#pragma unroll
        for (int n8 = 0; n8 < D / 8; ++n8) {
            const int col = 8 * n8 + 2 * (lane % 4), i = 4 * n8 + 2 * h;
            *reinterpret_cast<unsigned*>(pk + col) = pack2<T>(dk_acc[i] * a.scale, dk_acc[i + 1] * a.scale);
            *reinterpret_cast<unsigned*>(pv + col) = pack2<T>(dv_acc[i], dv_acc[i + 1]);
        }
    }
}

}  // namespace attn7b

// attn07_bwd_d{64,128}_{f16,bf16}(q map, k map, v map, dO map, const float* lse, const float*
// delta, T* dk, T* dv, float* dq_acc, AttnArgs): one block of 128 · WARPGROUPS<D> threads a
// (batch · head, tile of BK<D> keys); dq_acc (B · H · ⌈Tq / 64⌉ · 64 · D floats, laid out as
// `dq_tile` says) is zeroed before and rounded after by attn07_bwd_dq_store_d{D}_{f16,bf16}.
#define ATTN07_BWD(D, T, SFX)                                                                            \
    extern "C" __global__ void __launch_bounds__(128 * attn7b::WARPGROUPS<D>, 1)                         \
        attn07_bwd_d##D##_##SFX(                                                                         \
        const __grid_constant__ wg::TmaMap mq, const __grid_constant__ wg::TmaMap mk,                      \
        const __grid_constant__ wg::TmaMap mv, const __grid_constant__ wg::TmaMap mdo,                     \
        const float* __restrict__ lse, const float* __restrict__ delta, T* __restrict__ dk,              \
        T* __restrict__ dv, float* __restrict__ dq, AttnArgs a) {                                        \
        attn7b::backward<T, D>(mq, mk, mv, mdo, lse, delta, dk, dv, dq, a);                              \
    }
ATTN07_BWD(64, __half, f16)
ATTN07_BWD(64, __nv_bfloat16, bf16)
ATTN07_BWD(128, __half, f16)
ATTN07_BWD(128, __nv_bfloat16, bf16)

namespace attn7b {
// dq (dense [B, Tq, H, D]) = scale · dq_acc, rounded once, from the layout of `dq_tile`; n4 is
// dq_acc's count of float4s (B · H · ⌈Tq / 64⌉ · 16 · D). A thread reads one float4 (two
// features of two queries) and writes two pairs; blocks of 256 threads stride the float4s.
template <typename T, int D>
__device__ __forceinline__ void dq_store(const float* __restrict__ dq_acc, T* __restrict__ dq, const AttnArgs& a,
                                         long long n4) {
    CAMEL_PDL_WAIT();
    const int qtiles = (int)((a.tq + BQ - 1) / BQ);
    for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n4; i += 256LL * gridDim.x) {
        const float4 x = reinterpret_cast<const float4*>(dq_acc)[i];
        const int th = (int)(i % 128), j = (int)(i / 128 % 8), c = (int)(i / 1024 % (D / 64));
        const long long tile = i / (1024 * (D / 64)), bh = tile / qtiles;
        const int bb = (int)(bh / a.h), hh = (int)(bh % a.h);
        const long long q = (tile % qtiles) * BQ + (th / 32) * 16 + (th % 32) / 4;
        const int f = c * 64 + 8 * j + 2 * (th % 4);
        if (q < a.tq)
            *reinterpret_cast<unsigned*>(dq + camel::bthd(a, bb, hh, q, a.tq, D) + f) =
                pack2<T>(x.x * a.scale, x.y * a.scale);
        if (q + 8 < a.tq)
            *reinterpret_cast<unsigned*>(dq + camel::bthd(a, bb, hh, q + 8, a.tq, D) + f) =
                pack2<T>(x.z * a.scale, x.w * a.scale);
    }
}
}  // namespace attn7b

// attn07_bwd_dq_store_d{64,128}_{f16,bf16}(const float* dq_acc, T* dq, AttnArgs a, long long n4):
// attn7b::dq_store.
#define ATTN07_DQ_STORE(D, T, SFX)                                                                       \
    extern "C" __global__ void __launch_bounds__(256) attn07_bwd_dq_store_d##D##_##SFX(                  \
        const float* __restrict__ dq_acc, T* __restrict__ dq, AttnArgs a, long long n4) {                \
        attn7b::dq_store<T, D>(dq_acc, dq, a, n4);                                                       \
    }
ATTN07_DQ_STORE(64, __half, f16)
ATTN07_DQ_STORE(64, __nv_bfloat16, bf16)
ATTN07_DQ_STORE(128, __half, f16)
ATTN07_DQ_STORE(128, __nv_bfloat16, bf16)
