// Step 8: step 7's forward with its waits taken out of the critical path, as FlashAttention-3
// does (f16 and bf16, head dims 64 and 128; sm_90a). In step 7 every thread waits for each MMA
// before the softmax and for the softmax before the next MMA, and the block waits at a barrier
// before a stage is refilled. Here:
//   - Warp specialization. A block has three warpgroups. The producer (warpgroup 0; one thread
//     issues every TMA copy) gives up registers (`setmaxnreg.dec` to 24, 32 at D = 64) and the
//     two consumers, 64 query rows each, take them (`setmaxnreg.inc` to 240, 232 at D = 64). K
//     and V tiles have stages of their own: a `full` mbarrier a stage says the bytes have landed,
//     an `empty` one that the eight consumer warps are done reading it, so the producer refills a
//     stage as soon as both consumers have moved past it and no consumer waits for the other.
//   - The softmax overlaps the MMAs. A consumer issues S_j = Q·K_jᵀ, then O += P_{j−1}·V_{j−1}
//     with the previous tile's probabilities, and waits only for S_j: the softmax of tile j runs
//     on the CUDA cores while the tensor cores add P_{j−1}·V_{j−1}. O is rescaled to tile j's
//     maxima once that MMA is done. This needs two sets of probabilities in registers (P_{j−1}
//     being read, P_j being written), hence the registers taken from the producer.
//   - The two consumers take turns issuing their MMAs (two named barriers), so that the tensor
//     cores run one consumer's MMAs while the other computes its softmax.
//   - Causal grids run the longest query tiles of a chunk of heads first (`causal_order`).
//   - Persistent blocks: one block a multiprocessor runs query tiles in turn, taking the next
//     from a count in global memory, so that blocks that drew short causal tiles take more of
//     them. Its producer loads the next tile's Q and keys while the consumers finish this one's,
//     so that a short row of key tiles does not pay for filling the pipeline and for a block's
//     launch each time. Tile numbers reach the consumers through slots with `full` and `empty`
//     mbarriers, and the turns run on from one tile to the next, so that neither consumer waits
//     for the other to finish a tile before it starts the next.
// The tile geometry, the register layouts and the softmax are step 7's (hopper.cuh). The launcher
// gives other head dims, dropout, other GPUs and operands TMA cannot address to step 6; the
// backward is step 7's. Measurements: docs/kernels/attention.md.
#include "hopper.cuh"  // TMA boxes, the P·V MMA, the tile's softmax, the epilogue

namespace attn8 {
using namespace attn_hopper;

constexpr int BQ = 128, BKV = 128, THREADS = 384, STAGES = 2;
// a K or V stage is free once each of the 8 consumer warps has read it
constexpr unsigned RELEASES = 8;

template <int D>
struct Layout {
    static constexpr int CHUNKS = D / 64;                    // 64-wide d chunks
    static constexpr unsigned Q = CHUNKS * BOX128;           // Q: [chunk] 128 rows
    static constexpr unsigned K = CHUNKS * BOX128;           // a K stage: [chunk] 128 keys
    static constexpr unsigned V = 2 * CHUNKS * BOX64;        // a V stage: [key half][chunk] 64 keys
    static constexpr unsigned SMEM = 2 * Q + STAGES * (K + V) + 1024;  // + alignment to 1024 bytes
};

// This warp is done reading a stage: one arrival on its `empty` mbarrier, after the whole warp.
__device__ __forceinline__ void release(unsigned long long* bar, int lane) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
}

// One block's work item: 128 query rows of one (batch · head). Items are numbered a head's
// tiles together, with the causal mask its longest tiles first; causal grids take them in
// `causal_order`.
struct Item {
    long long bh;
    int q0, bb, hh;
    int tiles;  // key tiles it reads: all of them, or up to the last key its last row sees
};
__device__ __forceinline__ Item item(const AttnArgs& a, int it) {
    const long long qtiles = (a.tq + BQ - 1) / BQ;
    Item w;
    w.bh = it / qtiles;
    const long long qt = a.causal ? qtiles - 1 - it % qtiles : it % qtiles;
    w.q0 = (int)qt * BQ;
    w.bb = (int)(w.bh / a.h);
    w.hh = (int)(w.bh % a.h);
    const long long last_key = a.causal ? min(a.tk, w.q0 + BQ + (a.tk - a.tq)) : a.tk;
    w.tiles = last_key > 0 ? (int)((last_key + BKV - 1) / BKV) : 0;
    return w;
}

