// Step 4 of the conv2d ladder: step 2's implicit GEMM on the machinery of SGEMM step 13, for the
// forward, the input gradient (stride 1) and the weight gradient.
//
// What it changes over steps 2 and 3:
// - Operands reach shared memory by cp.async, three stages deep: a tile is requested two tiles
//   ahead, and a gathered element that falls in the zero padding is zero-filled by the copy
//   itself (src-size 0). Step 2 loads through registers and waits for every tile.
// - 64 × 256 block tiles (output channels × output pixels), each thread 4 × 16 outputs read as
//   float4 fragments (stage_fma.cuh): 5 shared loads per 64 FMAs, where step 2's 16 × 16 thread
//   grid reads every operand as a scalar (12 loads per 32 FMAs). Groups of at most 16 output
//   channels (LeNet's layers) take 16 × 256 tiles on a 4 × 64 thread grid.
// - The tap table holds one packed entry per tap: the source offset and the vertical and
//   horizontal displacement (16 bits each), so a gathered element is one shared load, two
//   bounds tests and one add; it sits in dynamic shared memory, so up to PIPELINED_MAX_TAPS
//   (conv2d.rs) taps.
// - The input gradient at stride 1 is the same kernel: the transposed convolution reads dy at
//   the input pixel's position minus the tap's displacement, so its table holds negated
//   displacements, and the weight's tap offsets go to a second table (its A operand is
//   w[m][c][ki][kj] with the tap (m, ki, kj) along k).
// - The weight gradient dw[o][tap] = Σ over images and pixels of dy[o][pixel] · x[tap][pixel] is
//   a GEMM whose inner dimension is the batch's pixels: blocks split it into equal ranges of
//   pixel tiles (split-K, one wave of blocks), write their partial tile to a workspace row, and
//   step 3's conv2d_wgrad_reduce_f32 adds the rows in a fixed order, so the sum is the same on
//   every run. Both operands are copied transposed (4-byte copies, a warp covering 8 pixels × 4
//   columns, so the shared stores hit 32 distinct banks).
//
// The launchers (`pipelined*` in crates/camel-cuda/src/kernels/conv2d.rs) run step 3's kernels
// where those are faster or where these do not apply: the input gradient at strides above 1 or
// for at most 16 input channels, the weight gradient for at most 16 output channels with fewer
// than 128 taps.
#include "conv2d.cuh"
#include "common/cp_async.cuh"
#include "matmul/stage_fma.cuh"

