// Cross-entropy fused with log-softmax, step 1: one block per row.
// forward:  loss[r] = logsumexp(x[r]) - x[r, t[r]]
// backward: dx[r, c] = g[r] * (softmax(x[r])[c] - [c == t[r]])
// A target outside 0..cols is recorded as a deferred index error; the row gets NaN.
// Row max and sum use the warp-shuffle block reductions of common.cuh (blockDim 256); the backward
// recomputes them: three passes over the row.

#include "common/common.cuh"
#include "common/index_error.cuh"

extern "C" __global__ void cross_entropy_fwd_f32(const float* __restrict__ x, const long long* __restrict__ t,
                                                 float* __restrict__ loss, long long rows, long long cols,
                                                 long long* err) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];  // one slot per warp for camel::block_max/sum
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    long long tr = t[r];
    bool bad = tr < 0 || tr >= cols;
    float mx = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
    mx = camel::block_max(mx, scratch);
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - mx);
    s = camel::block_sum(s, scratch);
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
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];  // one slot per warp for camel::block_max/sum
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* dr = dx + r * cols;
    long long tr = t[r];
    bool bad = tr < 0 || tr >= cols;
    float mx = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
    mx = camel::block_max(mx, scratch);
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - mx);
    s = camel::block_sum(s, scratch);
    float inv = 1.0f / s, gr = g[r];
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        float p = expf(xr[c] - mx) * inv;
        dr[c] = bad ? NAN : gr * (p - (c == tr ? 1.0f : 0.0f));
    }
    if (bad && threadIdx.x == 0) record_index_error(err, CAMEL_OP_CROSS_ENTROPY, tr, cols);
}
