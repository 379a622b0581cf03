// The Hopper GEMM (HGEMM step 17 for 16-bit inputs, SGEMM step 18 for TF32): TMA loads into
// 128-byte-swizzled shared tiles, warpgroup MMAs (`wgmma.mma_async`) that read both operands
// straight from shared memory, and a producer/consumer split of the block. Same contract as
// steps 14–16 (hmma.cuh):
//   C[b] = act(op(A[b]) · op(B[b]) + bias),  f16, bf16 or f32 in and out, f32 sums, one
// rounding, the same epilogue (bias, ReLU/GELU, the saved pre-activation Z) and the same split-K
// workspace. With f32 elements (T = float) the tensor cores read each operand as TF32, with no
// rounding step of ours (the tests' bound allows truncation), and wgmma takes TF32 operands only
// K-major: the kernel exists for A stored M×K and B stored N×K (`_nt`), and the launcher
// transposes other layouts first.
//
// The pieces:
// - TMA (`cp.async.bulk.tensor`): one thread asks the copy engine for a whole box of a matrix;
//   the engine reads it from global memory, zero-fills whatever lies outside the matrix (so tails
//   in M, N and K need no code), writes it into shared memory in the 128-byte swizzled layout
//   wgmma reads, and counts the bytes into an mbarrier. The box geometry lives in a tensor map
//   (a 128-byte `CUtensorMap`) the host encodes with `cuTensorMapEncodeTiled` and passes as a
//   `__grid_constant__` kernel parameter.
// - mbarriers: `full[s]` completes when stage s's bytes have landed; `empty[s]` when both
//   consumer warpgroups have finished reading it. Each is a phase bit that flips per round.
// - wgmma: a warpgroup (4 warps, 128 threads) multiplies a 64×16 tile of A by a 16×N tile of B
//   into a 64×N f32 accumulator held in its registers. The operands are described by 64-bit
//   shared-memory descriptors (address, stride between 8-row groups, swizzle mode); `tnspA`/
//   `tnspB` say whether an operand is K-major (K contiguous) or M/N-major, so all four transpose
//   combinations read the global layout as it is.
// - Roles: warpgroup 0 is the producer (one thread issues the TMA loads, STAGES slices ahead);
//   warpgroups 1 and 2 are consumers, each owning 64 rows of the 128×BN block tile. A consumer
//   keeps one wgmma group in flight: it issues slice s, waits for slice s−1 to finish and then
//   releases s−1's buffers to the producer (one arrival a warp).
// - Epilogue: bias and activation in registers, then the rounded tile goes through the now idle
//   pipeline buffers so that C is written in 16-byte row chunks (with Z to save, and for split-K
//   partial sums, the registers store straight to global memory instead).
// - Persistent blocks (`persistent_body`): blocks (one a multiprocessor at most) run many tiles, the
//   producer loading the next tile's slices while the consumers finish this one, and C leaves
//   through TMA stores from small buffers of the consumers' own; the launcher runs it wherever
//   K is whole and no pre-activation is saved (`wgmma_blocks` in camel-cuda's hgemm.rs).
//
// Shared layout of one stage (BK = 128 bytes of k: 64 16-bit or 32 f32 elements, so one row of a
// K-major box is exactly one 128-byte swizzle row; the boxes below count 16-bit elements):
//   A K-major  (A as M×K):  one box of 128 rows × 64 k                 (rows 128 B apart)
//   A M-major  (A as K×M):  two boxes of 64 k-rows × 64 m, 8 KiB apart
//   B K-major  (B as N×K):  one box of BN rows × 64 k
//   B N-major  (B as K×N):  BN/64 boxes of 64 k-rows × 64 n, 8 KiB apart
// Descriptors: stride-byte-offset 1024 (eight 128-byte rows); for M/N-major operands the
// leading-byte-offset is 8 KiB, the distance between 64-wide boxes along M or N. A k step of one
// wgmma (16 16-bit or 8 f32 elements, 32 bytes) moves a K-major descriptor by 32 bytes within the
// swizzled row and an M/N-major one by 16 rows (2 KiB).
#pragma once

#include "hmma.cuh"  // store_pair, epilogue (bias, activation, Z), CAMEL_PDL_WAIT