namespace {

constexpr int BK = 16, ST = 3;

// The tap table: for tap k, .x the source offset of the tap relative to a column's origin and .y
// its displacement (dy << 16) | (dx & 0xffff), both halves signed.
__device__ __forceinline__ int2 tap_entry(int off, int dy, int dx) {
    return make_int2(off, (int)(((unsigned)dy << 16) | ((unsigned)dx & 0xffffu)));
}
__device__ __forceinline__ int tap_dy(int packed) { return packed >> 16; }
__device__ __forceinline__ int tap_dx(int packed) { return (int)(short)(packed & 0xffff); }

// The forward's taps k = (cg·kh + ki)·kw + kj of a group (also the weight gradient's columns):
// offset cg·h·w + ki·dh·w + kj·dw from the patch's top-left input position.
__device__ __forceinline__ void forward_taps(int2* tab, const ConvArgs& a, int kg) {
    const int khw = (int)(a.kh * a.kw), W = (int)a.w, HW = (int)(a.h * a.w);
    for (int k = threadIdx.x; k < kg; k += blockDim.x) {
        const int c = k / khw, r = k % khw, dy = r / (int)a.kw * (int)a.dh, dx = r % (int)a.kw * (int)a.dw;
        tab[k] = tap_entry(c * HW + dy * W + dx, dy, dx);
    }
}

// Shared memory of a BM × BN kernel: ST stages of A (BK × (BM+4)) and of B (BK × (BN+4)), then
// the tap tables (see the launcher's `pipelined_smem_bytes`).
template <int BM, int BN>
__host__ __device__ constexpr int stage_floats() {
    return ST * BK * ((BM + 4) + (BN + 4));
}

// A thread's accumulators in a BM × BN tile on a TY × (256/TY) thread grid (stage_fma.cuh).
template <int BM, int BN, int TY>
using Acc = float[BM / TY][BN * TY / 256];

// The pipeline over nk tiles: `issue(as, bs, ks)` requests tile ks into a stage's A and B.
template <int BM, int BN, int TY, class Issue>
__device__ __forceinline__ void pipeline(float* smem, int nk, Issue issue, Acc<BM, BN, TY>& acc, int ty, int tx) {
    constexpr int SA = BM + 4, SB = BN + 4;
    float* As = smem;
    float* Bs = smem + ST * BK * SA;
    auto request = [&](int ks) {
        if (ks < nk) issue(As + (ks % ST) * BK * SA, Bs + (ks % ST) * BK * SB, ks);
        camel::cp_async_commit();  // an empty group past the end keeps the wait counts uniform
    };
#pragma unroll
    for (int s = 0; s < ST - 1; ++s) request(s);
    for (int ks = 0; ks < nk; ++ks) {
        camel::cp_async_wait<ST - 2>();  // tile ks has landed (this thread's copies) …
        __syncthreads();                 // … everyone's, and tile ks-1's stage is free again
        request(ks + ST - 1);
        stage_fma<BM, BN, BK, SA, SB, TY>(As + (ks % ST) * BK * SA, Bs + (ks % ST) * BK * SB, acc, ty, tx);
    }
    camel::cp_async_wait<0>();
}

// The k-major A tile of a gather kernel: as[kk][m] = A[m0 + m][tap k0 + kk] at
// a + row·a_rs + atab[tap], transposed by 4-byte copies. A thread copies the tap kk = lane % 8 +
// 8·(warp % 2) of the rows m = lane / 8 + 4·(warp / 2) + 16·i, so that a warp's shared stores (8
// taps × 4 rows) hit 32 distinct banks; `ar` is a + (m0 + lane / 8 + 4·(warp / 2))·a_rs, `r0` that
// row.
template <int BM>
__device__ __forceinline__ void issue_a(float* as, const float* a, const float* ar, int r0, int a_rs,
                                        const int* atab, int rows, int kt, int k0, int t) {
    const int ln = t % 32, wp = t / 32, kk = ln % 8 + 8 * (wp % 2), m = ln / 8 + 4 * (wp / 2);
    const int k = k0 + kk;
    const int ak = k < kt ? atab[k] : 0;
#pragma unroll
    for (int i = 0; i < BM / 16; ++i) {
        const bool ok = k < kt && r0 + 16 * i < rows;
        camel::cp_async4(&as[kk * (BM + 4) + m + 16 * i], ok ? ar + 16 * i * a_rs + ak : a, ok);
    }
}

// The column of a gather kernel's B tile a thread copies: its origin (y0, x0) in the source planes
// and the origin's offset in the source. A column past the batch's last pixel has y0 = NOWHERE,
// which every bounds test rejects.
struct Column {
    long long ofs;
    int y0, x0;
};
constexpr int NOWHERE = -(1 << 30);

// The B tile of a gather kernel: bs[kk][n] = the source at column n's origin plus tap k0 + kk, 0
// outside the ly × lx plane. A thread copies its column n = t % BN, rows t / BN + i·256/BN.
template <int BN>
__device__ __forceinline__ void issue_b(float* bs, const float* src, const int2* tab, const Column& col, int ly,
                                        int lx, int kt, int k0, int t) {
    const int n = t % BN;
#pragma unroll
    for (int s = 0; s < BK * BN / 256; ++s) {
        const int kk = t / BN + s * (256 / BN), k = k0 + kk;
        const int2 e = k < kt ? tab[k] : make_int2(0, 0);
        const int iy = col.y0 + tap_dy(e.y), ix = col.x0 + tap_dx(e.y);
        const bool ok = k < kt && (unsigned)iy < (unsigned)ly && (unsigned)ix < (unsigned)lx;
        camel::cp_async4(&bs[kk * (BN + 4) + n], ok ? src + col.ofs + e.x : src, ok);
    }
}

// Stores a gather kernel's tile: out[(img·ch_total + ch0 + row)·P + p] = f(acc, row) for the
// output rows < rows and columns q = img·P + p < Q. Four consecutive columns are one float4
// store when P % 4 == 0 (they then share an image and a 16-byte-aligned address).
template <int BM, int BN, int TY, class F>
__device__ __forceinline__ void store_columns(float* out, const Acc<BM, BN, TY>& acc, long long P, long long Q,
                                              long long ch_total, long long ch0, int rows, int m0, long long q0,
                                              int ty, int tx, F f) {
    constexpr int TX = 256 / TY, TMR = BM / (4 * TY), TNR = BN / (4 * TX);
    const bool vec = P % 4 == 0;
#pragma unroll
    for (int j = 0; j < TNR; ++j) {
        const long long qb = q0 + j * 4 * TX + tx * 4;
        if (qb >= Q) continue;
#pragma unroll
        for (int i = 0; i < TMR; ++i)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int row = m0 + i * 4 * TY + ty * 4 + r;
                if (row >= rows) continue;
                const float* v = &acc[i * 4 + r][j * 4];
                if (vec) {
                    const long long img = qb / P, p = qb % P;
                    float* o = out + (img * ch_total + ch0 + row) * P + p;
                    *reinterpret_cast<float4*>(o) = make_float4(f(v[0], row), f(v[1], row), f(v[2], row), f(v[3], row));
                } else {
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        const long long q = qb + c;
                        if (q < Q) out[(q / P * ch_total + ch0 + row) * P + q % P] = f(v[c], row);
                    }
                }
            }
    }
}

