// Reduction step 1: one block per output element; its threads stride over the reduced axis and a
// shared-memory tree combines them. Simple and correct, but a reduction with few outputs (a sum
// over all elements) runs on one block, and a middle-dim reduction reads strided memory.
// argmax/argmin and the variance live only in this step (every step's table runs them from here):
// they are not on a training step's hot path.

#include "common/common.cuh"
#include "common/half.cuh"

#define RED_THREADS 256

// op 0 sum, 1 max, 2 min; a NaN wins a max or a min, as in PyTorch.
__device__ __forceinline__ float red_combine(int op, float a, float b) {
    if (op == 0) return a + b;
    if (op == 1) return (b > a || isnan(b)) ? b : a;
    return (b < a || isnan(b)) ? b : a;
}

// y[o, i] = reduce_d x[o, d, i]  for x viewed as [outer, dim, inner].  op: 0 sum, 1 max, 2 min.
extern "C" __global__ void reduce_f32(const float* __restrict__ x, float* __restrict__ y,
                                      long long outer, long long dim, long long inner, int op) {
    CAMEL_PDL_WAIT();
    __shared__ float buf[RED_THREADS];
    long long out_idx = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (out_idx >= outer * inner) return;
    long long o = out_idx / inner, i = out_idx % inner;
    const float* base = x + o * dim * inner + i;
    float acc = op == 0 ? 0.0f : (op == 1 ? -INFINITY : INFINITY);
    for (long long d = threadIdx.x; d < dim; d += blockDim.x) acc = red_combine(op, acc, base[d * inner]);
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = red_combine(op, buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) y[out_idx] = buf[0];
}

// Sum of a block's values in buf (RED_THREADS of them); every thread gets it.
__device__ __forceinline__ float block_sum(float* buf, float v) {
    __syncthreads();  // buf may still be read by a previous call
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    return buf[0];
}

// Variance of each row of [rows, cols], two passes over the row in f32: the mean, then the sum of
// squared deviations from it (no cancellation of E[x²] − E[x]²), divided by cols − correction
// (0/0 = NaN where cols <= correction, as torch.var). One block per row. T: the input's element
// type, widened as it loads; the variance is f32.
template <typename T>
__device__ __forceinline__ void var_rows(const T* __restrict__ x, float* __restrict__ y, long long rows,
                                         long long cols, long long correction) {
    __shared__ float buf[RED_THREADS];
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const T* row = x + r * cols;
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += camel::to_float(row[c]);
    float mean = block_sum(buf, s) / (float)cols;
    float q = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = camel::to_float(row[c]) - mean;
        q += d * d;
    }
    q = block_sum(buf, q);
    long long den = cols - correction;
    if (threadIdx.x == 0) y[r] = q / (float)(den > 0 ? den : 0);
}

// Index of the largest (MIN: smallest) element of each row (first on ties, the first NaN where
// the row has one), one block per row. T: the input's element type (compared widened: exact).
template <bool MIN, typename T>
__device__ __forceinline__ void arg_extreme_last(const T* __restrict__ x, long long* __restrict__ out,
                                                 long long rows, long long cols) {
    __shared__ float bv[RED_THREADS];
    __shared__ long long bi[RED_THREADS];
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const T* row = x + r * cols;
    float best = -INFINITY;
    long long idx = cols;  // "none yet"
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = camel::to_float(row[c]);
        if (idx == cols || (best == best && ((MIN ? v < best : v > best) || v != v))) { best = v; idx = c; }
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
            // NaN wins (the first one), as in torch.argmax; otherwise the larger (smaller), then the first.
            bool n1 = v1 != v1, n2 = v2 != v2;
            bool take = i2 != cols && (i1 == cols || (n2 && (!n1 || i2 < i1)) ||
                                       (!n1 && !n2 && ((MIN ? v2 < v1 : v2 > v1) || (v2 == v1 && i2 < i1))));
            if (take) { bv[threadIdx.x] = v2; bi[threadIdx.x] = i2; }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = bi[0] == cols ? 0 : bi[0];
}

// Kernel names: var_rows_{T}, argmax_last_{T}, argmin_last_{T}.
#define ROW_STATS(SUF, T)                                                                                \
    extern "C" __global__ void var_rows_##SUF(const T* __restrict__ x, float* __restrict__ y, long long rows, \
                                              long long cols, long long correction) {                     \
        CAMEL_PDL_WAIT();                                                                                 \
        var_rows(x, y, rows, cols, correction);                                                           \
    }                                                                                                     \
    extern "C" __global__ void argmax_last_##SUF(const T* __restrict__ x, long long* __restrict__ out,     \
                                                 long long rows, long long cols) {                        \
        CAMEL_PDL_WAIT();                                                                                 \
        arg_extreme_last<false>(x, out, rows, cols);                                                      \
    }                                                                                                     \
    extern "C" __global__ void argmin_last_##SUF(const T* __restrict__ x, long long* __restrict__ out,     \
                                                 long long rows, long long cols) {                        \
        CAMEL_PDL_WAIT();                                                                                 \
        arg_extreme_last<true>(x, out, rows, cols);                                                       \
    }
ROW_STATS(f32, float)
ROW_STATS(f16, __half)
ROW_STATS(bf16, __nv_bfloat16)
