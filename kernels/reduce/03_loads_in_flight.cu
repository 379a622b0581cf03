// Reduction step 3, the last-dim reduction over many rows: step 2's warp-per-row / block-per-row
// layout with the loop unrolled by 4 into 4 independent accumulators. Step 2 folds each load into
// one accumulator, so a thread has one load in flight at a time; here each thread issues 4 float4
// (or 4 scalar) loads before combining any of them, 4× the bytes in flight. The split two-pass
// path for few long rows stays step 2's; so does the middle-dim kernel (a thread per output) when
// the outputs fill the GPU, and when they are few the reduced dim is split into chunks instead
// (`reduce3_cols_partial_f32`, then step 2's kernel over the partials).
//
// The row kernels and the chunked pass take the input's element type T as a template parameter
// (float, __half, __nv_bfloat16: names ending _f32, _f16, _bf16): each element widens to f32 as
// it is loaded, and the accumulators and the outputs are f32 whatever T, so a 16-bit sum runs
// in f32 (the caller rounds the result). VEC: 4 elements a load (16 bytes of f32, 8 of 16-bit).

#include "common/rows.cuh"

// Vector element i of row xr (elements 4i … 4i + 3) widened to f32: one 16-byte load of f32, one
// 8-byte load of 16-bit elements.
__device__ __forceinline__ float4 ld4_at(const float* xr, long long i) { return reinterpret_cast<const float4*>(xr)[i]; }
template <typename T>
__device__ __forceinline__ float4 ld4_at(const T* xr, long long i) {
    const uint2 w = reinterpret_cast<const uint2*>(xr)[i];
    return make_float4(camel::bits_to_float<T>(w.x & 0xffff), camel::bits_to_float<T>(w.x >> 16),
                       camel::bits_to_float<T>(w.y & 0xffff), camel::bits_to_float<T>(w.y >> 16));
}

template <bool WARP, bool VEC, typename T = float>
__device__ __forceinline__ void reduce3_row(const T* __restrict__ x, float* __restrict__ y, long long rows,
                                            long long cols, int op) {
    constexpr int U = 4;
    __shared__ float scratch[32];
    long long r = camel::group_row<WARP>();
    if (r >= rows) return;
    const T* xr = x + r * cols;
    const int tid = camel::group_tid<WARP>(), gs = camel::group_size<WARP>();
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = camel::identity(op);
    const long long n = VEC ? cols / 4 : cols;  // vector elements
    long long c = tid;
    for (; c + (long long)(U - 1) * gs < n; c += (long long)U * gs) {
        if (VEC) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = ld4_at(xr, c + (long long)u * gs);
#pragma unroll
            for (int u = 0; u < U; ++u)
                acc[u] = camel::combine(
                    op, acc[u],
                    camel::combine(op, camel::combine(op, v[u].x, v[u].y), camel::combine(op, v[u].z, v[u].w)));
        } else {
            float v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = camel::to_float(xr[c + (long long)u * gs]);
#pragma unroll
            for (int u = 0; u < U; ++u) acc[u] = camel::combine(op, acc[u], v[u]);
        }
    }
    for (; c < n; c += gs) {  // the last < U rounds
        if (VEC) {
            float4 v = ld4_at(xr, c);
            acc[0] = camel::combine(op, acc[0],
                                    camel::combine(op, camel::combine(op, v.x, v.y), camel::combine(op, v.z, v.w)));
        } else {
            acc[0] = camel::combine(op, acc[0], camel::to_float(xr[c]));
        }
    }
    float a = camel::combine(op, camel::combine(op, acc[0], acc[1]), camel::combine(op, acc[2], acc[3]));
    a = camel::group_reduce<WARP>(op, a, scratch);
    if (tid == 0) y[r] = a;
}

#define REDUCE3_VARIANT(suffix, WARP, VEC, T)                                                               \
    extern "C" __global__ void reduce3_rows_##suffix(const T* __restrict__ x, float* __restrict__ y,        \
                                                     long long rows, long long cols, int op) {              \
        CAMEL_PDL_WAIT();                                                                                   \
        reduce3_row<WARP, VEC, T>(x, y, rows, cols, op);                                                     \
    }
#define REDUCE3_VARIANTS(T, SUF)                                                                            \
    REDUCE3_VARIANT(warp_##SUF, true, false, T)                                                             \
    REDUCE3_VARIANT(warp_vec_##SUF, true, true, T)                                                          \
    REDUCE3_VARIANT(block_##SUF, false, false, T)                                                           \
    REDUCE3_VARIANT(block_vec_##SUF, false, true, T)

REDUCE3_VARIANTS(float, f32)
REDUCE3_VARIANTS(__half, f16)
REDUCE3_VARIANTS(__nv_bfloat16, bf16)

// The middle-dim reduction y[o, i] = reduce_d x[o, d, i] when the outputs are too few to fill
// the GPU with a thread each (a bias gradient: 384 columns summed over 16384 rows). Pass 1 splits
// d into `gridDim.y` chunks of `chunk_len`: a block of 32 × 8 threads covers 32 columns of one
// chunk of one outer slice, each warp reading 32 consecutive floats of a row (coalesced) and the 8
// warps taking every 8th row with 4 loads in flight, then combining across warps in shared memory.
// partial[o, c, i] holds chunk c's result; pass 2 reduces the partials along c.
template <typename T>
__device__ __forceinline__ void reduce3_cols_partial(const T* __restrict__ x, float* __restrict__ partial,
                                                     long long dim, long long inner, long long chunk_len, int op) {
    CAMEL_PDL_WAIT();
    constexpr int U = 4;
    __shared__ float scratch[8][33];
    const long long i = (long long)blockIdx.x * 32 + threadIdx.x;
    const long long o = blockIdx.z, c = blockIdx.y;
    const long long d0 = c * chunk_len;
    const long long d1 = min(dim, d0 + chunk_len);
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = camel::identity(op);
    if (i < inner) {
        const T* base = x + o * dim * inner + i;
        long long d = d0 + threadIdx.y;
        for (; d + (U - 1) * 8 < d1; d += U * 8) {
            float v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = camel::to_float(base[(d + u * 8) * inner]);
#pragma unroll
            for (int u = 0; u < U; ++u) acc[u] = camel::combine(op, acc[u], v[u]);
        }
        for (; d < d1; d += 8) acc[0] = camel::combine(op, acc[0], camel::to_float(base[d * inner]));
    }
    scratch[threadIdx.y][threadIdx.x] =
        camel::combine(op, camel::combine(op, acc[0], acc[1]), camel::combine(op, acc[2], acc[3]));
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
        float a = scratch[0][threadIdx.x];
#pragma unroll
        for (int w = 1; w < 8; ++w) a = camel::combine(op, a, scratch[w][threadIdx.x]);
        partial[(o * gridDim.y + c) * inner + i] = a;
    }
}

#define REDUCE3_COLS_PARTIAL(T, SUF)                                                                        \
    extern "C" __global__ void reduce3_cols_partial_##SUF(const T* __restrict__ x, float* __restrict__ partial, \
                                                          long long dim, long long inner, long long chunk_len, \
                                                          int op) {                                         \
        reduce3_cols_partial<T>(x, partial, dim, inner, chunk_len, op);                                     \
    }
REDUCE3_COLS_PARTIAL(float, f32)
REDUCE3_COLS_PARTIAL(__half, f16)
REDUCE3_COLS_PARTIAL(__nv_bfloat16, bf16)