template <int BM, int BN, int TY>
__device__ __forceinline__ void zero(Acc<BM, BN, TY>& acc) {
#pragma unroll
    for (int i = 0; i < BM / TY; ++i)
#pragma unroll
        for (int j = 0; j < BN * TY / 256; ++j) acc[i][j] = 0.f;
}

// The product of a gather kernel, once its tables are written (the barrier here publishes them):
// acc = A[rows r0…][kt taps] · B[kt taps][the block's columns], A copied by issue_a from `ar`
// (row stride a_rs, tap offsets atab), B gathered by issue_b from `src` (tap table `tab`, source
// planes ly × lx).
template <int BM, int BN, int TY>
__device__ __forceinline__ void gather_product(float* smem, Acc<BM, BN, TY>& acc, const float* a,
                                               const float* ar, int r0, int a_rs, const int* atab, int rows,
                                               const float* src, const int2* tab, const Column& col, int ly,
                                               int lx, int kt, int ty, int tx) {
    const int t = threadIdx.x;
    zero<BM, BN, TY>(acc);
    __syncthreads();  // the tap tables
    pipeline<BM, BN, TY>(
        smem, (kt + BK - 1) / BK,
        [&](float* as, float* bs, int ks) {
            issue_a<BM>(as, a, ar, r0, a_rs, atab, rows, kt, ks * BK, t);
            issue_b<BN>(bs, src, tab, col, ly, lx, kt, ks * BK, t);
        },
        acc, ty, tx);
}

// y = act(conv2d(x, w) + bias) for a group's output channels m0 … m0+BM and output pixels
// q0 … q0+BN of the batch.
template <int BM, int BN, int TY>
__device__ __forceinline__ void forward(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ bias, float* __restrict__ y, const ConvArgs& a,
                                        int has_bias, int relu, float* smem) {
    const int t = threadIdx.x;
    const int cg = (int)(a.c / a.groups), og = (int)(a.o / a.groups), kg = cg * (int)(a.kh * a.kw);
    const long long P = a.oh * a.ow, Q = a.n * P, g = blockIdx.z;
    const int m0 = blockIdx.y * BM;
    const long long q0 = (long long)blockIdx.x * BN;
    int2* tab = reinterpret_cast<int2*>(smem + stage_floats<BM, BN>());
    int* atab = reinterpret_cast<int*>(tab + kg);
    forward_taps(tab, a, kg);
    for (int k = t; k < kg; k += blockDim.x) atab[k] = k;

    Column col{0, NOWHERE, 0};
    const long long q = q0 + t % BN;
    if (q < Q) {
        const long long img = q / P, p = q % P;
        col.y0 = (int)(p / a.ow * a.sh - a.ph);
        col.x0 = (int)(p % a.ow * a.sw - a.pw);
        col.ofs = (img * a.c + g * cg) * a.h * a.w + (long long)col.y0 * a.w + col.x0;
    }
    const int r0 = m0 + t % 32 / 8 + 4 * (t / 64);
    const float* wr = w + (g * og + r0) * (long long)kg;
    int ty, tx;
    stage_thread<TY>(t, ty, tx);
    Acc<BM, BN, TY> acc;
    gather_product<BM, BN, TY>(smem, acc, w, wr, r0, kg, atab, og, x, tab, col, (int)a.h, (int)a.w, kg, ty, tx);
    store_columns<BM, BN, TY>(y, acc, P, Q, a.o, g * og, og, m0, q0, ty, tx, [&](float v, int row) {
        v += has_bias ? bias[g * og + row] : 0.f;
        return relu ? conv_relu(v) : v;
    });
}

