// Reduction step 1: one block per output element; its threads stride over the reduced axis and a
// shared-memory tree combines them. Simple and correct, but a reduction with few outputs (a sum
// over all elements) runs on one block, and a middle-dim reduction reads strided memory.

#include "common/common.cuh"

#define RED_THREADS 256

// y[o, i] = reduce_d x[o, d, i]  for x viewed as [outer, dim, inner].  op: 0 sum, 1 max.
extern "C" __global__ void reduce_f32(const float* __restrict__ x, float* __restrict__ y,
                                      long long outer, long long dim, long long inner, int op) {
    CAMEL_PDL_WAIT();
    __shared__ float buf[RED_THREADS];
    long long out_idx = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (out_idx >= outer * inner) return;
    long long o = out_idx / inner, i = out_idx % inner;
    const float* base = x + o * dim * inner + i;
    float acc = op == 0 ? 0.0f : -INFINITY;
    for (long long d = threadIdx.x; d < dim; d += blockDim.x) {
        float v = base[d * inner];
        if (op == 0) acc += v;
        else if (v > acc || isnan(v)) acc = v;
    }
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float a = buf[threadIdx.x], b = buf[threadIdx.x + s];
            buf[threadIdx.x] = op == 0 ? a + b : ((b > a || isnan(b)) ? b : a);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) y[out_idx] = buf[0];
}

// Index of the largest element of each row (first on ties, the first NaN where the row has one),
// one block per row.
extern "C" __global__ void argmax_last_f32(const float* __restrict__ x, long long* __restrict__ out,
                                           long long rows, long long cols) {
    CAMEL_PDL_WAIT();
    __shared__ float bv[RED_THREADS];
    __shared__ long long bi[RED_THREADS];
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* row = x + r * cols;
    float best = -INFINITY;
    long long idx = cols;  // "none yet"
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = row[c];
        if (idx == cols || (best == best && (v > best || v != v))) { best = v; idx = c; }
    }
    bv[threadIdx.x] = best;
    bi[threadIdx.x] = idx;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float v2 = bv[threadIdx.x + s];
            long long i2 = bi[threadIdx.x + s];
            long long i1 = bi[threadIdx.x];
            float v1 = bv[threadIdx.x];
            // NaN wins (the first one), as in torch.argmax; otherwise the larger, then the first.
            bool n1 = v1 != v1, n2 = v2 != v2;
            bool take = i2 != cols && (i1 == cols || (n2 && (!n1 || i2 < i1)) ||
                                       (!n1 && !n2 && (v2 > v1 || (v2 == v1 && i2 < i1))));
            if (take) { bv[threadIdx.x] = v2; bi[threadIdx.x] = i2; }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = bi[0] == cols ? 0 : bi[0];
}
