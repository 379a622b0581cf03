// Embedding, step 1. Forward gathers rows of the [V, D] table; backward scatter-adds gradient
// rows with atomicAdd, so repeated indices accumulate correctly. A bad index is never
// dereferenced: it records a deferred index error and the output row becomes NaN.
#include "common.cuh"
#include "index_error.cuh"

extern "C" __global__ void index_select_rows_f32(const float* __restrict__ table, const long long* __restrict__ idx,
                                                 float* __restrict__ out, long long n, long long V, long long D,
                                                 long long* err) {
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

// ---------------------------------------------------------------------------------------------
// Step 2 (memory-bound issue): a warp per index. The index is read once per warp instead of
// once per element, no 64-bit division per element (step 1 split the flat index k into
// (k / D, k % D)), and rows move as float4 when D % 4 == 0. Backward keeps atomicAdd, so
// repeated indices still accumulate, one coalesced row at a time. Figures: docs/benchmarks.md.

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
    gather_row<false>(table, idx, out, n, V, D, err);
}
extern "C" __global__ void index_select_rows_warp_vec_f32(const float* __restrict__ table,
                                                          const long long* __restrict__ idx, float* __restrict__ out,
                                                          long long n, long long V, long long D, long long* err) {
    gather_row<true>(table, idx, out, n, V, D, err);
}

// out must be zeroed by the caller.
extern "C" __global__ void index_add_rows_warp_f32(const float* __restrict__ g, const long long* __restrict__ idx,
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
    const float* gi = g + i * D;
    float* o = out + r * D;
    for (long long d = lane; d < D; d += 32) atomicAdd(&o[d], gi[d]);
}

// ---------------------------------------------------------------------------------------------
// Step 3 (memory-bound issue): backward without float atomics on the table, by grouping the
// tokens by row first (a counting sort of the indices, as PyTorch's embedding_dense_backward
// groups them by sorting). Steps 1–2 zero the [V, D] gradient and then add every token's row with
// atomics, each a read-modify-write in L2 of a table that does not fit it (GPT-2's: 154 MB):
// 1.26 ms for 349525 tokens × 768 on the H100. Here each gradient row is written once:
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
// last bits between runs, as with steps 1–2.
#define EMB_CHUNK 32

extern "C" __global__ void embedding_bwd_count(const long long* __restrict__ idx, long long n, long long V,
                                               int* __restrict__ counts, long long* err) {
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
// Measured by ncu on the H100 for V = 50257, against 459 µs of gather: a single block with one
// contiguous run of V/1024 counts a thread (uncoalesced, serial) took 149 µs; a single block
// walking the tiles 57 µs (13 tiles, each a chain of loads and barriers).

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
        if (!act) return;
        float* o = out + (long long)row * D + col;
        if (emb_whole(start, row)) {
            if (W == 4) {
                *reinterpret_cast<float4*>(o) = make_float4(acc[0], acc[1 % W], acc[2 % W], acc[3 % W]);
            } else {
                o[0] = acc[0];
            }
        } else {
#pragma unroll
            for (int q = 0; q < W; ++q) atomicAdd(&o[q], acc[q]);
        }
    };
    for (int j = 0; j < cnt; j += 4) {
        float v[4][W];
        int rr[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {  // four rows' loads in flight before any is added
            const int p = __shfl_sync(0xffffffffu, my_p, (j + u) & 31);
            rr[u] = __shfl_sync(0xffffffffu, my_r, (j + u) & 31);
            const bool ok = act && j + u < cnt;
            const float* src = g + (long long)p * D + col;
            if (W == 4) {
                const float4 x = ok ? *reinterpret_cast<const float4*>(src) : make_float4(0, 0, 0, 0);
                v[u][0] = x.x, v[u][1 % W] = x.y, v[u][2 % W] = x.z, v[u][3 % W] = x.w;
            } else {
                v[u][0] = ok ? src[0] : 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            if (j + u < cnt) {
                if (rr[u] != row) {  // the next group starts: store this one
                    flush();
#pragma unroll
                    for (int q = 0; q < W; ++q) acc[q] = 0.0f;
                    row = rr[u];
                }
#pragma unroll
                for (int q = 0; q < W; ++q) acc[q] += v[u][q];
            }
        }
    }
    flush();
}

extern "C" __global__ void embedding_bwd_gather_f32(const float* __restrict__ g, const int* __restrict__ start,
                                                    const int* __restrict__ order, const int* __restrict__ rows,
                                                    long long V, long long D, float* __restrict__ out) {
    emb_gather<1>(g, start, order, rows, V, D, out);
}
extern "C" __global__ void embedding_bwd_gather_vec_f32(const float* __restrict__ g, const int* __restrict__ start,
                                                        const int* __restrict__ order,
                                                        const int* __restrict__ rows, long long V, long long D,
                                                        float* __restrict__ out) {
    emb_gather<4>(g, start, order, rows, V, D, out);
}
