// Step 2 of the conv2d ladder: implicit GEMM. The same product as step 1 — per group, the
// weight [og, kg] times the column matrix [kg, images·pixels] — in one kernel that never writes
// the column matrix: each block loads its BK × BN slice of it straight from the input into
// shared memory through the patch indexing, and its epilogue adds the bias, applies the ReLU
// and stores NCHW. Step 1 writes the column matrix (kh·kw times the input), reads it back for
// the GEMM, and passes over the output once more for the bias; here the input is read (mostly
// from L2, as neighbouring pixels share it) and the output written once.
//
// The patch indexing without divisions: a column of the tile is one output pixel of one image,
// fixed per thread, so its image and top-left input position are computed once; a row is a
// kernel tap k = (cg·kh + ki)·kw + kj, whose input offset cg·h·w + ki·dh·w + kj·dw and vertical
// and horizontal displacements the block tabulates in shared memory once (KTAB taps at most,
// the launcher runs step 1 beyond). A load is then two bounds checks and one add.
//
// Tiles: BM output channels × BN output pixels per block of 256 threads as 16 × 16, each thread
// holding (BM/16) × (BN/16) accumulators; rows ty + 16·i and columns tx + 16·j, so a warp's
// stores are consecutive pixels. Two instantiations: 64 × 128 and, for groups of at most 16
// output channels (LeNet, depthwise), 16 × 128, which wastes no rows.
#include "conv2d.cuh"

// Most taps (c/groups·kh·kw) the tap table holds (the launcher's IMPLICIT_MAX_TAPS).
#define KTAB 1024

// acc += As[:, rows] × Bs[:, cols] over the BK taps of the tile: rows ty + 16·i, columns tx + 16·j.
template <int BM, int BN, int BK>
__device__ __forceinline__ void tile_fma(const float (&As)[BK][BM + 1], const float (&Bs)[BK][BN],
                                         float (&acc)[BM / 16][BN / 16], int tx, int ty) {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
        float ar[BM / 16], br[BN / 16];
#pragma unroll
        for (int i = 0; i < BM / 16; ++i) ar[i] = As[kk][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < BN / 16; ++j) br[j] = Bs[kk][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < BM / 16; ++i)
#pragma unroll
            for (int j = 0; j < BN / 16; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
    }
}

