// Image filter, step 1: naive direct correlation. One thread per output pixel reads its whole
// (2r+1)^2 window and the filter from global memory: every input pixel is read (2r+1)^2 times
// (by the neighbouring threads) and every tap once per output. The caches catch most of the
// reuse, but each load is still an instruction and a trip through L1: the reference point of the
// ladder.

#include "filter/filter.cuh"

extern "C" __global__ void filter2d_naive(const float* __restrict__ x, const float* __restrict__ w,
                                          float* __restrict__ y, int H, int W, int r) {
    CAMEL_PDL_WAIT();
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= H || col >= W) return;
    const int k = 2 * r + 1;
    float acc = 0.0f;
    for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++) acc += w[a * k + b] * filter::at(x, H, W, row + a - r, col + b - r);
    y[(long long)row * W + col] = acc;
}
