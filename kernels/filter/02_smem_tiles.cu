// Image filter, step 2: shared-memory tiles with aprons. A 16 x 16 block computes a 16 x 16
// output tile; first all its threads copy the (16 + 2r)^2 input pixels the tile needs (the tile
// and its apron, zero outside the image) and the filter into shared memory, then each thread
// sums its window from there. Global memory is read about (16 + 2r)^2 / 16^2 times per pixel
// (4x at r = 8) instead of (2r+1)^2 times; the (2r+1)^2 multiply-adds per output remain.

#include "filter/filter.cuh"

#define TILE 16

extern "C" __global__ void filter2d_smem_tiles(const float* __restrict__ x, const float* __restrict__ w,
                                               float* __restrict__ y, int H, int W, int r) {
    CAMEL_PDL_WAIT();
    __shared__ float tile[(TILE + 2 * FILTER_MAX_RADIUS) * (TILE + 2 * FILTER_MAX_RADIUS)];
    __shared__ float taps[(2 * FILTER_MAX_RADIUS + 1) * (2 * FILTER_MAX_RADIUS + 1)];
    const int k = 2 * r + 1, tw = TILE + 2 * r;
    const int tid = threadIdx.y * TILE + threadIdx.x;
    const int x0 = blockIdx.x * TILE - r, y0 = blockIdx.y * TILE - r;
    // every thread helps load, also those whose output lies outside the image
    for (int i = tid; i < tw * tw; i += TILE * TILE) tile[i] = filter::at(x, H, W, y0 + i / tw, x0 + i % tw);
    for (int i = tid; i < k * k; i += TILE * TILE) taps[i] = w[i];
    __syncthreads();
    const int col = blockIdx.x * TILE + threadIdx.x, row = blockIdx.y * TILE + threadIdx.y;
    if (row >= H || col >= W) return;
    float acc = 0.0f;
    for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++) acc += taps[a * k + b] * tile[(threadIdx.y + a) * tw + threadIdx.x + b];
    y[(long long)row * W + col] = acc;
}