template <int BM, int BN, int BK>
__device__ __forceinline__ void implicit_gemm(const float* __restrict__ x, const float* __restrict__ w,
                                              const float* __restrict__ bias, float* __restrict__ y,
                                              const ConvArgs& a, int has_bias, int relu) {
    constexpr int TM = BM / 16, TN = BN / 16;
    constexpr int BSTEP = 256 / BN;  // rows of the B tile loaded in one pass of the block
    static_assert(256 % BN == 0, "a thread loads one column of the B tile");
    __shared__ float As[BK][BM + 1];
    __shared__ float Bs[BK][BN];
    __shared__ int tap_off[KTAB], tap_dy[KTAB], tap_dx[KTAB];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const long long P = a.oh * a.ow, Q = a.n * P;
    const int cg_n = (int)(a.c / a.groups), og = (int)(a.o / a.groups);
    const int khw = (int)(a.kh * a.kw), kg = cg_n * khw;
    const int H = (int)a.h, W = (int)a.w;
    const long long g = blockIdx.z, m0 = (long long)blockIdx.y * BM, q0 = (long long)blockIdx.x * BN;

    for (int k = tid; k < kg; k += 256) {
        const int cg = k / khw, r = k % khw, ki = r / (int)a.kw, kj = r % (int)a.kw;
        tap_dy[k] = ki * (int)a.dh;
        tap_dx[k] = kj * (int)a.dw;
        tap_off[k] = cg * H * W + tap_dy[k] * W + tap_dx[k];
    }

    // this thread's column of the B tile: one output pixel of one image
    const int bn = tid % BN, bk0 = tid / BN;
    const long long q = q0 + bn;
    const bool q_ok = q < Q;
    int iy0 = 0, ix0 = 0;
    const float* xb = x;
    if (q_ok) {
        const long long img = q / P, p = q % P;
        iy0 = (int)((p / a.ow) * a.sh - a.ph);
        ix0 = (int)((p % a.ow) * a.sw - a.pw);
        xb = x + (img * a.c + g * cg_n) * a.h * a.w + (long long)iy0 * W + ix0;
    }
    const float* wg = w + g * og * (long long)kg;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    __syncthreads();  // the tap table

    for (int k0 = 0; k0 < kg; k0 += BK) {
        // A tile (weights), read along k: As[kk][m]
        for (int e = tid; e < BM * BK; e += 256) {
            const int m = e / BK, kk = e % BK;
            const long long row = m0 + m;
            const int k = k0 + kk;
            As[kk][m] = (row < og && k < kg) ? wg[row * kg + k] : 0.f;
        }
        // B tile (patches), gathered from x through the tap table: Bs[kk][bn]
#pragma unroll
        for (int s = 0; s < BK / BSTEP; ++s) {
            const int kk = bk0 + s * BSTEP, k = k0 + kk;
            float v = 0.f;
            if (q_ok && k < kg) {
                const int iy = iy0 + tap_dy[k], ix = ix0 + tap_dx[k];
                if ((unsigned)iy < (unsigned)H && (unsigned)ix < (unsigned)W) v = xb[tap_off[k]];
            }
            Bs[kk][bn] = v;
        }
        __syncthreads();
        tile_fma<BM, BN, BK>(As, Bs, acc, tx, ty);
        __syncthreads();
    }

    // epilogue: bias, ReLU, NCHW store
#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const long long qq = q0 + tx + 16 * j;
        if (qq >= Q) continue;
        const long long img = qq / P, p = qq % P;
        float* yp = y + img * a.o * P + p;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const long long row = m0 + ty + 16 * i;
            if (row >= og) continue;
            const long long o = g * og + row;
            float v = acc[i][j] + (has_bias ? bias[o] : 0.f);
            if (relu) v = conv_relu(v);
            yp[o * P] = v;
        }
    }
}