// dx = convᵀ(dy) at stride 1 for a group's input channels m0 … m0+BM and input pixels q0 … q0+BN
// of the batch: taps k = m·kh·kw + ki·kw + kj over the group's output channels m, the weight
// w[m][c][ki][kj] at m·kg + c·kh·kw + ki·kw + kj, and dy read at (iy + ph − ki·dh, ix + pw − kj·dw).
template <int BM, int BN, int TY>
__device__ __forceinline__ void dgrad(const float* __restrict__ dy, const float* __restrict__ w,
                                      float* __restrict__ dx, const ConvArgs& a, float* smem) {
    const int t = threadIdx.x;
    const int cg = (int)(a.c / a.groups), og = (int)(a.o / a.groups), khw = (int)(a.kh * a.kw);
    const int kg = cg * khw, kt = og * khw, OW = (int)a.ow;
    const long long HW = a.h * a.w, Q = a.n * HW, P = a.oh * a.ow, g = blockIdx.z;
    const int m0 = blockIdx.y * BM;
    const long long q0 = (long long)blockIdx.x * BN;
    int2* tab = reinterpret_cast<int2*>(smem + stage_floats<BM, BN>());
    int* atab = reinterpret_cast<int*>(tab + kt);
    for (int k = t; k < kt; k += blockDim.x) {
        const int m = k / khw, r = k % khw;
        const int ddy = -(r / (int)a.kw) * (int)a.dh, ddx = -(r % (int)a.kw) * (int)a.dw;
        tab[k] = tap_entry(m * (int)P + ddy * OW + ddx, ddy, ddx);
        atab[k] = m * kg + r;
    }
    Column col{0, NOWHERE, 0};
    const long long q = q0 + t % BN;
    if (q < Q) {
        const long long img = q / HW, p = q % HW;
        col.y0 = (int)(p / a.w + a.ph);
        col.x0 = (int)(p % a.w + a.pw);
        col.ofs = (img * a.o + g * og) * P + (long long)col.y0 * OW + col.x0;
    }
    const int r0 = m0 + t % 32 / 8 + 4 * (t / 64);
    const float* wr = w + g * og * (long long)kg + (long long)r0 * khw;
    int ty, tx;
    stage_thread<TY>(t, ty, tx);
    Acc<BM, BN, TY> acc;
    gather_product<BM, BN, TY>(smem, acc, w, wr, r0, khw, atab, cg, dy, tab, col, (int)a.oh, OW, kt, ty, tx);
    store_columns<BM, BN, TY>(dx, acc, HW, Q, a.c, g * cg, cg, m0, q0, ty, tx, [](float v, int) { return v; });
}

