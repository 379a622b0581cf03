// Embedding step 2: a warp per index. The index is read once per warp instead of once per
// element, no 64-bit division per element (step 1 splits the flat index k into (k / D, k % D)),
// and rows move as float4 when D % 4 == 0. Backward keeps atomicAdd, so repeated indices still
// accumulate, one coalesced row at a time.
//
// f16 and bf16 tables have kernels here too (step 2 is the one step with them): the gather moves
// 16-bit patterns, and the backward adds the 16-bit upstream rows into an f32 table, which the
// caller rounds to the table's dtype once, so repeated indices sum in f32.

#include "common/common.cuh"
#include "common/half.cuh"
#include "common/index_error.cuh"

// A NaN pattern that is a NaN in both f16 and bf16, for a row whose index is out of range.
#define EMB_NAN_B16 ((unsigned short)0x7fff)

__device__ __forceinline__ float emb_nan(float) { return NAN; }
__device__ __forceinline__ unsigned short emb_nan(unsigned short) { return EMB_NAN_B16; }

// T: float, or unsigned short for the 16-bit dtypes (moved as bit patterns); VEC: float4 rows.
template <typename T, bool VEC>
__device__ __forceinline__ void gather_row(const T* __restrict__ table, const long long* __restrict__ idx,
                                           T* __restrict__ out, long long n, long long V, long long D,
                                           long long* err) {
    long long i = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (i >= n) return;
    int lane = threadIdx.x % 32;
    long long r = idx[i];
    T* o = out + i * D;
    if (r < 0 || r >= V) {
        if (lane == 0) record_index_error(err, CAMEL_OP_EMBEDDING, r, V);
        for (long long d = lane; d < D; d += 32) o[d] = emb_nan(T{});
        return;
    }
    const T* src = table + r * D;
    if constexpr (VEC) {
        const float4* s4 = reinterpret_cast<const float4*>(src);
        float4* o4 = reinterpret_cast<float4*>(o);
        for (long long d = lane; d < D / 4; d += 32) o4[d] = s4[d];
    } else {
        for (long long d = lane; d < D; d += 32) o[d] = src[d];
    }
}

extern "C" __global__ void index_select_rows_warp_f32(const float* __restrict__ table, const long long* __restrict__ idx,
                                                      float* __restrict__ out, long long n, long long V, long long D,
                                                      long long* err) {
    CAMEL_PDL_WAIT();
    gather_row<float, false>(table, idx, out, n, V, D, err);
}
extern "C" __global__ void index_select_rows_warp_vec_f32(const float* __restrict__ table,
                                                          const long long* __restrict__ idx, float* __restrict__ out,
                                                          long long n, long long V, long long D, long long* err) {
    CAMEL_PDL_WAIT();
    gather_row<float, true>(table, idx, out, n, V, D, err);
}
extern "C" __global__ void index_select_rows_warp_b16(const unsigned short* __restrict__ table,
                                                      const long long* __restrict__ idx,
                                                      unsigned short* __restrict__ out, long long n, long long V,
                                                      long long D, long long* err) {
    CAMEL_PDL_WAIT();
    gather_row<unsigned short, false>(table, idx, out, n, V, D, err);
}

// out must be zeroed by the caller. T: the upstream gradient's element type; out is f32.
template <typename T>
__device__ __forceinline__ void add_row(const T* __restrict__ g, const long long* __restrict__ idx,
                                        float* __restrict__ out, long long n, long long V, long long D,
                                        long long* err) {
    long long i = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (i >= n) return;
    int lane = threadIdx.x % 32;
    long long r = idx[i];
    if (r < 0 || r >= V) {
        if (lane == 0) record_index_error(err, CAMEL_OP_EMBEDDING_BWD, r, V);
        return;
    }
    const T* gi = g + i * D;
    float* o = out + r * D;
    for (long long d = lane; d < D; d += 32) atomicAdd(&o[d], camel::to_float(gi[d]));
}

#define ADD_ROWS(NAME, T)                                                                                     \
    extern "C" __global__ void NAME(const T* __restrict__ g, const long long* __restrict__ idx,               \
                                    float* __restrict__ out, long long n, long long V, long long D,          \
                                    long long* err) {                                                         \
        CAMEL_PDL_WAIT();                                                                                     \
        add_row<T>(g, idx, out, n, V, D, err);                                                                \
    }
ADD_ROWS(index_add_rows_warp_f32, float)
ADD_ROWS(index_add_rows_warp_f16, __half)
ADD_ROWS(index_add_rows_warp_bf16, __nv_bfloat16)
