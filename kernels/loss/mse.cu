// The mean squared error of two tensors of one float dtype (f32, f16, bf16), in f32 whatever the
// dtype: each element widens as it is loaded, the squared differences are summed in f32, and the
// gradient rounds once as it is stored. Not a ladder: a grid-stride pass writes one partial sum
// a block, and the launcher's caller adds the partials with the reduction ladder and scales by
// 1/n (a fixed number of blocks for a given n, so the sum's order, and its bits, repeat).
// Launchers: crates/camel-cuda/src/kernels/loss.rs (`mse_partial`, `mse_bwd`).

#include "common/common.cuh"
#include "common/half.cuh"

// partial[blockIdx.x] = Σ (a[i] − b[i])² over the elements this block's threads visit.
template <typename T>
__device__ __forceinline__ void mse_partial(const T* __restrict__ a, const T* __restrict__ b,
                                            float* __restrict__ partial, long long n) {
    __shared__ float scratch[32];
    float s = 0.0f;
    GRID_STRIDE_LOOP(i, n) {
        const float d = camel::to_float(a[i]) - camel::to_float(b[i]);
        s += d * d;
    }
    s = camel::block_sum(s, scratch);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// da = scale · g · (a − b) and db = −da, each rounded once to T; g is the loss's one f32 upstream
// gradient, read on the device (no host round trip), scale = 2/n. A null da or db is skipped (an
// operand that needs no gradient).
template <typename T>
__device__ __forceinline__ void mse_bwd(const T* __restrict__ a, const T* __restrict__ b,
                                        const float* __restrict__ g, T* __restrict__ da, T* __restrict__ db,
                                        long long n, float scale) {
    const float k = scale * g[0];
    GRID_STRIDE_LOOP(i, n) {
        const float d = k * (camel::to_float(a[i]) - camel::to_float(b[i]));
        if (da) da[i] = camel::from_float<T>(d);
        if (db) db[i] = camel::from_float<T>(-d);
    }
}

// Kernel names: mse_partial_{T}, mse_bwd_{T}.
#define MSE(SUF, T)                                                                                       \
    extern "C" __global__ void mse_partial_##SUF(const T* __restrict__ a, const T* __restrict__ b,        \
                                                 float* __restrict__ partial, long long n) {              \
        CAMEL_PDL_WAIT();                                                                                 \
        mse_partial(a, b, partial, n);                                                                    \
    }                                                                                                     \
    extern "C" __global__ void mse_bwd_##SUF(const T* __restrict__ a, const T* __restrict__ b,            \
                                             const float* __restrict__ g, T* __restrict__ da,             \
                                             T* __restrict__ db, long long n, float scale) {              \
        CAMEL_PDL_WAIT();                                                                                 \
        mse_bwd(a, b, g, da, db, n, scale);                                                               \
    }
MSE(f32, float)
MSE(f16, __half)
MSE(bf16, __nv_bfloat16)
