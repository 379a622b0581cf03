// Softmax / log-softmax along the last dim, step 1: one block per row, three passes over the
// row (max, sum of exp, write). The memory-bound issue adds online-softmax and warp-per-row steps.
#include "common.cuh"

#define SM_THREADS 256

__device__ float block_reduce(float v, float* buf, bool is_max) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float a = buf[threadIdx.x], b = buf[threadIdx.x + s];
            buf[threadIdx.x] = is_max ? fmaxf(a, b) : a + b;
        }
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_last_f32(const float* __restrict__ x, float* __restrict__ y,
                                            long long rows, long long cols, int log_out) {
    __shared__ float buf[SM_THREADS];
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float mx = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
    mx = block_reduce(mx, buf, true);
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - mx);
    s = block_reduce(s, buf, false);
    if (log_out) {
        float lse = logf(s);
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] - mx - lse;
    } else {
        float inv = 1.0f / s;
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - mx) * inv;
    }
}
