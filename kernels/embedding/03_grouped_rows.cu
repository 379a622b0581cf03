// Embedding step 3: the backward without float atomics on the table, by grouping the tokens by
// row first (a counting sort of the indices, as PyTorch's embedding_dense_backward groups them by
// sorting). Steps 1–2 zero the [V, D] gradient and then add every token's row with atomics, each a
// read-modify-write in L2 of a table that need not fit it. Here each gradient row is written once:
//   1. count    counts[r] = number of valid tokens with index r (bad ones record the deferred
//               index error and are skipped)
//   2. scan     start = exclusive prefix sum of counts (two launches over tiles of 4096),
//               cursor = start
//   3. fill     the token ids grouped by row: order[cursor[r]++] = i, rows[...] = r
//   4. zero     the rows no single warp writes whole: empty ones, and ones whose group crosses a
//               chunk boundary (those are then summed with atomics, see 5)
//   5. gather   a warp per EMB_CHUNK consecutive grouped tokens × 128 columns: it sums the
//               upstream rows of each group in registers and stores the sum, or adds it
//               atomically when the group spans chunks (a skewed index, e.g. a padding token, is
//               thus spread over many warps).
// The order within a group comes from atomics, so sums of repeated indices may differ in the
// last bits between runs, as with steps 1–2. The forward is step 2's.

#include "common/index_error.cuh"
#include "embedding/embedding.cuh"

extern "C" __global__ void embedding_bwd_count(const long long* __restrict__ idx, long long n, long long V,
                                               int* __restrict__ counts, long long* err) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) {
        const long long r = idx[i];
        if (r < 0 || r >= V) {
            record_index_error(err, CAMEL_OP_EMBEDDING_BWD, r, V);
        } else {
            atomicAdd(&counts[r], 1);
        }
    }
}

// The scan in two launches over tiles of 4096 counts (1024 threads, 4 consecutive counts each,
// so a warp's loads are 512 contiguous bytes): scan_tiles writes each tile's local exclusive
// scan into start and the tile's total into tile_sums; scan_offsets adds the totals of the
// tiles before (each block sums them itself: there are V/4096 of them) and copies start to
// cursor. start has V + 1 entries (start[V] = the valid tokens).

// Block-wide exclusive scan of one value a thread (1024 threads); returns the block total too.
__device__ __forceinline__ int emb_block_scan(int s, int* warp_sums, int& total) {
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const int x = camel::warp_inclusive_scan(s);
    if (lane == 31) warp_sums[w] = x;
    __syncthreads();
    if (w == 0) warp_sums[lane] = camel::warp_inclusive_scan(warp_sums[lane]);
    __syncthreads();
    total = warp_sums[31];
    return x - s + (w > 0 ? warp_sums[w - 1] : 0);
}

extern "C" __global__ void __launch_bounds__(1024) embedding_bwd_scan_tiles(const int* __restrict__ counts,
                                                                            int* __restrict__ start,
                                                                            int* __restrict__ tile_sums,
                                                                            long long V) {
    CAMEL_PDL_WAIT();
    __shared__ int warp_sums[32];
    const long long r0 = (long long)blockIdx.x * 4096 + 4 * threadIdx.x;
    int c[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) c[q] = r0 + q < V ? counts[r0 + q] : 0;
    int total;
    int run = emb_block_scan(c[0] + c[1] + c[2] + c[3], warp_sums, total);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        if (r0 + q < V) start[r0 + q] = run;
        run += c[q];
    }
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

extern "C" __global__ void __launch_bounds__(1024) embedding_bwd_scan_offsets(const int* __restrict__ tile_sums,
                                                                              int* __restrict__ start,
                                                                              int* __restrict__ cursor,
                                                                              long long V) {
    CAMEL_PDL_WAIT();
    __shared__ int scratch[32];
    int s = 0;  // the totals of the tiles before this one
    for (int i = threadIdx.x; i < (int)blockIdx.x; i += 1024) s += tile_sums[i];
    const int offset = camel::block_sum(s, scratch);
    const long long r0 = (long long)blockIdx.x * 4096 + 4 * threadIdx.x;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        if (r0 + q < V) {
            const int v = start[r0 + q] + offset;
            start[r0 + q] = v;
            cursor[r0 + q] = v;
        }
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) start[V] = offset + tile_sums[blockIdx.x];
}