template <typename T, int D>
__device__ __forceinline__ void forward(const TmaMap& mq, const TmaMap& mk, const TmaMap& mv, T* __restrict__ o,
                                        float* __restrict__ lse, const AttnArgs& a, int* __restrict__ next) {
    using L = Layout<D>;
    CAMEL_PDL_WAIT();
    extern __shared__ unsigned char attn8_raw[];
    __shared__ __align__(8) unsigned long long full_q[2], empty_q[2], full_k[STAGES], full_v[STAGES],
        empty_k[STAGES], empty_v[STAGES], full_item[2], empty_item[2];
    // the swizzle pattern repeats every 1024 bytes: tiles start on such a boundary
    unsigned char* smem = attn8_raw + ((1024u - (smem_u32(attn8_raw) & 1023u)) & 1023u);
    unsigned char* sq = smem;                 // two Q tiles
    unsigned char* sk = sq + 2 * L::Q;        // STAGES K tiles
    unsigned char* sv = sk + STAGES * L::K;   // STAGES V tiles

    // A block runs item blockIdx.x, then takes the next one not yet taken (gridDim.x + a count
    // that is zero at launch) until none is left: one item each in a grid of a block an item,
    // several in turn in a grid of a block a multiprocessor, as fast as each block runs them.
    // The K and V stages run on from one item to the next, and Q has two buffers, so the
    // producer loads the next item's Q and first key tiles while the consumers finish this
    // one's. The producer hands each item number (-1: none is left) to the consumers in one of
    // two slots of `item_of`, with `full` and `empty` mbarriers as a stage has, so that neither
    // consumer waits for the other to finish an item before it starts the next.
    // (the launcher checks that the items' count fits an int)
    const int qtiles = (int)((a.tq + BQ - 1) / BQ), items = (int)(a.b * a.h * qtiles);
    __shared__ int item_of[2];
    // Every item a block runs ends in one take, so a launch makes exactly `items` takes and the
    // one that reads items − 1 is the last: it sets the count back to zero for the next launch.
    auto take = [&]() {
        const int r = atomicAdd(next, 1);
        if (r == items - 1) atomicExch(next, 0);
        return (int)gridDim.x + r;
    };
    const int tid = threadIdx.x, warp = (tid % 128) / 32, lane = tid % 32;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            mbar_init(&full_q[s], 1);
            mbar_init(&empty_q[s], RELEASES);
            mbar_init(&full_item[s], 1);
            mbar_init(&empty_item[s], RELEASES);
        }
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full_k[s], 1);
            mbar_init(&full_v[s], 1);
            mbar_init(&empty_k[s], RELEASES);
            mbar_init(&empty_v[s], RELEASES);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (tid < 128) {  // the producer
        // at D = 64 the consumers need fewer, and the producer's tile order more
        if constexpr (D == 64)
            asm volatile("setmaxnreg.dec.sync.aligned.u32 32;\n");
        else
            asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (tid == 0) {  // issues every copy and hands the items over
            int g = 0;  // key tiles loaded before this item: tile j of the item is g + j of the ring
            // n: items before this one, whose number goes into slot n % 2 and Q into buffer n % 2
            for (int n = 0, it = blockIdx.x;; ++n) {
                // round n / 2 of a slot or a Q buffer waits for round n / 2 − 1 to be read
                if (n >= 2) mbar_wait(&empty_item[n % 2], ((n / 2) - 1) & 1);
                // the consumers get the plain number of the item to run
                const int piece = it >= items ? -1 : a.causal ? causal_order(a, it, qtiles, D) : it;
                item_of[n % 2] = piece;
                mbar_arrive(&full_item[n % 2]);
                if (piece < 0) break;
                const Item w = item(a, piece);
                if (n >= 2) mbar_wait(&empty_q[n % 2], ((n / 2) - 1) & 1);
                unsigned char* q = sq + (n % 2) * L::Q;
                mbar_expect_tx(&full_q[n % 2], L::Q);
#pragma unroll
                for (int ch = 0; ch < L::CHUNKS; ++ch)
                    tma_load4(q + ch * BOX128, mq, 64 * ch, w.q0, w.hh, w.bb, &full_q[n % 2]);
                // The next item is taken before the wait for the last key tile's stage, so that
                // the answer is back by the time it is needed and a block does not hold an item
                // while others run out of work.
                int after = 0;
                if (w.tiles == 0) after = take();
                for (int j = 0; j < w.tiles; ++j) {
                    const int r = g + j, s = r % STAGES, k0 = j * BKV;
                    // round r / STAGES of stage s waits for round r / STAGES − 1 to be read
                    const unsigned parity = ((r / STAGES) - 1) & 1;
                    if (j == w.tiles - 1) after = take();
                    if (r >= STAGES) mbar_wait(&empty_k[s], parity);
                    mbar_expect_tx(&full_k[s], L::K);
#pragma unroll
                    for (int ch = 0; ch < L::CHUNKS; ++ch)
                        tma_load4(sk + s * L::K + ch * BOX128, mk, 64 * ch, k0, w.hh, w.bb, &full_k[s]);
                    if (r >= STAGES) mbar_wait(&empty_v[s], parity);
                    mbar_expect_tx(&full_v[s], L::V);
#pragma unroll
                    for (int half = 0; half < 2; ++half)
#pragma unroll
                        for (int ch = 0; ch < L::CHUNKS; ++ch)
                            tma_load4(sv + s * L::V + (half * L::CHUNKS + ch) * BOX64, mv, 64 * ch,
                                      k0 + 64 * half, w.hh, w.bb, &full_v[s]);
                }
                g += w.tiles;
                it = after;
            }
        }
        return;
    }

    if constexpr (D == 64)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    else
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int c = tid / 128 - 1;  // consumer warpgroup: rows 64·c … 64·c + 63 of the tile
    const float ss = a.scale * camel::LOG2E;  // scores in log2 units
    int g = 0;  // as the producer's
    // The consumers take turns issuing their MMAs (named barriers 1 and 2), so that one's
    // softmax runs while the other's MMAs do: consumer c waits for its turn on barrier 1 + c and
    // hands the turn over on the other's. The turns run on from one item to the next, so that
    // consumer 0 starts the next item while consumer 1 finishes this one. Consumer 1 gives the
    // first turn here, and consumer 0 takes the last hand-over after the last item, so each
    // barrier sees as many arrivals as waits.
    auto my_turn = [&] { asm volatile("bar.sync %0, 256;\n" ::"r"(1 + c) : "memory"); };
    auto your_turn = [&] { asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - c) : "memory"); };
    if (c == 1) asm volatile("bar.arrive 1, 256;\n" ::: "memory");  // consumer 0's first turn
    for (int n = 0;; ++n) {
        mbar_wait(&full_item[n % 2], (n / 2) & 1);
        const int it = *static_cast<volatile int*>(&item_of[n % 2]);
        release(&empty_item[n % 2], lane);
        if (it < 0) break;
        mbar_wait(&full_q[n % 2], (n / 2) & 1);
        const Item w = item(a, it);
        const long long rbase = w.q0 + c * 64 + warp * 16 + lane / 4;
        const int visible[2] = {visible_keys(a, rbase), visible_keys(a, rbase + 8)};
        // a tile needs the mask when it reaches past Tk or, causal, past the first row's last key
        const int tk = (int)a.tk, diag = a.causal ? w.q0 + (int)(a.tk - a.tq) : tk;
        const int tiles = w.tiles;
        float acc[D / 2], s[64], alpha[2];
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
        unsigned pa[8][4], pn[8][4];  // P of the tile being multiplied, P of the tile being computed
#pragma unroll
        for (int i = 0; i < D / 2; ++i) acc[i] = 0.0f;
        // this warpgroup's 64 query rows start 8 KiB into each Q chunk
        const unsigned qa = smem_u32(sq + (n % 2) * L::Q) + c * BOX64;

        // S = Q·K_jᵀ into s, issued and committed (not waited for)
        auto issue_s = [&](int j) {
            const int st = (g + j) % STAGES;
            mbar_wait(&full_k[st], ((g + j) / STAGES) & 1);
            const unsigned kb = smem_u32(sk + st * L::K);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                const unsigned off = (kk / 4) * BOX128 + (kk % 4) * 32;
                if (kk == 0)
                    QkMma<T>::first(s, desc(qa + off, 16, 1024), desc(kb + off, 16, 1024));
                else
                    QkMma<T>::run(s, desc(qa + off, 16, 1024), desc(kb + off, 16, 1024));
            }
            wgmma_commit();
        };
        // O += P·V_j with P in p, issued and committed
        auto issue_pv = [&](int j, const unsigned (&p)[8][4]) {
            const int st = (g + j) % STAGES;
            mbar_wait(&full_v[st], ((g + j) / STAGES) & 1);
            const unsigned vb = smem_u32(sv + st * L::V);
            wgmma_fence();
            pv_tile<T, D>(acc, p, vb);
            wgmma_commit();
        };
        auto softmax = [&](int j, unsigned (&p)[8][4]) {
            const int k0 = j * BKV;
            softmax_tile<T>(s, m, l, alpha, p, ss, k0, visible, lane, k0 + BKV > tk || k0 + BKV - 1 > diag);
        };
        // tile j: S_j, and P_{j−1}·V_{j−1} from `prev` while the softmax of S_j writes `next`
        auto step = [&](int j, const unsigned (&prev)[8][4], unsigned (&next)[8][4]) {
            my_turn();
            issue_s(j);
            issue_pv(j - 1, prev);
            your_turn();
            wgmma_wait<1>();  // S_j is ready; P_{j−1}·V_{j−1} may still run
            release(&empty_k[(g + j) % STAGES], lane);
            softmax(j, next);
            wgmma_wait<0>();
            release(&empty_v[(g + j - 1) % STAGES], lane);
            rescale<D>(acc, alpha);
        };

        if (tiles > 0) {
            my_turn();
            issue_s(0);
            your_turn();
            wgmma_wait<0>();
            release(&empty_k[g % STAGES], lane);
            softmax(0, pa);  // O is 0: nothing to rescale
            // two tiles an iteration, so that the two sets of P trade roles without a copy
            int j = 1;
            for (; j + 1 < tiles; j += 2) {
                step(j, pa, pn);
                step(j + 1, pn, pa);
            }
            if (j < tiles) {
                step(j, pa, pn);
                my_turn();
                issue_pv(tiles - 1, pn);
                your_turn();
                wgmma_wait<0>();
            } else {
                my_turn();
                issue_pv(tiles - 1, pa);
                your_turn();
                wgmma_wait<0>();
            }
            release(&empty_v[(g + tiles - 1) % STAGES], lane);
        }
        release(&empty_q[n % 2], lane);  // every MMA that reads this Q is done
        g += tiles;
        store_rows<T, D>(acc, m, l, o, lse, a, w.bh, w.bb, w.hh, rbase, lane);
    }
    if (c == 0) asm volatile("bar.sync 1, 256;\n" ::: "memory");  // consumer 1's last hand-over
}

}  // namespace attn8

// attn08_fwd_d{64,128}_{f16,bf16}(q map, k map, v map, T* o, float* lse, AttnArgs, int* next):
// blocks of 384 threads, each running (batch · head, 128-query tile) items in turn; `next` is 0
// at the launch and again when the kernel ends.
#define ATTN08_FWD(D, T, SFX)                                                                            \
    extern "C" __global__ void __launch_bounds__(attn8::THREADS, 1) attn08_fwd_d##D##_##SFX(             \
        const __grid_constant__ wg::TmaMap mq, const __grid_constant__ wg::TmaMap mk,                     \
        const __grid_constant__ wg::TmaMap mv, T* __restrict__ o, float* __restrict__ lse, AttnArgs a, \
        int* __restrict__ next) {                                                                        \
        attn8::forward<T, D>(mq, mk, mv, o, lse, a, next);                                              \
    }
ATTN08_FWD(64, __half, f16)
ATTN08_FWD(64, __nv_bfloat16, bf16)
ATTN08_FWD(128, __half, f16)
ATTN08_FWD(128, __nv_bfloat16, bf16)