// The input gradient as an implicit GEMM (the transposed convolution): per group,
// dx[c][image·pixel] = Σ over taps (m, ki, kj) of w[m][c][ki][kj] · dy[m][image, oy, ox], where
// (oy, ox) is the output pixel whose patch reads the input pixel through tap (ki, kj): rows are
// the group's input channels, columns the input pixels of the batch, and the K dimension the
// og·kh·kw taps, tabulated as in the forward (weight offset m·kg + ki·kw + kj, upstream channel
// offset m·oh·ow, displacements). A tap reaches an input pixel only where the stride divides
// its offset; step 1 writes the column gradient and folds it back instead (col2im).
template <int BM, int BN, int BK>
__device__ __forceinline__ void implicit_gemm_dgrad(const float* __restrict__ dy, const float* __restrict__ w,
                                                    float* __restrict__ dx, const ConvArgs& a) {
    constexpr int TM = BM / 16, TN = BN / 16;
    constexpr int BSTEP = 256 / BN;
    __shared__ float As[BK][BM + 1];
    __shared__ float Bs[BK][BN];
    __shared__ int tap_w[KTAB], tap_off[KTAB], tap_dy[KTAB], tap_dx[KTAB];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const long long HW = a.h * a.w, Q = a.n * HW, P = a.oh * a.ow;
    const int cg_n = (int)(a.c / a.groups), og = (int)(a.o / a.groups);
    const int khw = (int)(a.kh * a.kw), kg = cg_n * khw, kt = og * khw;
    const int OH = (int)a.oh, OW = (int)a.ow, SH = (int)a.sh, SW = (int)a.sw;
    const long long g = blockIdx.z, m0 = (long long)blockIdx.y * BM, q0 = (long long)blockIdx.x * BN;

    for (int k = tid; k < kt; k += 256) {
        const int m = k / khw, r = k % khw;
        tap_w[k] = m * kg + r;
        tap_off[k] = m * (int)P;
        tap_dy[k] = (r / (int)a.kw) * (int)a.dh;
        tap_dx[k] = (r % (int)a.kw) * (int)a.dw;
    }

    // this thread's column of the B tile: one input pixel of one image
    const int bn = tid % BN, bk0 = tid / BN;
    const long long q = q0 + bn;
    const bool q_ok = q < Q;
    int ty0 = 0, tx0 = 0;
    const float* dyb = dy;
    if (q_ok) {
        const long long img = q / HW, p = q % HW;
        ty0 = (int)(p / a.w + a.ph);
        tx0 = (int)(p % a.w + a.pw);
        dyb = dy + (img * a.o + g * og) * P;
    }
    const float* wg = w + g * og * (long long)kg;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    __syncthreads();  // the tap table

    for (int k0 = 0; k0 < kt; k0 += BK) {
        // A tile: As[kk][c] = w[m][c][ki][kj] of tap k0 + kk
        for (int e = tid; e < BM * BK; e += 256) {
            const int c = e / BK, kk = e % BK;
            const long long row = m0 + c;
            const int k = k0 + kk;
            As[kk][c] = (row < cg_n && k < kt) ? wg[tap_w[k] + row * khw] : 0.f;
        }
        // B tile: Bs[kk][bn] = dy at the output pixel that reads this input pixel through tap k
#pragma unroll
        for (int s = 0; s < BK / BSTEP; ++s) {
            const int kk = bk0 + s * BSTEP, k = k0 + kk;
            float v = 0.f;
            if (q_ok && k < kt) {
                const int yy = ty0 - tap_dy[k], xx = tx0 - tap_dx[k];
                if (yy >= 0 && xx >= 0) {
                    const int oy = yy / SH, ox = xx / SW;
                    if (oy * SH == yy && ox * SW == xx && oy < OH && ox < OW) v = dyb[tap_off[k] + oy * OW + ox];
                }
            }
            Bs[kk][bn] = v;
        }
        __syncthreads();
        tile_fma<BM, BN, BK>(As, Bs, acc, tx, ty);
        __syncthreads();
    }

#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const long long qq = q0 + tx + 16 * j;
        if (qq >= Q) continue;
        const long long img = qq / HW, p = qq % HW;
        float* dxp = dx + (img * a.c + g * cg_n) * HW + p;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const long long row = m0 + ty + 16 * i;
            if (row < cg_n) dxp[row * HW] = acc[i][j];
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
    conv2d_implicit_gemm_m64_f32(const float* x, const float* w, const float* bias, float* y, ConvArgs a,
                                 int has_bias, int relu) {
    CAMEL_PDL_WAIT();
    implicit_gemm<64, 128, 16>(x, w, bias, y, a, has_bias, relu);
}

extern "C" __global__ void __launch_bounds__(256)
    conv2d_implicit_gemm_m16_f32(const float* x, const float* w, const float* bias, float* y, ConvArgs a,
                                 int has_bias, int relu) {
    CAMEL_PDL_WAIT();
    implicit_gemm<16, 128, 16>(x, w, bias, y, a, has_bias, relu);
}

extern "C" __global__ void __launch_bounds__(256)
    conv2d_implicit_dgrad_m64_f32(const float* dy, const float* w, float* dx, ConvArgs a) {
    CAMEL_PDL_WAIT();
    implicit_gemm_dgrad<64, 128, 16>(dy, w, dx, a);
}

extern "C" __global__ void __launch_bounds__(256)
    conv2d_implicit_dgrad_m16_f32(const float* dy, const float* w, float* dx, ConvArgs a) {
    CAMEL_PDL_WAIT();
    implicit_gemm_dgrad<16, 128, 16>(dy, w, dx, a);
}
