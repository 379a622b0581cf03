// Softmax / log-softmax along the last dim, step 1: one block per row, three passes over the
// row (max, sum of exp, write), combined with the warp-shuffle block reductions of common.cuh.
// The backward is one block per row too, with scalar loads: the reference point of the ladder.

#include "common/common.cuh"

extern "C" __global__ void softmax_last_f32(const float* __restrict__ x, float* __restrict__ y,
                                            long long rows, long long cols, int log_out) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];  // one slot per warp for camel::block_max/sum
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float mx = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
    mx = camel::block_max(mx, scratch);
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - mx);
    s = camel::block_sum(s, scratch);
    if (log_out) {
        float lse = logf(s);
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] - mx - lse;
    } else {
        float inv = 1.0f / s;
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - mx) * inv;
    }
}

extern "C" __global__ void softmax_bwd_f32(const float* __restrict__ y, const float* __restrict__ g,
                                           float* __restrict__ dx, long long rows, long long cols, int log_out) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* yr = y + r * cols;
    const float* gr = g + r * cols;
    float* dr = dx + r * cols;
    float dot = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) dot += log_out ? gr[c] : gr[c] * yr[c];
    dot = camel::block_sum(dot, scratch);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x)
        dr[c] = log_out ? gr[c] - expf(yr[c]) * dot : yr[c] * (gr[c] - dot);
}
