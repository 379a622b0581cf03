// Cross-entropy fused with log-softmax, step 1: one block per row.
// forward:  loss[r] = logsumexp(x[r]) - x[r, t[r]]
// backward: dx[r, c] = g[r] * (softmax(x[r])[c] - [c == t[r]])
// A target outside 0..cols is recorded as a deferred index error; the row gets NaN.
#include "common.cuh"
#include "index_error.cuh"

#define CE_THREADS 256

__device__ float ce_block_reduce(float v, float* buf, bool is_max) {
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

extern "C" __global__ void cross_entropy_fwd_f32(const float* __restrict__ x, const long long* __restrict__ t,
                                                 float* __restrict__ loss, long long rows, long long cols,
                                                 long long* err) {
    __shared__ float buf[CE_THREADS];
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    long long tr = t[r];
    bool bad = tr < 0 || tr >= cols;
    float mx = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
    mx = ce_block_reduce(mx, buf, true);
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - mx);
    s = ce_block_reduce(s, buf, false);
    if (threadIdx.x == 0) {
        if (bad) {
            record_index_error(err, CAMEL_OP_CROSS_ENTROPY, tr, cols);
            loss[r] = NAN;
        } else {
            loss[r] = (mx - xr[tr]) + logf(s);
        }
    }
}

extern "C" __global__ void cross_entropy_bwd_f32(const float* __restrict__ x, const long long* __restrict__ t,
                                                 const float* __restrict__ g, float* __restrict__ dx,
                                                 long long rows, long long cols, long long* err) {
    __shared__ float buf[CE_THREADS];
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* dr = dx + r * cols;
    long long tr = t[r];
    bool bad = tr < 0 || tr >= cols;
    float mx = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
    mx = ce_block_reduce(mx, buf, true);
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - mx);
    s = ce_block_reduce(s, buf, false);
    float inv = 1.0f / s, gr = g[r];
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        float p = expf(xr[c] - mx) * inv;
        dr[c] = bad ? NAN : gr * (p - (c == tr ? 1.0f : 0.0f));
    }
    if (bad && threadIdx.x == 0) record_index_error(err, CAMEL_OP_CROSS_ENTROPY, tr, cols);
}