namespace wg {

// A `CUtensorMap`: 128 opaque bytes, 64-byte aligned, encoded on the host.
struct alignas(64) TmaMap {
    unsigned long long w[16];
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
// Arrives once and adds `bytes` to the transaction count the phase waits for.
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// Spins until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_u32(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

// One 3-D box (inner coordinate c0, row c1, batch c2) of `map` into shared `dst`, completing
// on `bar`.
__device__ __forceinline__ void tma_load(void* dst, const TmaMap& map, int c0, int c1, int c2,
                                         unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2),
        "r"(smem_u32(bar))
        : "memory");
}

// One 3-D box of shared `src` into `map` at (c0, c1, c2), as a bulk async-group of this
// thread; the engine skips whatever lies outside the matrix.
__device__ __forceinline__ void tma_store(const TmaMap& map, const void* src, int c0, int c1,
                                          int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
            reinterpret_cast<unsigned long long>(&map)),
        "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}
__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's bulk groups still read shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle: address, leading- and stride-byte offsets
// (all in 16-byte units), swizzle mode 1 in bits 62–63.
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) |
           ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// The wgmma of one k step for element type T and tile width BN: wgmma.mma_async m64nBNk16 (k8
// for TF32) with f32 accumulators (BN/2 a thread), both operands from shared memory through
// descriptors; TA/TB are wgmma's tnspA/tnspB (1: A is M-major, B is N-major; 0: K-major; TF32
// has no such flags and reads K-major operands only). It always accumulates (scale-d = 1): the
// accumulators start at zero.
template <typename T, int BN, int TA, int TB>
struct Mma;

// The accumulators as asm operands: register list and "+f" constraints, 32, 64 or 128 of them.
#define WG_D8(i)                                                                   \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_D32 WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
#define WG_D64 WG_D32, WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)
#define WG_D128 WG_D64, WG_D8(64), WG_D8(72), WG_D8(80), WG_D8(88), WG_D8(96), WG_D8(104), WG_D8(112), WG_D8(120)
#define WG_R32 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define WG_R64 WG_R32 ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define WG_R128 WG_R64 ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
// One specialization: NREG accumulators; XA, XB, XONE, XTA, XTB: the operand numbers of the
// descriptors, the constant 1 (scale-d) and the transposes, which follow the accumulators.
#define WG_MMA(T, TY, N, NREG, REGS, OPS, XA, XB, XONE, XTA, XTB)                              \
    template <int TA, int TB>                                                                 \
    struct Mma<T, N, TA, TB> {                                                                \
        static __device__ __forceinline__ void run(float (&d)[NREG], unsigned long long da,   \
                                                   unsigned long long db) {                   \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " XONE ", 0;\n"                     \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS \
                         "}, " XA ", " XB ", p, 1, 1, " XTA ", " XTB ";\n}\n"                   \
                         : OPS                                                                \
                         : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB));                       \
        }                                                                                     \
    };
WG_MMA(__half, "f16", 64, 32, WG_R32, WG_D32, "%32", "%33", "%34", "%35", "%36")
WG_MMA(__nv_bfloat16, "bf16", 64, 32, WG_R32, WG_D32, "%32", "%33", "%34", "%35", "%36")
WG_MMA(__half, "f16", 128, 64, WG_R64, WG_D64, "%64", "%65", "%66", "%67", "%68")
WG_MMA(__nv_bfloat16, "bf16", 128, 64, WG_R64, WG_D64, "%64", "%65", "%66", "%67", "%68")
WG_MMA(__half, "f16", 256, 128, WG_R128, WG_D128, "%128", "%129", "%130", "%131", "%132")
WG_MMA(__nv_bfloat16, "bf16", 256, 128, WG_R128, WG_D128, "%128", "%129", "%130", "%131", "%132")
#undef WG_MMA
// TF32: k8 and no transpose operands (both operands K-major).
#define WG_MMA_TF32(N, NREG, REGS, OPS, XA, XB, XONE)                                         \
    template <>                                                                               \
    struct Mma<float, N, 0, 0> {                                                              \
        static __device__ __forceinline__ void run(float (&d)[NREG], unsigned long long da,   \
                                                   unsigned long long db) {                   \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " XONE ", 0;\n"                     \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 {" REGS     \
                         "}, " XA ", " XB ", p, 1, 1;\n}\n"                                     \
                         : OPS                                                                \
                         : "l"(da), "l"(db), "r"(1));                                         \
        }                                                                                     \
    };
