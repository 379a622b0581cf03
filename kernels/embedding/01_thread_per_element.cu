// Embedding, step 1: a thread per element. Forward gathers rows of the [V, D] table; backward
// scatter-adds gradient rows with atomicAdd, so repeated indices accumulate correctly. A bad index
// is never dereferenced: it records a deferred index error and the output row becomes NaN.

#include "common/common.cuh"
#include "common/index_error.cuh"

extern "C" __global__ void index_select_rows_f32(const float* __restrict__ table, const long long* __restrict__ idx,
                                                 float* __restrict__ out, long long n, long long V, long long D,
                                                 long long* err) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(k, n * D) {
        long long i = k / D, d = k % D;
        long long r = idx[i];
        if (r < 0 || r >= V) {
            if (d == 0) record_index_error(err, CAMEL_OP_EMBEDDING, r, V);
            out[k] = NAN;
        } else {
            out[k] = table[r * D + d];
        }
    }
}

// out must be zeroed by the caller.
extern "C" __global__ void index_add_rows_f32(const float* __restrict__ g, const long long* __restrict__ idx,
                                              float* __restrict__ out, long long n, long long V, long long D,
                                              long long* err) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(k, n * D) {
        long long i = k / D, d = k % D;
        long long r = idx[i];
        if (r < 0 || r >= V) {
            if (d == 0) record_index_error(err, CAMEL_OP_EMBEDDING_BWD, r, V);
        } else {
            atomicAdd(&out[r * D + d], g[k]);
        }
    }
}
