// Image filter, step 5: unrolled and tuned. The radius is a template parameter (one kernel per
// radius 0 … 8, chosen at launch), so the loops over the taps unroll and the tile offsets are
// constants. The taps are read once per thread through the read-only path into
// registers (the separable passes) or once per block into shared memory, where a warp reads
// one tap with one broadcast (the 2-D kernel: 289 taps do not fit registers). The filter stays
// a device tensor: constant memory or kernel parameters would need its values on the host, a
// synchronisation per call. Register blocking:
// - 2-D kernel: a thread computes 4 vertically adjacent outputs. For each filter column it
//   reads the 4 + 2R pixels of its column window from shared memory into registers once and
//   applies each of the 2R + 1 taps of that column to 4 outputs: 4 + 2R + 2R + 1 shared loads
//   per 4(2R + 1) multiply-adds, instead of two loads per multiply-add.
// - column pass: no shared memory. A thread computes 8 vertically adjacent outputs of its column,
//   streaming the 8 + 2R input pixels through registers (a warp's loads are one 128-byte row
//   segment); the overlap between the threads of a block is served by L1.
// - row pass: step 4's layout (a warp per tile row, conflict-free) with the taps in registers.

#include "filter/filter.cuh"

#define BX 32
#define BY 8

// 2-D correlation with a (2R+1)^2 filter; a block covers 32 x 32 outputs, 4 rows per thread.
template <int R>
__device__ __forceinline__ void filter2d_tuned(const float* __restrict__ x, const float* __restrict__ w,
                                               float* __restrict__ y, int H, int W) {
    constexpr int K = 2 * R + 1, RB = 4, TW = BX + 2 * R, TH = BY * RB + 2 * R;
    __shared__ float tile[TH * TW];
    __shared__ float taps[K * K];
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int x0 = blockIdx.x * BX - R, y0 = blockIdx.y * BY * RB - R;
    for (int i = tid; i < TH * TW; i += BX * BY) tile[i] = filter::at(x, H, W, y0 + i / TW, x0 + i % TW);
    for (int i = tid; i < K * K; i += BX * BY) taps[i] = __ldg(w + i);
    __syncthreads();
    float acc[RB];
#pragma unroll
    for (int j = 0; j < RB; j++) acc[j] = 0.0f;
    const float* base = tile + threadIdx.y * RB * TW + threadIdx.x;
    // the loop over filter columns stays rolled: unrolled too, 17 copies of the body exceed
    // what the compiler keeps in registers and the window spills to local memory
#pragma unroll 1
    for (int b = 0; b < K; b++) {
        float win[RB + 2 * R];
#pragma unroll
        for (int s = 0; s < RB + 2 * R; s++) win[s] = base[s * TW + b];
#pragma unroll
        for (int a = 0; a < K; a++) {
            const float wv = taps[a * K + b];
#pragma unroll
            for (int j = 0; j < RB; j++) acc[j] = fmaf(wv, win[a + j], acc[j]);
        }
    }
    const int col = blockIdx.x * BX + threadIdx.x;
    if (col >= W) return;
#pragma unroll
    for (int j = 0; j < RB; j++) {
        const int row = blockIdx.y * BY * RB + threadIdx.y * RB + j;
        if (row < H) y[(long long)row * W + col] = acc[j];
    }
}

// Row pass t[i][j] = sum_b v[b] x[i][j + b - R]; a block covers 8 rows x 128 columns.
template <int R>
__device__ __forceinline__ void filter_rows_tuned(const float* __restrict__ x, const float* __restrict__ v,
                                                  float* __restrict__ t, int H, int W) {
    constexpr int K = 2 * R + 1, PER = 4, TW = PER * BX + 2 * R;
    __shared__ float tile[BY * TW];
    float taps[K];
#pragma unroll
    for (int b = 0; b < K; b++) taps[b] = __ldg(v + b);
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int x0 = blockIdx.x * PER * BX - R, y0 = blockIdx.y * BY;
    for (int i = tid; i < BY * TW; i += BX * BY) tile[i] = filter::at(x, H, W, y0 + i / TW, x0 + i % TW);
    __syncthreads();
    const int row = y0 + threadIdx.y;
    if (row >= H) return;
    const float* tr = tile + threadIdx.y * TW + threadIdx.x;
#pragma unroll
    for (int q = 0; q < PER; q++) {
        float acc = 0.0f;
#pragma unroll
        for (int b = 0; b < K; b++) acc = fmaf(taps[b], tr[q * BX + b], acc);
        const int col = blockIdx.x * PER * BX + q * BX + threadIdx.x;
        if (col < W) t[(long long)row * W + col] = acc;
    }
}

// Column pass y[i][j] = sum_a c[a] t[i + a - R][j]; a block covers 64 rows x 32 columns.
template <int R>
__device__ __forceinline__ void filter_cols_tuned(const float* __restrict__ t, const float* __restrict__ c,
                                                  float* __restrict__ y, int H, int W) {
    constexpr int K = 2 * R + 1, CB = 8;
    float taps[K];
#pragma unroll
    for (int a = 0; a < K; a++) taps[a] = __ldg(c + a);
    const int col = blockIdx.x * BX + threadIdx.x;
    if (col >= W) return;
    const int r0 = (blockIdx.y * BY + threadIdx.y) * CB;
    float acc[CB];
#pragma unroll
    for (int j = 0; j < CB; j++) acc[j] = 0.0f;
    // input row r0 - R + s feeds output j through tap a = s - j
#pragma unroll
    for (int s = 0; s < CB + 2 * R; s++) {
        const float p = filter::at(t, H, W, r0 - R + s, col);
#pragma unroll
        for (int j = 0; j < CB; j++) {
            if (s - j >= 0 && s - j < K) acc[j] = fmaf(taps[s - j], p, acc[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < CB; j++) {
        if (r0 + j < H) y[(long long)(r0 + j) * W + col] = acc[j];
    }
}

#define FILTER_TUNED(R)                                                                                    \
    extern "C" __global__ void __launch_bounds__(BX* BY)                                                   \
        filter2d_tuned_r##R(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, \
                            int H, int W) {                                                                \
        CAMEL_PDL_WAIT();                                                                                  \
        filter2d_tuned<R>(x, w, y, H, W);                                                                  \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(BX* BY)                                                   \
        filter_rows_tuned_r##R(const float* __restrict__ x, const float* __restrict__ v,                   \
                               float* __restrict__ t, int H, int W) {                                      \
        CAMEL_PDL_WAIT();                                                                                  \
        filter_rows_tuned<R>(x, v, t, H, W);                                                               \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(BX* BY)                                                   \
        filter_cols_tuned_r##R(const float* __restrict__ t, const float* __restrict__ c,                   \
                               float* __restrict__ y, int H, int W) {                                      \
        CAMEL_PDL_WAIT();                                                                                  \
        filter_cols_tuned<R>(t, c, y, H, W);                                                               \
    }

FILTER_RADII(FILTER_TUNED)