WG_MMA_TF32(64, 32, WG_R32, WG_D32, "%32", "%33", "%34")
WG_MMA_TF32(128, 64, WG_R64, WG_D64, "%64", "%65", "%66")
WG_MMA_TF32(256, 128, WG_R128, WG_D128, "%128", "%129", "%130")
#undef WG_MMA_TF32

// BK_BYTES: the k depth of a slice in bytes (one swizzle row); a slice is BK_BYTES / sizeof(T)
// elements deep and takes four wgmma k steps of 32 bytes.
constexpr int BM = 128, BK_BYTES = 128, THREADS = 384, GROUP = 8;
constexpr unsigned BOX = 64 * BK_BYTES;  // bytes of one box of 64 rows of 128 bytes

// Stages in flight: as many as fit in 192 KiB of shared memory.
template <int BN>
__host__ __device__ constexpr int stages() {
    return (192 * 1024) / ((BM + BN) * BK_BYTES);
}

// The kernel arguments: tensor maps of A and B (3-D: contiguous dimension, rows, batch), the
// output and epilogue as HGEMM_ARGS, and whether A and B have a batch dimension (else the map's
// batch extent is 1 and every batch reads batch 0: a broadcast operand).
#define WGMMA_ARGS(T)                                                                          \
    const __grid_constant__ wg::TmaMap ma, const __grid_constant__ wg::TmaMap mb,              \
        T *__restrict__ C, int M, int N, int K, long long strideC, const T *__restrict__ bias, \
        int act, T *__restrict__ Z, float *__restrict__ P, int k_split, int a_batched,         \
        int b_batched
#define WGMMA_CALL_ARGS ma, mb, C, M, N, K, strideC, bias, act, Z, P, k_split, a_batched, b_batched

// Tile (bm, bn) of a grid of tiles_m × tiles_n tiles numbered id = 0, 1, …: GROUP tile rows at
// a time sweep all tile columns, so that tiles running together share slices of B in L2.
__device__ __forceinline__ void tile_of(int id, int tiles_m, int tiles_n, int& bm, int& bn) {
    const int first = (id / (GROUP * tiles_n)) * GROUP, rows = min(tiles_m - first, GROUP);
    bm = first + (id % (GROUP * tiles_n)) % rows;
    bn = (id % (GROUP * tiles_n)) / rows;
}

// Thread 0 sets up the stages' mbarriers: `full[s]` waits for the producer's one arrival (and
// the bytes it announces), `empty[s]` for each of the 8 consumer warps, which hand the stage
// back once they have read it. Then the block syncs, so that no thread waits on a barrier
// before it exists.
template <int STAGES>
__device__ __forceinline__ void init_stages(unsigned long long* full, unsigned long long* empty) {
    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
}

// Producer: the slice at k0 of the 128 × BN tile at (i0, j0) into the stage at `sa` (A, then B
// A_BYTES later), completing on `bar`; ab, bb: the batch of A and of B.
template <typename T, int BN, bool TA, bool TB>
__device__ __forceinline__ void load_slice(unsigned char* sa, const TmaMap& ma, const TmaMap& mb,
                                           int i0, int j0, int k0, int ab, int bb,
                                           unsigned long long* bar) {
    constexpr unsigned A_BYTES = BM * BK_BYTES, STAGE = (BM + BN) * BK_BYTES;
    unsigned char* sb = sa + A_BYTES;
    mbar_expect_tx(bar, STAGE);
    if constexpr (TA) {
        tma_load(sa, ma, i0, k0, ab, bar);
        tma_load(sa + BOX, ma, i0 + 64, k0, ab, bar);
    } else {
        tma_load(sa, ma, k0, i0, ab, bar);
    }
    if constexpr (TB) {
        tma_load(sb, mb, k0, j0, bb, bar);
    } else {
#pragma unroll
        for (int q = 0; q < BN / 64; ++q) tma_load(sb + q * BOX, mb, j0 + 64 * q, k0, bb, bar);
    }
}

