// hopper.cuh — what the Hopper forwards (steps 7 and 8) share: 4-D TMA boxes of q, k and v, the
// O += P·V warpgroup MMA with P from registers, and the online softmax of one 128-key tile of S
// held in a warpgroup's accumulator registers.
//
// Register layout of S (the accumulator of a 64×128 `wgmma`): s[4n + 2h + e] is row
// warp·16 + lane/4 + 8h of the warpgroup's 64, key 8n + 2(lane % 4) + e of the tile. A row's 128
// keys are spread over the quad of threads that share lane / 4.
#pragma once

#include "attention.cuh"
#include "matmul/wgmma.cuh"  // TMA, mbarriers, wgmma descriptors and the S = Q·Kᵀ MMA

namespace attn_hopper {
using namespace wg;

// one box row: 64 elements, 128 bytes; a box of 128 rows is 16 KiB, of 64 rows 8 KiB
constexpr unsigned ROW = 128, BOX128 = 128 * ROW, BOX64 = 64 * ROW;

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
#define ATTN_PV(T, TY, N, NREG, REGS, OPS, XA, XB, XONE)                                      \
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
ATTN_PV(__half, "f16", 64, 32, WG_R32, WG_D32, "%32, %33, %34, %35", "%36", "%37")
ATTN_PV(__nv_bfloat16, "bf16", 64, 32, WG_R32, WG_D32, "%32, %33, %34, %35", "%36", "%37")
ATTN_PV(__half, "f16", 128, 64, WG_R64, WG_D64, "%64, %65, %66, %67", "%68", "%69")
ATTN_PV(__nv_bfloat16, "bf16", 128, 64, WG_R64, WG_D64, "%64, %65, %66, %67", "%68", "%69")
#undef ATTN_PV

// S = Q·Kᵀ for one 16-feature step, N = 128 keys, both operands K-major in shared memory:
// `first` writes S (wgmma's scale-d 0, the registers are outputs only), `run` adds to it.
// The accumulators as write-only asm operands ("=f"), 32 or 64 of them: for an MMA with
// scale-d 0, whose accumulators are outputs only.
#define ATTN_W8(i)                                                                              \
    "=f"(d[i]), "=f"(d[i + 1]), "=f"(d[i + 2]), "=f"(d[i + 3]), "=f"(d[i + 4]), "=f"(d[i + 5]), \
        "=f"(d[i + 6]), "=f"(d[i + 7])
#define ATTN_W32 ATTN_W8(0), ATTN_W8(8), ATTN_W8(16), ATTN_W8(24)
#define ATTN_W64 ATTN_W32, ATTN_W8(32), ATTN_W8(40), ATTN_W8(48), ATTN_W8(56)

template <typename T>
struct QkMma;
#define ATTN_QK(T, TY)                                                                                \
    template <>                                                                                       \
    struct QkMma<T> {                                                                                 \
        static __device__ __forceinline__ void first(float (&d)[64], unsigned long long da,           \
                                                     unsigned long long db) {                         \
            asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {" WG_R64          \
                         "}, %64, %65, 0, 1, 1, 0, 0;\n"                                              \
                         : ATTN_W64                                                                   \
                         : "l"(da), "l"(db));                                                         \
        }                                                                                             \
        static __device__ __forceinline__ void run(float (&d)[64], unsigned long long da,             \
                                                   unsigned long long db) {                           \
            asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {" WG_R64          \
                         "}, %64, %65, 1, 1, 1, 0, 0;\n"                                              \
                         : WG_D64                                                                     \
                         : "l"(da), "l"(db));                                                         \
        }                                                                                             \
    };
ATTN_QK(__half, "f16")
ATTN_QK(__nv_bfloat16, "bf16")
#undef ATTN_QK

