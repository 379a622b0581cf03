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
#include "attention.cuh"
#include "matmul/wgmma.cuh"  // TMA, mbarriers, wgmma descriptors and the S = Q·Kᵀ MMA

namespace attn7 {
using namespace wg;

constexpr int BQ = 128, BKV = 128, THREADS = 256;
// one box row: 64 elements, 128 bytes; a box of 128 rows is 16 KiB, of 64 rows 8 KiB
constexpr unsigned ROW = 128, BOX128 = 128 * ROW, BOX64 = 64 * ROW;

template <int D>
struct Layout {
    static constexpr int CHUNKS = D / 64;                         // 64-wide d chunks
    static constexpr unsigned Q = CHUNKS * BOX128;                // Q: [chunk] 128 rows
    static constexpr unsigned K = CHUNKS * BOX128;                // K: [chunk] 128 keys
    static constexpr unsigned V = 2 * CHUNKS * BOX64;             // V: [key half][chunk] 64 keys
    static constexpr unsigned STAGE = K + V;
    static constexpr unsigned SMEM = Q + 2 * STAGE + 1024;        // + alignment to 1024 bytes
};

// One 4-D box (d c0, token c1, head c2, batch c3) of `map` into shared `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load4(void* dst, const TmaMap& map, int c0, int c1, int c2, int c3,
                                          unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
        "r"(smem_u32(bar))
        : "memory");
}

// O += P·V for one 16-key step: A (P, 64×16) from registers, B (V) from shared memory, N-major
// (imm-trans-b = 1), N = D.
template <typename T, int D>
struct PvMma;
#define ATTN7_PV(T, TY, N, NREG, REGS, OPS, XA, XB, XONE)                                     \
    template <>                                                                               \
    struct PvMma<T, N> {                                                                      \
        static __device__ __forceinline__ void run(float (&d)[NREG], const unsigned (&a)[4],  \
                                                   unsigned long long db) {                   \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " XONE ", 0;\n"                     \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS \
                         "}, {" XA "}, " XB ", p, 1, 1, 1;\n}\n"                               \
                         : OPS                                                                \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));      \
        }                                                                                     \
    };
#define ATTN7_R32 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define ATTN7_D32 WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
ATTN7_PV(__half, "f16", 64, 32, ATTN7_R32, ATTN7_D32, "%32, %33, %34, %35", "%36", "%37")
ATTN7_PV(__nv_bfloat16, "bf16", 64, 32, ATTN7_R32, ATTN7_D32, "%32, %33, %34, %35", "%36", "%37")
ATTN7_PV(__half, "f16", 128, 64, WG_R64, WG_D64, "%64, %65, %66, %67", "%68", "%69")
ATTN7_PV(__nv_bfloat16, "bf16", 128, 64, WG_R64, WG_D64, "%64, %65, %66, %67", "%68", "%69")
#undef ATTN7_PV

// Two values rounded to T, packed as one 32-bit register (the first in the low half).
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    return (unsigned)camel::float_to_bits<T>(lo) | ((unsigned)camel::float_to_bits<T>(hi) << 16);
}

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
    const int rbase = q0 + c * 64 + warp * 16 + lane / 4;
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

        // s[4n + 2h + e]: row rbase + 8h, key k0 + 8n + 2(lane % 4) + e; in log2 units
#pragma unroll
        for (int i = 0; i < 64; ++i) s[i] *= ss;
        const int k0 = j * BKV;
        const bool tail = k0 + BKV > a.tk;
        const bool diag = a.causal && k0 + BKV - 1 > q0 + (a.tk - a.tq);
        if (tail || diag) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const long long visible = camel::attn_visible(a, rbase + 8 * h);
#pragma unroll
                for (int n = 0; n < 16; ++n)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        if (k0 + 8 * n + 2 * (lane % 4) + e >= visible) s[4 * n + 2 * h + e] = -INFINITY;
            }
        }
        unsigned pa[8][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = -INFINITY;
#pragma unroll
            for (int n = 0; n < 16; ++n) mx = fmaxf(mx, fmaxf(s[4 * n + 2 * h], s[4 * n + 2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float mnew = fmaxf(m[h], mx);
            // a row with no visible key yet keeps −∞, and exp2 of −∞ − 0 is 0, not NaN
            const float base = mnew == -INFINITY ? 0.0f : mnew;
            const float alpha = exp2f(m[h] - base);
            m[h] = mnew;
            l[h] *= alpha;
#pragma unroll
            for (int n = 0; n < D / 8; ++n) {
                acc[4 * n + 2 * h] *= alpha;
                acc[4 * n + 2 * h + 1] *= alpha;
            }
#pragma unroll
            for (int n = 0; n < 16; ++n) {
                const float p0 = exp2f(s[4 * n + 2 * h] - base);
                const float p1 = exp2f(s[4 * n + 2 * h + 1] - base);
                l[h] += p0 + p1;
                // the A fragment of key step n / 2: registers 0 and 1 hold rows g and g + 8 of
                // its keys 0–7, registers 2 and 3 of its keys 8–15
                pa[n / 2][(n % 2) * 2 + h] = pack2<T>(p0, p1);
            }
        }
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BKV / 16; ++kk) {
            const unsigned b = sv + (kk / 4) * L::CHUNKS * BOX64 + (kk % 4) * 16 * ROW;
            PvMma<T, D>::run(acc, pa[kk], desc(b, BOX64, 1024));
        }
        wgmma_commit();
        wgmma_wait<0>();
        __syncthreads();  // both warpgroups are done with this stage
        if (tid == 0 && j + 2 < tiles) load_kv(j + 2);
    }

    const long long tq = a.tq;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const int row = rbase + 8 * h;
        if (row >= tq) continue;
        const float inv = 1.0f / l[h];
        T* out = o + camel::bthd(a, bb, hh, row, tq, D);
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
            const int col = 8 * n + 2 * (lane % 4);
            *reinterpret_cast<unsigned*>(out + col) = pack2<T>(acc[4 * n + 2 * h] * inv, acc[4 * n + 2 * h + 1] * inv);
        }
        if (lane % 4 == 0) lse[bh * tq + row] = (m[h] + log2f(l[h])) * camel::LN2;
    }
}

}  // namespace attn7

// attn07_fwd_d{D}_{f16,bf16}(q map, k map, v map, T* o, float* lse, AttnArgs): one block of 256
// threads a (batch · head, 128-query tile), dynamic shared memory attn7::Layout<D>::SMEM.
#define ATTN07(D, T, SFX)                                                                                  \
    extern "C" __global__ void __launch_bounds__(attn7::THREADS, 1) attn07_fwd_d##D##_##SFX(            \
        const __grid_constant__ wg::TmaMap mq, const __grid_constant__ wg::TmaMap mk,                       \
        const __grid_constant__ wg::TmaMap mv, T* __restrict__ o, float* __restrict__ lse, AttnArgs a) { \
        attn7::forward<T, D>(mq, mk, mv, o, lse, a);                                                      \
    }
ATTN07(64, __half, f16)
ATTN07(64, __nv_bfloat16, bf16)
ATTN07(128, __half, f16)
ATTN07(128, __nv_bfloat16, bf16)