// Consumer c: the wgmmas of one stage (four k steps of 32 bytes) into d, as one group, then
// waits for the group before it (the previous stage's, which may then be handed back).
template <typename T, int BN, bool TA, bool TB>
__device__ __forceinline__ void mma_slice(float (&d)[BN / 2], unsigned char* stage, int c) {
    // in both layouts of A the consumer's 64 rows start one box (8 KiB) per consumer in
    const unsigned sa = smem_u32(stage) + c * BOX;
    const unsigned sb = smem_u32(stage + BM * BK_BYTES);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK_BYTES / 32; ++kk) {
        const unsigned long long da =
            TA ? desc(sa + kk * 2048, BOX, 1024) : desc(sa + kk * 32, 16, 1024);
        const unsigned long long db =
            TB ? desc(sb + kk * 32, 16, 1024) : desc(sb + kk * 2048, BOX, 1024);
        Mma<T, BN, TA, !TB>::run(d, da, db);  // tnspB = 1: B is N-major (stored K×N)
    }
    wgmma_commit();
    wgmma_wait<1>();
}

// Consumer c, lane `lane` of its warp: one tile's KT slices into d (zeroed first), the first
// from the stage of slice `it` (slices counted across tiles), handing each stage back once its
// wgmmas have read it, and the last one too when RELEASE_LAST (a persistent block's producer
// refills it for the next tile). Returns the count of slices after the tile.
template <typename T, int BN, bool TA, bool TB, int STAGES, bool RELEASE_LAST>
__device__ __forceinline__ int consume_tile(float (&d)[BN / 2], unsigned char* smem,
                                            unsigned long long* full, unsigned long long* empty,
                                            int it, int KT, int c, int lane) {
    constexpr unsigned STAGE = (BM + BN) * BK_BYTES;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < KT; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&full[s], (it / STAGES) & 1);
        mma_slice<T, BN, TA, TB>(d, smem + s * STAGE, c);
        if (kt > 0) {  // slice it − 1 is read: hand its buffers back
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[(it - 1) % STAGES]);
        }
    }
    wgmma_wait<0>();
    if constexpr (RELEASE_LAST) {
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[(it - 1) % STAGES]);
    }
    return it;
}