// The first 16-deep k step of a 64×64 product with both operands in shared memory (TA, TB: the
// transpose flags, as Mma's): wgmma's scale-d 0 writes the accumulators, which are outputs only,
// so no zeroing of them can be scheduled after the fence into the MMA's window.
template <typename T, int TA, int TB>
struct Mma64First;
#define ATTN_MMA64_FIRST(T, TY)                                                                        \
    template <int TA, int TB>                                                                          \
    struct Mma64First<T, TA, TB> {                                                                     \
        static __device__ __forceinline__ void run(float (&d)[32], unsigned long long da,              \
                                                   unsigned long long db) {                            \
            asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {" WG_R32            \
                         "}, %32, %33, 0, 1, 1, %34, %35;\n"                                           \
                         : ATTN_W32                                                                    \
                         : "l"(da), "l"(db), "n"(TA), "n"(TB));                                        \
        }                                                                                              \
    };
ATTN_MMA64_FIRST(__half, "f16")
ATTN_MMA64_FIRST(__nv_bfloat16, "bf16")
#undef ATTN_MMA64_FIRST
#undef ATTN_W64
#undef ATTN_W32
#undef ATTN_W8

// O += P·V over one 128-key tile, issued (not committed): eight 16-key MMAs, P from registers as
// softmax_tile leaves it, V at shared address `vb` as [key half][d chunk] boxes of 64 keys × 64 d
// (N-major: the distance between d chunks is the leading-byte offset).
template <typename T, int D>
__device__ __forceinline__ void pv_tile(float (&acc)[D / 2], const unsigned (&p)[8][4], unsigned vb) {
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
        const unsigned b = vb + (kk / 4) * (D / 64) * BOX64 + (kk % 4) * 16 * ROW;
        PvMma<T, D>::run(acc, p[kk], desc(b, BOX64, 1024));
    }
}

// Two values rounded to T, packed as one 32-bit register (the first in the low half).
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    return (unsigned)camel::float_to_bits<T>(lo) | ((unsigned)camel::float_to_bits<T>(hi) << 16);
}

// The order of a causal grid's work. Each (batch · head) has `per_head` pieces (query tiles in
// the forward, key tiles in the backward), rank 0 the longest, and piece bh · per_head + rank is
// the plain numbering. Work `i` is taken in order, by the hardware (a block a piece) or by the
// persistent blocks (a count), so this order is the schedule: the heads go in chunks, and
// within a chunk every head's rank-0 piece comes first, then every head's rank 1, and so on.
// The last pieces are then short ones, so the blocks finish together instead of some running
// one head's longest piece alone at the end; a chunk's heads are few enough that their Q, K, V
// (and dO) stay in L2 together: about 32 MiB of 16-bit rows, at least one head. Heads of fewer
// than 10 pieces keep the plain numbering: their tails are short already, and consecutive
// pieces of one head find its rows in L2. Returns the plain number of the piece to run.
// (32-bit arithmetic throughout: the launchers check that the pieces' count fits an int)
__device__ __forceinline__ int causal_order(const AttnArgs& a, int i, int per_head, int d) {
    if (per_head < 10) return i;
    const int heads = (int)(a.b * a.h);
    const int chunk = min(heads, max(1, (int)__fdividef(8388608.0f, (float)(a.tq + a.tk) * (float)d)));
    const int per_chunk = chunk * per_head, c = i / per_chunk, r = i - c * per_chunk;
    const int g = min(chunk, heads - c * chunk);  // the last chunk may have fewer heads
    const int rank = r / g;
    return (c * chunk + r - rank * g) * per_head + rank;
}

// Keys row `row` sees (attn_visible) as an int: TMA coordinates are 32-bit, so the Hopper steps
// only run sequences shorter than 2³¹.
__device__ __forceinline__ int visible_keys(const AttnArgs& a, long long row) {
    return (int)camel::attn_visible(a, row);
}

