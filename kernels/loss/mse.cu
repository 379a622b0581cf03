// The mean squared error of two tensors of one float dtype (f32, f16, bf16), in f32 whatever the
// dtype: each element widens as it is loaded, the squared differences are summed in f32, and the
// gradient rounds once as it is stored. Not a ladder: a grid-stride pass writes one partial sum
// a block, and the launcher's caller adds the partials with the reduction ladder and scales by
// 1/n (a fixed number of blocks for a given n, so the sum's order, and its bits, repeat).
//
// VEC: four elements a load (rows.cuh's ldv/stv: 16 bytes of f32, 8 of a 16-bit type), where
// every pointer is aligned to that; each thread of the forward keeps two such loads of each
// operand in flight. A 16-bit operand read two bytes at a time leaves too few bytes in flight to
// reach the memory's bandwidth. Launchers: crates/camel-cuda/src/kernels/loss.rs (`mse_partial`,
// `mse_bwd`).

#include "common/rows.cuh"

// partial[blockIdx.x] = Σ (a[i] − b[i])² over the elements this block's threads visit.
template <bool VEC, typename T>
__device__ __forceinline__ void mse_partial(const T* __restrict__ a, const T* __restrict__ b,
                                            float* __restrict__ partial, long long n) {
    __shared__ float scratch[32];
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    float s0 = 0.0f, s1 = 0.0f;
    long long tail = 0;  // the first element the vector loop leaves to the scalar one
    if (VEC) {
        const long long nv = n / 4;  // vector elements
        long long i = tid;
        for (; i + stride < nv; i += 2 * stride) {
            float x0[4], y0[4], x1[4], y1[4];
            camel::ldv<false, 4>(a + 4 * i, x0);
            camel::ldv<false, 4>(b + 4 * i, y0);
            camel::ldv<false, 4>(a + 4 * (i + stride), x1);
            camel::ldv<false, 4>(b + 4 * (i + stride), y1);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float d0 = x0[k] - y0[k], d1 = x1[k] - y1[k];
                s0 += d0 * d0;
                s1 += d1 * d1;
            }
        }
        if (i < nv) {
            float x0[4], y0[4];
            camel::ldv<false, 4>(a + 4 * i, x0);
            camel::ldv<false, 4>(b + 4 * i, y0);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float d = x0[k] - y0[k];
                s0 += d * d;
            }
        }
        tail = 4 * nv;
    }
    for (long long i = tail + tid; i < n; i += stride) {
        const float d = camel::to_float(a[i]) - camel::to_float(b[i]);
        s1 += d * d;
    }
    const float s = camel::block_sum(s0 + s1, scratch);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// da = scale · g · (a − b) and db = −da, each rounded once to T; g is the loss's one f32 upstream
// gradient, read on the device (no host round trip), scale = 2/n. A null da or db is skipped (an
// operand that needs no gradient). VEC: element i of the grid-stride loop is the four elements
// 4i … 4i + 3 (the launcher checks the alignment; the last n % 4 go one a thread).
template <bool VEC, typename T>
__device__ __forceinline__ void mse_bwd(const T* __restrict__ a, const T* __restrict__ b,
                                        const float* __restrict__ g, T* __restrict__ da, T* __restrict__ db,
                                        long long n, float scale) {
    const float k = scale * g[0];
    long long tail = 0;
    if (VEC) {
        GRID_STRIDE_LOOP(i, n / 4) {
            float x[4], y[4], d[4], e[4];
            camel::ldv<false, 4>(a + 4 * i, x);
            camel::ldv<false, 4>(b + 4 * i, y);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                d[j] = k * (x[j] - y[j]);
                e[j] = -d[j];
            }
            if (da) camel::stv<false, 4>(da + 4 * i, d);
            if (db) camel::stv<false, 4>(db + 4 * i, e);
        }
        tail = n / 4 * 4;
    }
    for (long long i = tail + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float d = k * (camel::to_float(a[i]) - camel::to_float(b[i]));
        if (da) da[i] = camel::from_float<T>(d);
        if (db) db[i] = camel::from_float<T>(-d);
    }
}

// Kernel names: mse_partial[_vec]_{T}, mse_bwd[_vec]_{T}.
#define MSE_V(V, VS, SUF, T)                                                                              \
    extern "C" __global__ void mse_partial##VS##_##SUF(const T* __restrict__ a, const T* __restrict__ b,  \
                                                       float* __restrict__ partial, long long n) {        \
        CAMEL_PDL_WAIT();                                                                                 \
        mse_partial<V>(a, b, partial, n);                                                                 \
    }                                                                                                     \
    extern "C" __global__ void mse_bwd##VS##_##SUF(const T* __restrict__ a, const T* __restrict__ b,      \
                                                   const float* __restrict__ g, T* __restrict__ da,       \
                                                   T* __restrict__ db, long long n, float scale) {        \
        CAMEL_PDL_WAIT();                                                                                 \
        mse_bwd<V>(a, b, g, da, db, n, scale);                                                            \
    }
#define MSE(SUF, T) MSE_V(false, , SUF, T) MSE_V(true, _vec, SUF, T)
MSE(f32, float)
MSE(f16, __half)
MSE(bf16, __nv_bfloat16)
