// Reductions, step 1 (CUDA backend issue): one block per output element, threads stride over
// the reduced axis, a shared-memory tree combines them. Simple and correct; the memory-bound
// issue replaces it with warp-shuffle / vectorized versions and keeps this one selectable.
#include "common.cuh"

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

// Index of the largest element of each row (first on ties), one block per row.
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
        if (idx == cols || v > best) { best = v; idx = c; }
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
            bool take = i2 != cols && (i1 == cols || v2 > v1 || (v2 == v1 && i2 < i1));
            if (take) { bv[threadIdx.x] = v2; bi[threadIdx.x] = i2; }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = bi[0] == cols ? 0 : bi[0];
}

// ---------------------------------------------------------------------------------------------
// Step 2 (memory-bound issue). Step 1 gives every output one block and a shared-memory tree; it
// starves the GPU when there are few outputs (a sum over all elements ran on ONE block) and
// reads strided memory when the reduced dim is not the last. Step 2:
// - last dim, short rows (≤ 1024): a warp per row, shuffles only;
// - last dim, long rows and many of them: a block per row;
// - few long rows (the sum over all elements is one row): two passes — pass 1 splits each row
//   into chunks, one block per chunk, writing partials; pass 2 reduces each row's partials
//   with the warp-per-row kernel;
// - a middle dim (inner > 1): one thread per output, consecutive threads read consecutive
//   addresses (coalesced) while walking the reduced dim.
// Loads are float4 where rows start 16-byte aligned. Figures: docs/benchmarks.md.
#include "rows.cuh"

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

// ---------------------------------------------------------------------------------------------
// Step 3 (`CAMEL_REDUCE=3`, the default) of the last-dim reduction over many rows: the same
// warp-per-row (≤ 1024 columns) / block-per-row layout as step 2, with the loop unrolled by 4
// into 4 independent accumulators. Step 2's loop folds each load into one accumulator, so a
// thread has one float4 in flight at a time (the next load is issued only when the loop comes
// round); at 65536×4096 it reached 87–89 % of copy on the H200. Here each thread issues 4
// float4 (or 4 scalar) loads before combining any of them: 4× the bytes in flight per thread.
// The split two-pass path for few long rows and the middle-dim kernel stay step 2's.
// Measured (H100, copy 2988 GB/s, bench_memory, 65536×4096): sum_last 2785 → 2812 GB/s (94 %),
// max_last 2780 → 2827 GB/s (95 %); PyTorch 2899 and 2874.
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
