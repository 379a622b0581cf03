// Deferred index errors. Kernels that read an index (embedding, cross-entropy targets) never
// touch memory out of range: a bad index skips the access and records itself here, in a small
// per-device buffer of four int64 [flag, op, index, size]. The host reads it at the next sync
// point (item(), to_vec(), ...) and returns a typed error, much like CUDA's own async errors.
#pragma once

#define CAMEL_OP_EMBEDDING 1
#define CAMEL_OP_EMBEDDING_BWD 2
#define CAMEL_OP_CROSS_ENTROPY 3
// multinomial: index = the row, size = why (1: a weight negative, NaN or infinite, or a sum not
// positive and finite; 2: fewer positive weights than samples without replacement)
#define CAMEL_OP_MULTINOMIAL 4

__device__ __forceinline__ void record_index_error(long long* err, long long op, long long index, long long size) {
    if (atomicCAS((unsigned long long*)err, 0ull, 1ull) == 0ull) {
        err[1] = op;
        err[2] = index;
        err[3] = size;
    }
}
