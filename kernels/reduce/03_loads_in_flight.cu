// Reduction step 3, the last-dim reduction over many rows: step 2's warp-per-row / block-per-row
// layout with the loop unrolled by 4 into 4 independent accumulators. Step 2 folds each load into
// one accumulator, so a thread has one load in flight at a time; here each thread issues 4 float4
// (or 4 scalar) loads before combining any of them, 4× the bytes in flight. The split two-pass
// path for few long rows and the middle-dim kernel stay step 2's.

#include "common/rows.cuh"

template <bool WARP, bool VEC>
__device__ __forceinline__ void reduce3_row(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                            long long cols, int op) {
    constexpr int U = 4;
    __shared__ float scratch[32];
    long long r = camel::group_row<WARP>();
    if (r >= rows) return;
    const float* xr = x + r * cols;
    const int tid = camel::group_tid<WARP>(), gs = camel::group_size<WARP>();
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = camel::identity(op);
    const long long n = VEC ? cols / 4 : cols;  // vector elements
    long long c = tid;
    for (; c + (long long)(U - 1) * gs < n; c += (long long)U * gs) {
        if (VEC) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = x4[c + (long long)u * gs];
#pragma unroll
            for (int u = 0; u < U; ++u)
                acc[u] = camel::combine(
                    op, acc[u],
                    camel::combine(op, camel::combine(op, v[u].x, v[u].y), camel::combine(op, v[u].z, v[u].w)));
        } else {
            float v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = xr[c + (long long)u * gs];
#pragma unroll
            for (int u = 0; u < U; ++u) acc[u] = camel::combine(op, acc[u], v[u]);
        }
    }
    for (; c < n; c += gs) {  // the last < U rounds
        if (VEC) {
            float4 v = reinterpret_cast<const float4*>(xr)[c];
            acc[0] = camel::combine(op, acc[0],
                                    camel::combine(op, camel::combine(op, v.x, v.y), camel::combine(op, v.z, v.w)));
        } else {
            acc[0] = camel::combine(op, acc[0], xr[c]);
        }
    }
    float a = camel::combine(op, camel::combine(op, acc[0], acc[1]), camel::combine(op, acc[2], acc[3]));
    a = camel::group_reduce<WARP>(op, a, scratch);
    if (tid == 0) y[r] = a;
}

#define REDUCE3_VARIANT(suffix, WARP, VEC)                                                                  \
    extern "C" __global__ void reduce3_rows_##suffix(const float* __restrict__ x, float* __restrict__ y,    \
                                                     long long rows, long long cols, int op) {              \
        CAMEL_PDL_WAIT();                                                                                   \
        reduce3_row<WARP, VEC>(x, y, rows, cols, op);                                                        \
    }

REDUCE3_VARIANT(warp_f32, true, false)
REDUCE3_VARIANT(warp_vec_f32, true, true)
REDUCE3_VARIANT(block_f32, false, false)
REDUCE3_VARIANT(block_vec_f32, false, true)
