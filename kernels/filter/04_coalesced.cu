// Image filter, step 4: step 3's passes with a coalesced, bank-conflict-free layout. Blocks are
// 32 x 8: a warp is one 32-pixel row segment, so each global load and store of a warp is one
// 128-byte line, and its shared-memory reads are 32 consecutive floats of one tile row, which
// fall in 32 different banks whatever the tile's row stride. Each thread computes four outputs
// (32 apart along the pass's cross axis), so a block's tile is wider (row pass: 8 x (128 + 2r))
// or taller (column pass: (32 + 2r) x 32) and the apron is a smaller part of what is loaded:
// 1.125x and 1.5x the tile at r = 8 instead of 2x.

#include "filter/filter.cuh"

#define BX 32
#define BY 8
#define PER 4  // outputs per thread

// t[i][j] = sum_b v[b] x[i][j + b - r]; a block covers 8 rows x 128 columns
extern "C" __global__ void filter_rows_coalesced(const float* __restrict__ x, const float* __restrict__ v,
                                                 float* __restrict__ t, int H, int W, int r) {
    CAMEL_PDL_WAIT();
    __shared__ float tile[BY * (PER * BX + 2 * FILTER_MAX_RADIUS)];
    const int k = 2 * r + 1, tw = PER * BX + 2 * r;
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int x0 = blockIdx.x * PER * BX - r, y0 = blockIdx.y * BY;
    // consecutive threads load consecutive pixels of a row: coalesced, conflict-free stores
    for (int i = tid; i < BY * tw; i += BX * BY) tile[i] = filter::at(x, H, W, y0 + i / tw, x0 + i % tw);
    __syncthreads();
    const int row = y0 + threadIdx.y;
    if (row >= H) return;
    const float* tr = tile + threadIdx.y * tw + threadIdx.x;
    for (int q = 0; q < PER; q++) {
        const int col = blockIdx.x * PER * BX + q * BX + threadIdx.x;
        if (col >= W) break;
        float acc = 0.0f;
        for (int b = 0; b < k; b++) acc += v[b] * tr[q * BX + b];
        t[(long long)row * W + col] = acc;
    }
}

// y[i][j] = sum_a c[a] t[i + a - r][j]; a block covers 32 rows x 32 columns
extern "C" __global__ void filter_cols_coalesced(const float* __restrict__ t, const float* __restrict__ c,
                                                 float* __restrict__ y, int H, int W, int r) {
    CAMEL_PDL_WAIT();
    __shared__ float tile[(PER * BY + 2 * FILTER_MAX_RADIUS) * BX];
    const int k = 2 * r + 1, th = PER * BY + 2 * r;
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int x0 = blockIdx.x * BX, y0 = blockIdx.y * PER * BY - r;
    for (int i = tid; i < th * BX; i += BX * BY) tile[i] = filter::at(t, H, W, y0 + i / BX, x0 + i % BX);
    __syncthreads();
    const int col = x0 + threadIdx.x;
    if (col >= W) return;
    for (int q = 0; q < PER; q++) {
        const int row = blockIdx.y * PER * BY + q * BY + threadIdx.y;
        if (row >= H) break;
        float acc = 0.0f;
        for (int a = 0; a < k; a++) acc += c[a] * tile[(q * BY + threadIdx.y + a) * BX + threadIdx.x];
        y[(long long)row * W + col] = acc;
    }
}
