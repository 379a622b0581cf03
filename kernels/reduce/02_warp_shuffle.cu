// Reduction step 2: warp shuffles in place of the shared-memory tree, and a layout per shape.
// - last dim, short rows (≤ 1024): a warp per row, shuffles only;
// - last dim, long rows and many of them: a block per row;
// - few long rows (the sum over all elements is one row): two passes — pass 1 splits each row
//   into chunks, one block per chunk, writing partials; pass 2 reduces each row's partials
//   with the warp-per-row kernel;
// - a middle dim (inner > 1): one thread per output, consecutive threads read consecutive
//   addresses (coalesced) while walking the reduced dim.
// Loads are float4 where rows start 16-byte aligned.

#include "common/rows.cuh"

template <bool WARP, bool VEC>
__device__ __forceinline__ void reduce_row(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                           long long cols, int op) {
    __shared__ float scratch[32];
    long long r = camel::group_row<WARP>();
    if (r >= rows) return;
    const float* xr = x + r * cols;
    const int tid = camel::group_tid<WARP>(), gs = camel::group_size<WARP>();
    float acc = camel::identity(op);
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (long long c = tid; c < cols / 4; c += gs) {
            float4 v = x4[c];
            acc = camel::combine(op, acc, camel::combine(op, camel::combine(op, v.x, v.y), camel::combine(op, v.z, v.w)));
        }
    } else {
        for (long long c = tid; c < cols; c += gs) acc = camel::combine(op, acc, xr[c]);
    }
    acc = camel::group_reduce<WARP>(op, acc, scratch);
    if (tid == 0) y[r] = acc;
}

#define REDUCE_VARIANT(suffix, WARP, VEC)                                                                   \
    extern "C" __global__ void reduce_rows_##suffix(const float* __restrict__ x, float* __restrict__ y,     \
                                                    long long rows, long long cols, int op) {               \
        CAMEL_PDL_WAIT();                                                                                   \
        reduce_row<WARP, VEC>(x, y, rows, cols, op);                                                         \
    }

REDUCE_VARIANT(warp_f32, true, false)
REDUCE_VARIANT(warp_vec_f32, true, true)
REDUCE_VARIANT(block_f32, false, false)
REDUCE_VARIANT(block_vec_f32, false, true)

// Pass 1 of the split reduction: block (chunk = blockIdx.x, row = blockIdx.y) reduces
// x[row, chunk*chunk_len .. +chunk_len] into partial[row * gridDim.x + chunk].
// chunk_len is a multiple of 4 when VEC.
template <bool VEC>
__device__ __forceinline__ void reduce_partial(const float* __restrict__ x, float* __restrict__ partial,
                                               long long cols, long long chunk_len, int op) {
    __shared__ float scratch[32];
    long long r = blockIdx.y, start = (long long)blockIdx.x * chunk_len;
    long long end = min(cols, start + chunk_len);
    const float* xr = x + r * cols;
    float acc = camel::identity(op);
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (long long c = start / 4 + threadIdx.x; c < end / 4; c += blockDim.x) {
            float4 v = x4[c];
            acc = camel::combine(op, acc, camel::combine(op, camel::combine(op, v.x, v.y), camel::combine(op, v.z, v.w)));
        }
    } else {
        for (long long c = start + threadIdx.x; c < end; c += blockDim.x) acc = camel::combine(op, acc, xr[c]);
    }
    acc = camel::group_reduce<false>(op, acc, scratch);
    if (threadIdx.x == 0) partial[r * gridDim.x + blockIdx.x] = acc;
}

extern "C" __global__ void reduce_partial_f32(const float* __restrict__ x, float* __restrict__ partial,
                                              long long cols, long long chunk_len, int op) {
    CAMEL_PDL_WAIT();
    reduce_partial<false>(x, partial, cols, chunk_len, op);
}
extern "C" __global__ void reduce_partial_vec_f32(const float* __restrict__ x, float* __restrict__ partial,
                                                  long long cols, long long chunk_len, int op) {
    CAMEL_PDL_WAIT();
    reduce_partial<true>(x, partial, cols, chunk_len, op);
}

// y[o, i] = reduce_d x[o, d, i] for inner > 1: one thread per output, coalesced along i.
extern "C" __global__ void reduce_cols_f32(const float* __restrict__ x, float* __restrict__ y, long long outer,
                                           long long dim, long long inner, int op) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(k, outer * inner) {
        long long o = k / inner, i = k % inner;
        const float* base = x + o * dim * inner + i;
        float acc = camel::identity(op);
        for (long long d = 0; d < dim; ++d) acc = camel::combine(op, acc, base[d * inner]);
        y[k] = acc;
    }
}