// part[s][g·og + m][k] = Σ over split s's pixel tiles of dy[img][g·og + m][p] · x at tap k of
// pixel p, for the rows m0 … m0+BM and taps n0 … n0+BN of group g; blockIdx.z = s·groups + g,
// S = gridDim.z / groups. The batch's N·⌈P/BK⌉ tiles of BK pixels (a tile within one image) are
// dealt to the S splits as S equal contiguous ranges, so every block has the same work. A thread
// copies the pixel p0 + kk of every tile (kk fixed by its lane and warp), so it finds the
// pixel's position once a tile, and the columns or rows ln / 8 + 4·(warp / 2) + 16·i of the two
// operands.
template <int BM, int BN, int TY>
__device__ __forceinline__ void wgrad(const float* __restrict__ dy, const float* __restrict__ x,
                                      float* __restrict__ part, const ConvArgs& a, float* smem) {
    const int t = threadIdx.x, ln = t % 32, wp = t / 32;
    const int cg = (int)(a.c / a.groups), og = (int)(a.o / a.groups), kg = cg * (int)(a.kh * a.kw);
    const int P = (int)(a.oh * a.ow), OW = (int)a.ow, H = (int)a.h, W = (int)a.w;
    const int S = (int)(gridDim.z / a.groups), s = (int)(blockIdx.z / a.groups);
    const long long g = blockIdx.z % a.groups;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    int2* tab = reinterpret_cast<int2*>(smem + stage_floats<BM, BN>());
    forward_taps(tab, a, kg);
    const int pt = (P + BK - 1) / BK;
    const long long tiles = a.n * pt, t0 = tiles * s / S, t1 = tiles * (s + 1) / S;
    const int kk = ln % 8 + 8 * (wp % 2), c0 = ln / 8 + 4 * (wp / 2);
    int ty, tx;
    stage_thread<TY>(t, ty, tx);
    Acc<BM, BN, TY> acc;
    zero<BM, BN, TY>(acc);
    __syncthreads();  // the tap table
    pipeline<BM, BN, TY>(
        smem, (int)(t1 - t0),
        [&](float* as, float* bs, int ks) {
            const long long tile = t0 + ks, img = tile / pt;
            const int p = (int)(tile - img * pt) * BK + kk;
            const bool pok = p < P;
            const int iy0 = pok ? (int)(p / OW * a.sh - a.ph) : 0, ix0 = pok ? (int)(p % OW * a.sw - a.pw) : 0;
            const float* dyp = dy + (img * a.o + g * og) * P + p;
            const float* xp = x + (img * a.c + g * cg) * a.h * a.w + (long long)iy0 * W + ix0;
#pragma unroll
            for (int i = 0; i < BM / 16; ++i) {
                const int m = c0 + 16 * i, row = m0 + m;
                const bool ok = pok && row < og;
                camel::cp_async4(&as[kk * (BM + 4) + m], ok ? dyp + (long long)row * P : dy, ok);
            }
#pragma unroll
            for (int i = 0; i < BN / 16; ++i) {
                const int n = c0 + 16 * i, k = n0 + n;
                bool ok = pok && k < kg;
                const int2 e = ok ? tab[k] : make_int2(0, 0);
                const int iy = iy0 + tap_dy(e.y), ix = ix0 + tap_dx(e.y);
                ok = ok && (unsigned)iy < (unsigned)H && (unsigned)ix < (unsigned)W;
                camel::cp_async4(&bs[kk * (BN + 4) + n], ok ? xp + e.x : x, ok);
            }
        },
        acc, ty, tx);
    float* out = part + (long long)s * a.o * kg + (g * og) * (long long)kg;
    const bool vec = kg % 4 == 0;
    constexpr int TX = 256 / TY;
#pragma unroll
    for (int i = 0; i < BM / (4 * TY); ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int row = m0 + i * 4 * TY + ty * 4 + r;
            if (row >= og) continue;
#pragma unroll
            for (int j = 0; j < BN / (4 * TX); ++j) {
                const int k = n0 + j * 4 * TX + tx * 4;
                const float* v = &acc[i * 4 + r][j * 4];
                float* o = out + (long long)row * kg + k;
                if (vec && k < kg) {
                    *reinterpret_cast<float4*>(o) = make_float4(v[0], v[1], v[2], v[3]);
                } else {
#pragma unroll
                    for (int c = 0; c < 4; ++c)
                        if (k + c < kg) o[c] = v[c];
                }
            }
        }
}

}  // namespace

// The kernels: NAME_BMxBN, 64-row tiles on the 16 × 16 thread grid, 16-row tiles (groups of at
// most 16 output channels: LeNet's layers) on the 4 × 64 grid. The input gradient has no 16-row
// kernel: for so few input channels step 3's direct kernel is faster.
#define PIPELINED_FORWARD(BM, BN, TY)                                                                          \
    extern "C" __global__ void __launch_bounds__(256, 2) conv2d_pipelined_##BM##x##BN##_f32(                    \
        const float* x, const float* w, const float* bias, float* y, ConvArgs a, int has_bias, int relu) {     \
        CAMEL_PDL_WAIT();                                                                                      \
        extern __shared__ __align__(16) float smem4[];                                                         \
        forward<BM, BN, TY>(x, w, bias, y, a, has_bias, relu, smem4);                                          \
    }
#define PIPELINED_DGRAD(BM, BN, TY)                                                                            \
    extern "C" __global__ void __launch_bounds__(256, 2)                                                       \
        conv2d_pipelined_dgrad_##BM##x##BN##_f32(const float* dy, const float* w, float* dx, ConvArgs a) {     \
        CAMEL_PDL_WAIT();                                                                                      \
        extern __shared__ __align__(16) float smem4[];                                                         \
        dgrad<BM, BN, TY>(dy, w, dx, a, smem4);                                                                \
    }
#define PIPELINED_WGRAD(BM, BN, TY)                                                                            \
    extern "C" __global__ void __launch_bounds__(256, 2)                                                       \
        conv2d_pipelined_wgrad_##BM##x##BN##_f32(const float* dy, const float* x, float* part, ConvArgs a) {   \
        CAMEL_PDL_WAIT();                                                                                      \
        extern __shared__ __align__(16) float smem4[];                                                         \
        wgrad<BM, BN, TY>(dy, x, part, a, smem4);                                                              \
    }
PIPELINED_FORWARD(64, 256, 16)
PIPELINED_FORWARD(16, 256, 4)
PIPELINED_DGRAD(64, 256, 16)
PIPELINED_WGRAD(64, 192, 16)
PIPELINED_WGRAD(64, 64, 16)
PIPELINED_WGRAD(16, 256, 4)
