// Step 7: the forward on Hopper's TMA and `wgmma` (f16 and bf16, head dims 64 and 128; sm_90a).
// Step 6 multiplies with `mma.sync`, each warp first loading its fragments from shared memory
// with `ldmatrix`; here a warpgroup (four warps) multiplies whole 64-row tiles with operands
// read by the tensor cores themselves:
//   - TMA copies the block's Q tile once and K/V tiles of 128 keys into two stages of 128-byte
//     swizzled shared memory (thread 0 issues the copies; an mbarrier a stage counts the bytes).
//     The tensor maps are 4-D (d, token, head, batch) with q's, k's and v's own strides, so a
//     tile past the end of a sequence reads zeros instead of the next head's rows.
//   - S = Q·Kᵀ: D/16 m64n128k16 `wgmma` a warpgroup, both operands from shared memory (K-major).
//   - The online softmax runs on S's registers: each thread holds columns of two rows, reduced
//     across its quad. Keys past Tk and, with the causal mask, past each row's last visible key
//     are −∞ (only in the tiles that reach them).
//   - P, rounded to the element type, is already in the register layout of `wgmma`'s A operand
//     (the accumulator's), so O += P·V takes P from registers and V from shared memory (V is
//     stored keys × d: N-major, the transpose flag).
//   - A block barrier, then thread 0 refills the stage just read. The MMAs and the softmax wait
//     for each other; overlapping them is FlashAttention-3's warp specialization.
// A block of two warpgroups takes 128 queries of one (batch, head); the launcher gives other head
// dims, dropout, other GPUs and operands TMA cannot address to step 6. The backward is step 6's.
// Measurements: docs/kernels/attention.md.
#include "hopper.cuh"  // TMA boxes, the P·V MMA, the tile's softmax, the epilogue

namespace attn7 {
using namespace attn_hopper;

constexpr int BQ = 128, BKV = 128, THREADS = 256;

template <int D>
struct Layout {
    static constexpr int CHUNKS = D / 64;                         // 64-wide d chunks
    static constexpr unsigned Q = CHUNKS * BOX128;                // Q: [chunk] 128 rows
    static constexpr unsigned K = CHUNKS * BOX128;                // K: [chunk] 128 keys
    static constexpr unsigned V = 2 * CHUNKS * BOX64;             // V: [key half][chunk] 64 keys
    static constexpr unsigned STAGE = K + V;
    static constexpr unsigned SMEM = Q + 2 * STAGE + 1024;        // + alignment to 1024 bytes
};

template <typename T, int D>
__device__ __forceinline__ void forward(const TmaMap& mq, const TmaMap& mk, const TmaMap& mv, T* __restrict__ o,
                                        float* __restrict__ lse, const AttnArgs& a) {
    using L = Layout<D>;
    CAMEL_PDL_WAIT();
    extern __shared__ unsigned char attn7_raw[];
    __shared__ __align__(8) unsigned long long qbar, full[2];
    // the swizzle pattern repeats every 1024 bytes: tiles start on such a boundary
    unsigned char* smem = attn7_raw + ((1024u - (smem_u32(attn7_raw) & 1023u)) & 1023u);
    unsigned char* sq = smem;
    unsigned char* st = smem + L::Q;  // two stages of K then V

    const long long qtiles = (a.tq + BQ - 1) / BQ;
    const long long bh = blockIdx.x / qtiles;
    const int q0 = (int)(blockIdx.x % qtiles) * BQ;
    const int bb = (int)(bh / a.h), hh = (int)(bh % a.h);
    const int tid = threadIdx.x, c = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
    // key tiles this block reads: all of them, or up to the last key its last row sees
    const long long last_key = a.causal ? min(a.tk, q0 + BQ + (a.tk - a.tq)) : a.tk;
    const int tiles = (int)((last_key + BKV - 1) / BKV);

    auto load_kv = [&](int j) {
        unsigned char* s = st + (j % 2) * L::STAGE;
        const int k0 = j * BKV;
        mbar_expect_tx(&full[j % 2], L::STAGE);
#pragma unroll
        for (int ch = 0; ch < L::CHUNKS; ++ch) tma_load4(s + ch * BOX128, mk, 64 * ch, k0, hh, bb, &full[j % 2]);
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
            for (int ch = 0; ch < L::CHUNKS; ++ch)
                tma_load4(s + L::K + (half * L::CHUNKS + ch) * BOX64, mv, 64 * ch, k0 + 64 * half, hh, bb,
                          &full[j % 2]);
    };
    if (tid == 0) {
        mbar_init(&qbar, 1);
        mbar_init(&full[0], 1);
        mbar_init(&full[1], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        mbar_expect_tx(&qbar, L::Q);
#pragma unroll
        for (int ch = 0; ch < L::CHUNKS; ++ch) tma_load4(sq + ch * BOX128, mq, 64 * ch, q0, hh, bb, &qbar);
        if (tiles > 0) load_kv(0);
        if (tiles > 1) load_kv(1);
    }
    __syncthreads();

    const float ss = a.scale * camel::LOG2E;  // scores in log2 units
    // this thread's rows within the block: r_h = c·64 + warp·16 + lane/4 + 8h
    const long long rbase = q0 + c * 64 + warp * 16 + lane / 4;
    const int visible[2] = {visible_keys(a, rbase), visible_keys(a, rbase + 8)};
    float acc[D / 2], s[64];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) acc[i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    mbar_wait(&qbar, 0);
    // this warpgroup's 64 query rows start 8 KiB into each Q chunk
    const unsigned qa = smem_u32(sq) + c * BOX64;

    for (int j = 0; j < tiles; ++j) {
        mbar_wait(&full[j % 2], (j / 2) & 1);
        const unsigned sk = smem_u32(st + (j % 2) * L::STAGE), sv = sk + L::K;
#pragma unroll
        for (int i = 0; i < 64; ++i) s[i] = 0.0f;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const unsigned off = (kk / 4) * BOX128 + (kk % 4) * 32;
            Mma<T, 128, 0, 0>::run(s, desc(qa + off, 16, 1024), desc(sk + off, 16, 1024));
        }
        wgmma_commit();
        wgmma_wait<0>();

        const int k0 = j * BKV;
        const bool tail = k0 + BKV > a.tk;
        const bool diag = a.causal && k0 + BKV - 1 > q0 + (a.tk - a.tq);
        unsigned pa[8][4];
        float alpha[2];
        softmax_tile<T>(s, m, l, alpha, pa, ss, k0, visible, lane, tail || diag);
        rescale<D>(acc, alpha);
        wgmma_fence();
        pv_tile<T, D>(acc, pa, sv);
        wgmma_commit();
        wgmma_wait<0>();
        __syncthreads();  // both warpgroups are done with this stage
        if (tid == 0 && j + 2 < tiles) load_kv(j + 2);
    }
    store_rows<T, D>(acc, m, l, o, lse, a, bh, bb, hh, rbase, lane);
}

}  // namespace attn7

// attn07_fwd_d{64,128}_{f16,bf16}(q map, k map, v map, T* o, float* lse, AttnArgs): one block of
// 256 threads a (batch · head, 128-query tile).
ATTN_HOPPER_STEP(attn07, attn7)
