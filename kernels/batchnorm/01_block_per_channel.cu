// BatchNorm, step 1: a block per channel. Launchers: crates/camel-cuda/src/kernels/batchnorm.rs.
// x is [N, C, hw] (hw: the product of the trailing dims, 1 for [N, C]); channel c's m = N·hw
// values are N runs of hw contiguous floats, C·hw apart. The block's threads walk them in order
// (consecutive threads on consecutive positions of a run), so the reads of a run coalesce.
//
// Training forward: Welford per thread, merged across the block (shuffles, then one shared-memory
// hop), then the normalize-and-affine pass re-reads the channel (from L2 when it fits) and writes
// y = (x − mean)·(rstd·w) + b, rstd = 1/√(var + eps), var biased (÷ m), as PyTorch. Saves mean and
// var per channel: the backward recomputes rstd from them, and the layer updates its running
// statistics from them.
//
// Backward: with x̂ = (x − mean)·rstd, one pass for the channel's two sums Σg and Σg·x̂ (they are
// db and dw, written by the block: no atomics, deterministic), a second for
//   training: dx = w·rstd·(g − Σg/m − x̂·Σg·x̂/m)       eval: dx = w·rstd·g.
//
// Eval forward: elementwise, y = (x − mean[c])·rstd[c]·w[c] + b[c] with the given statistics.
//
// Each kernel is a template over the element type T of x, y, g and dx (float, __half,
// __nv_bfloat16; the names end in _f32, _f16, _bf16): elements widen to f32 as they are read and
// each output rounds once; the weight, bias, statistics and their gradients are f32 whatever T.
#include "common/rows.cuh"

namespace {

// Calls f(offset) for every value of channel c, this thread's share: k = threadIdx.x, then
// every blockDim.x-th, with (sample, position) = (k / hw, k % hw) advanced without dividing.
template <class F>
__device__ __forceinline__ void for_channel(long long n, long long C, long long hw, long long c, F f) {
    const long long m = n * hw, bd = blockDim.x;
    const long long sn = bd / hw, si = bd % hw;
    long long s = threadIdx.x / hw, i = threadIdx.x % hw;
    // unrolled so that several iterations' loads are in flight before their arithmetic
#pragma unroll 4
    for (long long k = threadIdx.x; k < m; k += bd) {
        f((s * C + c) * hw + i);
        s += sn;
        i += si;
        if (i >= hw) {
            i -= hw;
            ++s;
        }
    }
}

// Merges every thread's (count, mean, M2) into the block's; every thread gets the result.
__device__ __forceinline__ void block_welford(float& n, float& mu, float& m2) {
    __shared__ float sh[3][32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    camel::warp_welford(n, mu, m2);
    // the butterfly is not symmetric for Welford: lane 0's result stands for the warp
    if (lane == 0) {
        sh[0][warp] = n;
        sh[1][warp] = mu;
        sh[2][warp] = m2;
    }
    __syncthreads();
    if (warp == 0) {
        n = lane < warps ? sh[0][lane] : 0.0f;
        mu = lane < warps ? sh[1][lane] : 0.0f;
        m2 = lane < warps ? sh[2][lane] : 0.0f;
        camel::warp_welford(n, mu, m2);
    }
    __syncthreads();  // every warp has read its slot before lane 0 of warp 0 overwrites slot 0
    if (threadIdx.x == 0) {
        sh[0][0] = n;
        sh[1][0] = mu;
        sh[2][0] = m2;
    }
    __syncthreads();
    n = sh[0][0];
    mu = sh[1][0];
    m2 = sh[2][0];
}

}  // namespace

// grid: C blocks (one per channel); block: a multiple of 32 threads, at most 1024 (32 warps:
// block_welford's slots).
template <typename T>
__device__ __forceinline__ void batchnorm_fwd(const T* __restrict__ x, const float* __restrict__ w,
                                              const float* __restrict__ b, T* __restrict__ y,
                                              float* __restrict__ mean, float* __restrict__ var, long long n,
                                              long long C, long long hw, float eps) {
    CAMEL_PDL_WAIT();
    const long long c = blockIdx.x;
    float cnt = 0.0f, mu = 0.0f, m2 = 0.0f;
    for_channel(n, C, hw, c, [&](long long o) { camel::welford_add(cnt, mu, m2, camel::to_float(x[o])); });
    block_welford(cnt, mu, m2);
    const float v = m2 / (float)(n * hw);
    const float a = w[c] / sqrtf(v + eps), sh = b[c];
    for_channel(n, C, hw, c, [&](long long o) { y[o] = camel::from_float<T>((camel::to_float(x[o]) - mu) * a + sh); });
    if (threadIdx.x == 0) {
        mean[c] = mu;
        var[c] = v;
    }
}

// grid: C blocks; block: a multiple of 32 threads. training: 1 for the batch-statistics backward,
// 0 for eval's (mean and var constants).
template <typename T>
__device__ __forceinline__ void batchnorm_bwd(const T* __restrict__ x, const float* __restrict__ w,
                                              const T* __restrict__ g, const float* __restrict__ mean,
                                              const float* __restrict__ var, T* __restrict__ dx,
                                              float* __restrict__ dw, float* __restrict__ db, long long n,
                                              long long C, long long hw, float eps, int training) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];
    const long long c = blockIdx.x;
    const float mu = mean[c], rs = 1.0f / sqrtf(var[c] + eps);
    float sg = 0.0f, sgx = 0.0f;  // Σ g, Σ g·(x − mean)
    for_channel(n, C, hw, c, [&](long long o) {
        const float gv = camel::to_float(g[o]);
        sg += gv;
        sgx += gv * (camel::to_float(x[o]) - mu);
    });
    sg = camel::group_sum<false>(sg, scratch);
    sgx = camel::group_sum<false>(sgx, scratch) * rs;  // Σ g·x̂
    if (threadIdx.x == 0) {
        dw[c] = sgx;
        db[c] = sg;
    }
    const float wr = w[c] * rs;
    if (training) {
        const float inv_m = 1.0f / (float)(n * hw), a = sg * inv_m, k = sgx * inv_m * rs;
        for_channel(n, C, hw, c, [&](long long o) {
            dx[o] = camel::from_float<T>(wr * (camel::to_float(g[o]) - a - (camel::to_float(x[o]) - mu) * k));
        });
    } else {
        for_channel(n, C, hw, c, [&](long long o) { dx[o] = camel::from_float<T>(wr * camel::to_float(g[o])); });
    }
}

