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
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float ar[TM], br[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) ar[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < TN; ++j) br[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
        }
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