// The kernel body: BN-wide tiles; TA, TB: the operands are stored transposed.
template <typename T, int BN, bool TA, bool TB>
__device__ __forceinline__ void body(const TmaMap& ma, const TmaMap& mb, T* __restrict__ C, int M,
                                     int N, int K, long long strideC, const T* __restrict__ bias,
                                     int act, T* __restrict__ Z, float* __restrict__ P,
                                     int k_split, int a_batched, int b_batched) {
    static_assert(sizeof(T) == 2 || (!TA && TB), "TF32 wgmma reads K-major operands only");
    constexpr int STAGES = stages<BN>();
    constexpr int BK = BK_BYTES / (int)sizeof(T);  // elements of k a slice
    constexpr unsigned STAGE = (BM + BN) * BK_BYTES;
    CAMEL_PDL_WAIT();
    extern __shared__ unsigned char wg_smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    // the swizzle pattern repeats every 1024 bytes: tiles start on such a boundary
    unsigned char* smem = wg_smem_raw + ((1024u - (smem_u32(wg_smem_raw) & 1023u)) & 1023u);

    int bm, bn;
    tile_of(blockIdx.y * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, bm, bn);
    const int i0 = bm * BM, j0 = bn * BN;
    const int splits = k_split > 0 ? (K + k_split - 1) / k_split : 1;
    const int batch = blockIdx.z / splits, split = blockIdx.z % splits;
    const int k_begin = k_split > 0 ? split * k_split : 0;
    const int k_end = k_split > 0 ? min(K, k_begin + k_split) : K;
    // k_split is a multiple of BK, so only the last range has a tail, and TMA zero-fills it
    const int KT = k_end > k_begin ? (k_end - k_begin + BK - 1) / BK : 0;

    const int tid = threadIdx.x;
    init_stages<STAGES>(full, empty);

    float d[BN / 2];
    const int c = tid / 128 - 1;  // consumer warpgroup: rows 64·c … 64·c + 63 of the tile
    if (tid < 128) {  // producer warpgroup: one thread issues every load
        if (tid == 0) {
            const int ab = a_batched ? batch : 0, bb = b_batched ? batch : 0;
            for (int kt = 0; kt < KT; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES) mbar_wait(&empty[s], ((kt / STAGES) - 1) & 1);
                load_slice<T, BN, TA, TB>(smem + s * STAGE, ma, mb, i0, j0, k_begin + kt * BK, ab,
                                          bb, &full[s]);
            }
        }
    } else {
        const int lane = tid % 32;
        consume_tile<T, BN, TA, TB, STAGES, false>(d, smem, full, empty, 0, KT, c, lane);

        // accumulator 4·j + q: row g (q < 2) or g + 8, columns 8·j + t2 + (q % 2) of the warp's
        // 16 rows, as mma.sync's C fragment repeated along N
        const int warp = (tid % 128) / 32;
        const int i = i0 + c * 64 + warp * 16 + lane / 4, j = j0 + (lane % 4) * 2;
        if (k_split > 0) {  // raw partial sums of this split, in f32
            float* p = P + ((long long)split * (gridDim.z / splits) + batch) * M * N;
#pragma unroll
            for (int n = 0; n < BN / 8; ++n)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int r = i + 8 * h, col = j + 8 * n;
                    if (r >= M || col >= N) continue;
                    p[(long long)r * N + col] = d[4 * n + 2 * h];
                    if (col + 1 < N) p[(long long)r * N + col + 1] = d[4 * n + 2 * h + 1];
                }
        } else if (Z == nullptr) {
            // Staged through shared memory: once both consumers are done with every stage, the
            // pipeline's buffers hold each consumer's 64 × BN tile, rounded (rows padded by 8
            // elements, so that a warp's 4-byte pair stores, or each half-warp's 8-byte f32
            // pairs, hit 32 distinct banks); then each row goes out in 16-byte chunks, whole
            // 128-byte lines a warp, instead of pairs.
            asm volatile("bar.sync 1, 256;\n" ::: "memory");
            constexpr int LD = BN + 8, CHUNK = 16 / (int)sizeof(T);  // elements a 16-byte chunk
            T* st = reinterpret_cast<T*>(smem) + c * 64 * LD;
            const int r0 = warp * 16 + lane / 4, c0 = (lane % 4) * 2;
            // the loop without bias and activation has no per-column branch
            auto stage = [&](auto with_epilogue) {
#pragma unroll
                for (int n = 0; n < BN / 8; ++n)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        float v0 = d[4 * n + 2 * h], v1 = d[4 * n + 2 * h + 1];
                        if constexpr (decltype(with_epilogue)::value)
                            hgemm::epilogue_pair(v0, v1, j + 8 * n, N, bias, act);
                        T* at = st + (r0 + 8 * h) * LD + c0 + 8 * n;
                        if constexpr (sizeof(T) == 4) {
                            *reinterpret_cast<float2*>(at) = make_float2(v0, v1);
                        } else {
                            const unsigned lo = camel::float_to_bits<T>(v0), hi = camel::float_to_bits<T>(v1);
                            *reinterpret_cast<unsigned*>(at) = lo | (hi << 16);
                        }
                    }
            };
            if (bias || act != 0)
                stage(hgemm::Flag<true>{});
            else
                stage(hgemm::Flag<false>{});
            asm volatile("bar.sync %0, 128;\n" ::"r"(2 + c) : "memory");
            C += batch * strideC;
            const bool vec = (N % CHUNK == 0) && ((reinterpret_cast<size_t>(C) & 15) == 0);
            const int t = tid % 128;
#pragma unroll 4
            for (int e = t; e < 64 * (BN / CHUNK); e += 128) {
                const int r = e / (BN / CHUNK), q = (e % (BN / CHUNK)) * CHUNK;
                const int gi = i0 + c * 64 + r, gj = j0 + q;
                if (gi >= M || gj >= N) continue;
                const uint4 v = *reinterpret_cast<const uint4*>(st + r * LD + q);
                T* out = C + (long long)gi * N + gj;
                if (vec) {
                    *reinterpret_cast<uint4*>(out) = v;
                } else {
                    const T* pv = reinterpret_cast<const T*>(&v);
                    for (int x = 0; x < CHUNK && gj + x < N; ++x) out[x] = pv[x];
                }
            }
        } else {  // the pre-activation is saved too: pair stores straight from the registers
            C += batch * strideC;
            Z += batch * strideC;
#pragma unroll
            for (int n = 0; n < BN / 8; ++n) {
                hgemm::store_pair(C, M, N, i, j + 8 * n, d[4 * n], d[4 * n + 1], bias, act, Z);
                hgemm::store_pair(C, M, N, i + 8, j + 8 * n, d[4 * n + 2], d[4 * n + 3], bias, act,
                                  Z);
            }
        }
    }
}

