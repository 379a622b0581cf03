// Image filter, step 3: separable passes. A filter that is an outer product w = c (x) v (a box
// blur, a Gaussian, Sobel) is applied as a row pass with v into an intermediate image, then a
// column pass with c: 2(2r+1) multiply-adds per pixel instead of (2r+1)^2 (34 instead of 289 at
// r = 8), and each pass's apron is on one axis only. Each pass is step 2's tiling in one
// dimension: a 16 x 16 block loads its 16 x 16 tile plus a 2r apron along the pass's axis into
// shared memory. Two things it leaves: a warp covers two 16-pixel rows, so each global load
// is two 64-byte pieces, and in the row pass the two rows of a warp are 16 + 2r floats apart in
// shared memory, so their reads collide in the same banks (two-way conflicts for r = 1 … 8).

#include "filter/filter.cuh"

#define TILE 16

// t[i][j] = sum_b v[b] x[i][j + b - r]
extern "C" __global__ void filter_rows_separable(const float* __restrict__ x, const float* __restrict__ v,
                                                 float* __restrict__ t, int H, int W, int r) {
    CAMEL_PDL_WAIT();
    __shared__ float tile[TILE * (TILE + 2 * FILTER_MAX_RADIUS)];
    const int k = 2 * r + 1, tw = TILE + 2 * r;
    const int tid = threadIdx.y * TILE + threadIdx.x;
    const int x0 = blockIdx.x * TILE - r, y0 = blockIdx.y * TILE;
    for (int i = tid; i < TILE * tw; i += TILE * TILE) tile[i] = filter::at(x, H, W, y0 + i / tw, x0 + i % tw);
    __syncthreads();
    const int col = blockIdx.x * TILE + threadIdx.x, row = y0 + threadIdx.y;
    if (row >= H || col >= W) return;
    float acc = 0.0f;
    for (int b = 0; b < k; b++) acc += v[b] * tile[threadIdx.y * tw + threadIdx.x + b];
    t[(long long)row * W + col] = acc;
}

// y[i][j] = sum_a c[a] t[i + a - r][j]
extern "C" __global__ void filter_cols_separable(const float* __restrict__ t, const float* __restrict__ c,
                                                 float* __restrict__ y, int H, int W, int r) {
    CAMEL_PDL_WAIT();
    __shared__ float tile[(TILE + 2 * FILTER_MAX_RADIUS) * TILE];
    const int k = 2 * r + 1, th = TILE + 2 * r;
    const int tid = threadIdx.y * TILE + threadIdx.x;
    const int x0 = blockIdx.x * TILE, y0 = blockIdx.y * TILE - r;
    for (int i = tid; i < th * TILE; i += TILE * TILE) tile[i] = filter::at(t, H, W, y0 + i / TILE, x0 + i % TILE);
    __syncthreads();
    const int col = x0 + threadIdx.x, row = blockIdx.y * TILE + threadIdx.y;
    if (row >= H || col >= W) return;
    float acc = 0.0f;
    for (int a = 0; a < k; a++) acc += c[a] * tile[(threadIdx.y + a) * TILE + threadIdx.x];
    y[(long long)row * W + col] = acc;
}