// The online softmax of one tile of S (raw scores, keys k0 … k0 + 127) for this thread's rows,
// which see `visible[0]` and `visible[1]` keys: scales the scores to log2 units by `ss`, masks
// the keys a row does not see (with MASKED, the tiles that reach past a row's visible keys),
// updates the running maxima `m` and sums `l`, and returns in `alpha` the factor by which the
// output accumulated so far must be rescaled, and in `pa` the probabilities rounded to T, already
// in the register layout of `wgmma`'s A operand for P·V. S is only read: its registers may still
// be the target of an MMA in flight, so writing them would make the compiler copy all 64.
template <typename T, bool MASKED>
__device__ __forceinline__ void softmax_tile(const float (&s)[64], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             unsigned (&pa)[8][4], float ss, int k0, const int (&visible)[2],
                                             int lane) {
    // whether key 8n + 2(lane % 4) + e of the tile is hidden from row h
    auto hidden = [&](int h, int n, int e) { return MASKED && k0 + 8 * n + 2 * (lane % 4) + e >= visible[h]; };
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        // the row's max over the tile in log2 units (a NaN score is skipped here and reaches l
        // through its exp). Unmasked, the raw scores keep their units and their max is scaled
        // once (the min for a negative scale), so each weight below costs one multiply-add and
        // one exp.
        float mx = -INFINITY;
        if (MASKED) {
#pragma unroll
            for (int n = 0; n < 16; ++n)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    mx = fmaxf(mx, hidden(h, n, e) ? -INFINITY : s[4 * n + 2 * h + e] * ss);
        } else {
            float ext = s[2 * h];
            if (ss >= 0.0f) {
#pragma unroll
                for (int n = 0; n < 16; ++n)
#pragma unroll
                    for (int e = 0; e < 2; ++e) ext = fmaxf(ext, s[4 * n + 2 * h + e]);
            } else {
#pragma unroll
                for (int n = 0; n < 16; ++n)
#pragma unroll
                    for (int e = 0; e < 2; ++e) ext = fminf(ext, s[4 * n + 2 * h + e]);
            }
            mx = ext * ss;
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mnew = fmaxf(m[h], mx);
        // a row with no visible key yet keeps −∞, and exp2 of −∞ − 0 is 0, not NaN
        const float base = mnew == -INFINITY ? 0.0f : mnew;
        alpha[h] = exp2f(m[h] - base);
        m[h] = mnew;
        l[h] *= alpha[h];
#pragma unroll
        for (int n = 0; n < 16; ++n) {
            float p[2];
#pragma unroll
            for (int e = 0; e < 2; ++e)
                p[e] = hidden(h, n, e) ? 0.0f : camel::exp2_ftz(fmaf(s[4 * n + 2 * h + e], ss, -base));
            l[h] += p[0] + p[1];
            // the A fragment of key step n / 2: registers 0 and 1 hold rows g and g + 8 of
            // its keys 0–7, registers 2 and 3 of its keys 8–15
            pa[n / 2][(n % 2) * 2 + h] = pack2<T>(p[0], p[1]);
        }
    }
}

// softmax_tile with the mask where `masked` says a tile needs it.
template <typename T>
__device__ __forceinline__ void softmax_tile(const float (&s)[64], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             unsigned (&pa)[8][4], float ss, int k0, const int (&visible)[2],
                                             int lane, bool masked) {
    if (masked)
        softmax_tile<T, true>(s, m, l, alpha, pa, ss, k0, visible, lane);
    else
        softmax_tile<T, false>(s, m, l, alpha, pa, ss, k0, visible, lane);
}

// O scaled by `alpha`: accumulator 4n + 2h + e is row h's (as S's layout, D/8 column groups).
template <int D>
__device__ __forceinline__ void rescale(float (&acc)[D / 2], const float (&alpha)[2]) {
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            acc[4 * n + 2 * h] *= alpha[h];
            acc[4 * n + 2 * h + 1] *= alpha[h];
        }
}

// The epilogue of a warpgroup's 64 rows: O / l rounded to T into the dense [B, T, H, D] output
// (4-byte pairs), and each row's log-sum-exp (natural log) into lse [B, H, Tq].
template <typename T, int D>
__device__ __forceinline__ void store_rows(const float (&acc)[D / 2], const float (&m)[2], float (&l)[2],
                                           T* __restrict__ o, float* __restrict__ lse, const AttnArgs& a,
                                           long long bh, int bb, int hh, long long rbase, int lane) {
    const long long tq = a.tq;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const long long row = rbase + 8 * h;
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

}  // namespace attn_hopper

// One kernel of a Hopper step: PREFIX_fwd_dD_SFX(q map, k map, v map, T* o, float* lse, AttnArgs)
// runs NS::forward<T, D> in blocks of NS::THREADS, dynamic shared memory NS::Layout<D>::SMEM.
#define ATTN_HOPPER_KERNEL(PREFIX, NS, D, T, SFX)                                                          \
    extern "C" __global__ void __launch_bounds__(NS::THREADS, 1) PREFIX##_fwd_d##D##_##SFX(                \
        const __grid_constant__ wg::TmaMap mq, const __grid_constant__ wg::TmaMap mk,                       \
        const __grid_constant__ wg::TmaMap mv, T* __restrict__ o, float* __restrict__ lse, AttnArgs a) { \
        NS::forward<T, D>(mq, mk, mv, o, lse, a);                                                         \
    }
// The four kernels of a Hopper step: head dims 64 and 128, f16 and bf16.
#define ATTN_HOPPER_STEP(PREFIX, NS)                           \
    ATTN_HOPPER_KERNEL(PREFIX, NS, 64, __half, f16)            \
    ATTN_HOPPER_KERNEL(PREFIX, NS, 64, __nv_bfloat16, bf16)    \
    ATTN_HOPPER_KERNEL(PREFIX, NS, 128, __half, f16)           \
    ATTN_HOPPER_KERNEL(PREFIX, NS, 128, __nv_bfloat16, bf16)