// Bytes of one output chunk buffer of the persistent kernel: 64 rows of one 128-byte swizzle row.
constexpr unsigned CHUNK_BYTES = 64 * 128;

// The persistent kernel's arguments: tensor maps of A, B and C (C's boxes are 128 bytes × 64
// rows), the batch count, and the epilogue's bias and activation (no saved pre-activation, no
// K-splits: those run on `body`).
#define WGMMA_PERSISTENT_ARGS(T)                                                               \
    const __grid_constant__ wg::TmaMap ma, const __grid_constant__ wg::TmaMap mb,              \
        const __grid_constant__ wg::TmaMap mc, int M, int N, int K, int batches,               \
        const T *__restrict__ bias, int act, int a_batched, int b_batched
#define WGMMA_PERSISTENT_CALL_ARGS ma, mb, mc, M, N, K, batches, bias, act, a_batched, b_batched

// The persistent kernel body: gridDim.x blocks, at most one a multiprocessor, run the tiles
// blockIdx.x, blockIdx.x + gridDim.x, … of every batch in `tile_of`'s order. The producer's slice
// count runs on across tiles, so it loads the next tile's first slices while the consumers finish
// this one. Each consumer writes its 64 × BN tile out in chunks of 64 rows × 128 bytes: rounded
// into one of two 8 KiB buffers of its own, in the 128-byte swizzle (a warp's 16-bit pairs hit
// 32 distinct banks), and handed to a TMA store, which skips rows and columns past the matrix. A
// consumer waits only until the store two chunks back has read its buffer, so it goes back to
// multiplying while the last chunks are still on their way out.
template <typename T, int BN, bool TA, bool TB>
__device__ __forceinline__ void persistent_body(const TmaMap& ma, const TmaMap& mb,
                                                const TmaMap& mc, int M, int N, int K,
                                                int batches, const T* __restrict__ bias, int act,
                                                int a_batched, int b_batched) {
    static_assert(sizeof(T) == 2 || (!TA && TB), "TF32 wgmma reads K-major operands only");
    constexpr int STAGES = stages<BN>();
    constexpr int BK = BK_BYTES / (int)sizeof(T);
    constexpr unsigned STAGE = (BM + BN) * BK_BYTES;
    // a chunk is one 128-byte swizzle row wide: CW columns, CW / 8 of a thread's column groups
    constexpr int CW = BK_BYTES / (int)sizeof(T), GROUPS = CW / 8;
    CAMEL_PDL_WAIT();
    extern __shared__ unsigned char wg_smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    unsigned char* smem = wg_smem_raw + ((1024u - (smem_u32(wg_smem_raw) & 1023u)) & 1023u);

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int per_batch = tiles_m * tiles_n, tiles = per_batch * batches;
    const int KT = (K + BK - 1) / BK;
    const int tid = threadIdx.x;
    init_stages<STAGES>(full, empty);

    if (tid < 128) {  // producer warpgroup: one thread issues every load
        if (tid == 0) {
            int it = 0;  // slices loaded so far, across tiles
            for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                const int batch = tile / per_batch;
                int bm, bn;
                tile_of(tile - batch * per_batch, tiles_m, tiles_n, bm, bn);
                const int ab = a_batched ? batch : 0, bb = b_batched ? batch : 0;
                for (int kt = 0; kt < KT; ++kt, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(&empty[s], ((it / STAGES) - 1) & 1);
                    load_slice<T, BN, TA, TB>(smem + s * STAGE, ma, mb, bm * BM, bn * BN, kt * BK,
                                              ab, bb, &full[s]);
                }
            }
        }
        return;
    }

    const int c = tid / 128 - 1, t = tid % 128, warp = t / 32, lane = tid % 32;
    unsigned char* buffers = smem + STAGES * STAGE + c * 2 * CHUNK_BYTES;
    float d[BN / 2];
    int it = 0, chunk = 0;  // slices consumed and chunks stored so far, across tiles
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int batch = tile / per_batch;
        int bm, bn;
        tile_of(tile - batch * per_batch, tiles_m, tiles_n, bm, bn);
        it = consume_tile<T, BN, TA, TB, STAGES, true>(d, smem, full, empty, it, KT, c, lane);

        // accumulator 4·n + 2·h + e: row r0 + 8·h, column 8·n + (lane % 4)·2 + e of the
        // consumer's 64 × BN tile
        const int r0 = warp * 16 + lane / 4, j = bn * BN + (lane % 4) * 2;
        auto store_chunks = [&](auto with_epilogue) {
#pragma unroll
            for (int q = 0; q < BN / CW; ++q, ++chunk) {
                unsigned char* buf = buffers + (chunk & 1) * CHUNK_BYTES;
                // the store two chunks back, from this buffer, has read it
                if (t == 0) bulk_wait_read<1>();
                asm volatile("bar.sync %0, 128;\n" ::"r"(2 + c) : "memory");
#pragma unroll
                for (int g = 0; g < GROUPS; ++g) {
                    const int n = q * GROUPS + g;
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        float v0 = d[4 * n + 2 * h], v1 = d[4 * n + 2 * h + 1];
                        if constexpr (decltype(with_epilogue)::value)
                            hgemm::epilogue_pair(v0, v1, j + 8 * n, N, bias, act);
                        const int r = r0 + 8 * h;
                        const unsigned byte = (8 * g + (lane % 4) * 2) * (unsigned)sizeof(T);
                        unsigned char* at =
                            buf + r * 128 + ((((byte >> 4) ^ (r & 7))) << 4) + (byte & 15);
                        if constexpr (sizeof(T) == 4) {
                            *reinterpret_cast<float2*>(at) = make_float2(v0, v1);
                        } else {
                            const unsigned lo = camel::float_to_bits<T>(v0),
                                           hi = camel::float_to_bits<T>(v1);
                            *reinterpret_cast<unsigned*>(at) = lo | (hi << 16);
                        }
                    }
                }
                // the generic-proxy writes become visible to the TMA engine's reads
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                asm volatile("bar.sync %0, 128;\n" ::"r"(2 + c) : "memory");
                if (t == 0) {
                    tma_store(mc, buf, bn * BN + q * CW, bm * BM + 64 * c, batch);
                    bulk_commit();
                }
            }
        };
        if (bias || act != 0)
            store_chunks(hgemm::Flag<true>{});
        else
            store_chunks(hgemm::Flag<false>{});
    }
    // shared memory stays until the last stores have read it; their writes to C complete with
    // the kernel
    if (t == 0) bulk_wait_read<0>();
}

}  // namespace wg

