// Embedding step 2: a warp per index. The index is read once per warp instead of once per
// element, no 64-bit division per element (step 1 splits the flat index k into (k / D, k % D)),
// and rows move as float4 when D % 4 == 0. Backward keeps atomicAdd, so repeated indices still
// accumulate, one coalesced row at a time.

#include "common/common.cuh"
#include "common/index_error.cuh"

template <bool VEC>
__device__ __forceinline__ void gather_row(const float* __restrict__ table, const long long* __restrict__ idx,
                                           float* __restrict__ out, long long n, long long V, long long D,
                                           long long* err) {
    long long i = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (i >= n) return;
    int lane = threadIdx.x % 32;
    long long r = idx[i];
    float* o = out + i * D;
    if (r < 0 || r >= V) {
        if (lane == 0) record_index_error(err, CAMEL_OP_EMBEDDING, r, V);
        for (long long d = lane; d < D; d += 32) o[d] = NAN;
        return;
    }
    const float* src = table + r * D;
    if (VEC) {
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
    gather_row<false>(table, idx, out, n, V, D, err);
}
extern "C" __global__ void index_select_rows_warp_vec_f32(const float* __restrict__ table,
                                                          const long long* __restrict__ idx, float* __restrict__ out,
                                                          long long n, long long V, long long D, long long* err) {
    CAMEL_PDL_WAIT();
    gather_row<true>(table, idx, out, n, V, D, err);
}

// out must be zeroed by the caller.
extern "C" __global__ void index_add_rows_warp_f32(const float* __restrict__ g, const long long* __restrict__ idx,
                                                   float* __restrict__ out, long long n, long long V, long long D,
                                                   long long* err) {
    CAMEL_PDL_WAIT();
    long long i = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (i >= n) return;
    int lane = threadIdx.x % 32;
    long long r = idx[i];
    if (r < 0 || r >= V) {
        if (lane == 0) record_index_error(err, CAMEL_OP_EMBEDDING_BWD, r, V);
        return;
    }
    const float* gi = g + i * D;
    float* o = out + r * D;
    for (long long d = lane; d < D; d += 32) atomicAdd(&o[d], gi[d]);
}