extern "C" __global__ void embedding_bwd_fill(const long long* __restrict__ idx, long long n, long long V,
                                              int* __restrict__ cursor, int* __restrict__ order,
                                              int* __restrict__ rows) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) {
        const long long r = idx[i];
        if (r >= 0 && r < V) {
            const int p = atomicAdd(&cursor[r], 1);
            order[p] = (int)i;
            rows[p] = (int)r;
        }
    }
}

// Whether row r's group [start[r], start[r+1]) is non-empty and inside one chunk.
__device__ __forceinline__ bool emb_whole(const int* start, long long r) {
    const int s = start[r], e = start[r + 1];
    return e > s && s / EMB_CHUNK == (e - 1) / EMB_CHUNK;
}

// A warp per row.
extern "C" __global__ void embedding_bwd_zero(const int* __restrict__ start, long long V, long long D,
                                              float* __restrict__ out) {
    CAMEL_PDL_WAIT();
    const long long r = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= V || emb_whole(start, r)) return;
    float* o = out + r * D;
    for (long long d = threadIdx.x % 32; d < D; d += 32) o[d] = 0.0f;
}

// A warp per (chunk of EMB_CHUNK grouped tokens, block of 32 lanes × W columns): W = 4 (float4)
// when D % 4 == 0, else 1. The grid covers ⌈n / EMB_CHUNK⌉ chunks (n: all tokens); chunks past
// the valid ones (bad indices were skipped) return at once.
template <int W>
__device__ __forceinline__ void emb_gather(const float* __restrict__ g, const int* __restrict__ start,
                                           const int* __restrict__ order, const int* __restrict__ rows,
                                           long long V, long long D, float* __restrict__ out) {
    const long long wid = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * (blockDim.x / 32) + threadIdx.x / 32;
    const long long nb = (D / W + 31) / 32;  // column blocks
    const long long c = wid / nb, cb = wid % nb;
    const int total = start[V];
    if (c * EMB_CHUNK >= total) return;
    const int j0 = (int)(c * EMB_CHUNK), cnt = min(EMB_CHUNK, total - j0);
    const int lane = threadIdx.x % 32;
    const long long col = (cb * 32 + lane) * W;
    const bool act = col < D;
    // the chunk's token ids and rows, one per lane, broadcast by shuffles below
    const int my_p = lane < cnt ? order[j0 + lane] : 0, my_r = lane < cnt ? rows[j0 + lane] : -1;
    float acc[W];
#pragma unroll
    for (int q = 0; q < W; ++q) acc[q] = 0.0f;
    int row = __shfl_sync(0xffffffffu, my_r, 0);
    auto flush = [&]() {
        if (act) emb_put<W>(out + (long long)row * D + col, acc, emb_whole(start, row));
    };
    emb_sum_grouped<W>(g, D, col, act, cnt, my_p, my_r, acc, row, flush);
    flush();
}

extern "C" __global__ void embedding_bwd_gather_f32(const float* __restrict__ g, const int* __restrict__ start,
                                                    const int* __restrict__ order, const int* __restrict__ rows,
                                                    long long V, long long D, float* __restrict__ out) {
    CAMEL_PDL_WAIT();
    emb_gather<1>(g, start, order, rows, V, D, out);
}
extern "C" __global__ void embedding_bwd_gather_vec_f32(const float* __restrict__ g, const int* __restrict__ start,
                                                        const int* __restrict__ order,
                                                        const int* __restrict__ rows, long long V, long long D,
                                                        float* __restrict__ out) {
    CAMEL_PDL_WAIT();
    emb_gather<4>(g, start, order, rows, V, D, out);
}