// One kernel: NAME(WGMMA_ARGS(T)) for tile width BN and transposes TA, TB.
#define WGMMA_KERNEL(NAME, T, BN, TA, TB)                                                  \
    extern "C" __global__ void __launch_bounds__(wg::THREADS, 1) NAME(WGMMA_ARGS(T)) {     \
        wg::body<T, BN, TA, TB>(WGMMA_CALL_ARGS);                                          \
    }
// The four transposes of one tile width and element type: PREFIX_nn … PREFIX_tt.
#define WGMMA_STEP(PREFIX, T, BN)                         \
    WGMMA_KERNEL(PREFIX##_nn, T, BN, false, false)        \
    WGMMA_KERNEL(PREFIX##_nt, T, BN, false, true)         \
    WGMMA_KERNEL(PREFIX##_tn, T, BN, true, false)         \
    WGMMA_KERNEL(PREFIX##_tt, T, BN, true, true)
// The persistent kernels of one tile width and element type: PREFIX_nn … PREFIX_tt.
#define WGMMA_PERSISTENT_KERNEL(NAME, T, BN, TA, TB)                                          \
    extern "C" __global__ void __launch_bounds__(wg::THREADS, 1)                              \
        NAME(WGMMA_PERSISTENT_ARGS(T)) {                                                      \
        wg::persistent_body<T, BN, TA, TB>(WGMMA_PERSISTENT_CALL_ARGS);                       \
    }
#define WGMMA_PERSISTENT_STEP(PREFIX, T, BN)                      \
    WGMMA_PERSISTENT_KERNEL(PREFIX##_nn, T, BN, false, false)     \
    WGMMA_PERSISTENT_KERNEL(PREFIX##_nt, T, BN, false, true)      \
    WGMMA_PERSISTENT_KERNEL(PREFIX##_tn, T, BN, true, false)      \
    WGMMA_PERSISTENT_KERNEL(PREFIX##_tt, T, BN, true, true)