// A thread per element (grid-stride): y = (x − mean[c])/√(var[c] + eps)·w[c] + b[c].
template <typename T>
__device__ __forceinline__ void batchnorm_eval(const T* __restrict__ x, const float* __restrict__ mean,
                                               const float* __restrict__ var, const float* __restrict__ w,
                                               const float* __restrict__ b, T* __restrict__ y, long long total,
                                               long long C, long long hw, float eps) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(k, total) {
        const long long c = (k / hw) % C;
        y[k] = camel::from_float<T>((camel::to_float(x[k]) - mean[c]) * (w[c] / sqrtf(var[c] + eps)) + b[c]);
    }
}

#define BATCHNORM(T, SUF)                                                                                   \
    extern "C" __global__ void batchnorm_fwd_##SUF(const T* __restrict__ x, const float* __restrict__ w,     \
                                                   const float* __restrict__ b, T* __restrict__ y,          \
                                                   float* __restrict__ mean, float* __restrict__ var,       \
                                                   long long n, long long C, long long hw, float eps) {     \
        batchnorm_fwd<T>(x, w, b, y, mean, var, n, C, hw, eps);                                             \
    }                                                                                                       \
    extern "C" __global__ void batchnorm_bwd_##SUF(                                                         \
        const T* __restrict__ x, const float* __restrict__ w, const T* __restrict__ g,                      \
        const float* __restrict__ mean, const float* __restrict__ var, T* __restrict__ dx,                  \
        float* __restrict__ dw, float* __restrict__ db, long long n, long long C, long long hw, float eps,   \
        int training) {                                                                                     \
        batchnorm_bwd<T>(x, w, g, mean, var, dx, dw, db, n, C, hw, eps, training);                          \
    }                                                                                                       \
    extern "C" __global__ void batchnorm_eval_##SUF(const T* __restrict__ x, const float* __restrict__ mean, \
                                                    const float* __restrict__ var, const float* __restrict__ w, \
                                                    const float* __restrict__ b, T* __restrict__ y,         \
                                                    long long total, long long C, long long hw, float eps) { \
        batchnorm_eval<T>(x, mean, var, w, b, y, total, C, hw, eps);                                        \
    }

BATCHNORM(float, f32)
BATCHNORM(__half, f16)
BATCHNORM(__nv_bfloat16, bf16)
