// Embedding, step 1. Forward gathers rows of the [V, D] table; backward scatter-adds gradient
// rows with atomicAdd, so repeated indices accumulate correctly. A bad index is never
// dereferenced: it records a deferred index error and the output row becomes NaN.
#include "common/common.cuh"
#include "common/index_error.cuh"
#include "common/rows.cuh"  // grid_barrier

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

// ---------------------------------------------------------------------------------------------
// Step 2 (memory-bound issue): a warp per index. The index is read once per warp instead of
// once per element, no 64-bit division per element (step 1 split the flat index k into
// (k / D, k % D)), and rows move as float4 when D % 4 == 0. Backward keeps atomicAdd, so
// repeated indices still accumulate, one coalesced row at a time. Figures: docs/kernels/embedding.md.

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

// Shared by the gathers of steps 3 and 4. Adds `cnt` grouped tokens into `acc` (columns col …
// col + W − 1; lane k < cnt holds token k's id in my_p and its row in my_r), four rows' loads in
// flight before any is added; where the row changes it calls flush() for the finished group and
// starts the next one's sum.
template <int W, class Flush>
__device__ __forceinline__ void emb_sum_grouped(const float* __restrict__ g, long long D, long long col, bool act,
                                                int cnt, int my_p, int my_r, float (&acc)[W], int& row,
                                                Flush& flush) {
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
}

// Writes a group's sum: a plain store (the group's only writer) or atomic adds (one of several).
template <int W>
__device__ __forceinline__ void emb_put(float* o, const float (&acc)[W], bool store) {
    if (store) {
        if (W == 4) {
            *reinterpret_cast<float4*>(o) = make_float4(acc[0], acc[1 % W], acc[2 % W], acc[3 % W]);
        } else {
            o[0] = acc[0];
        }
    } else {
#pragma unroll
        for (int q = 0; q < W; ++q) atomicAdd(&o[q], acc[q]);
    }
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

// ---------------------------------------------------------------------------------------------
// Step 4 (memory-bound issue): step 3 without its zero pass and atomics on ordinary rows, and its
// preprocessing in one launch. Measured in dev/labs/embedding_lab.cu (H100, 349525 tokens × 768 into
// 50257 rows, streamed): step 3 514 µs (79 % of copy), of which its gather 458.5: the rows whose
// group crosses a 32-token chunk (~11 k of 50 k) were zeroed (34 MB) and then read-modified-
// written by atomics. Here
//   1. embedding_bwd4_group, one launch of resident blocks, three phases between grid barriers:
//      count   each token's rank among its row's tokens is the old value of its atomicAdd (the
//              lanes of a warp with the same row add once, __match_any_sync: a padding token
//              costs one atomic a warp, not one a token); the first EMB4_K ranks of a thread stay
//              in registers, later ones go to `rank`;
//      scan    tiles of 1024 rows: a tile publishes its total, then adds the totals of the tiles
//              before it (they are all running); each count is zeroed once read; rows of more
//              than EMB4_LONG tokens are zeroed here (the gather adds into them atomically);
//      fill    entry[start[r] + rank] = (token, r | EMB4_LONG_BIT if r's group is long), one
//              8-byte store a token, no atomics.
//      counts, tile flags and the barrier live in the device's counters (zero whenever no kernel
//      runs; the last block out leaves them zero): no memset launch.
//   2. embedding_bwd4_gather: a warp per (32-token chunk, 128 columns) owns the groups that
//      *start* in its chunk and follows the last one past the chunk's end, so each row is
//      stored once, plainly; only long groups (> EMB4_LONG tokens, so no warp sums more than
//      32 + EMB4_LONG tokens) are split over chunks and added atomically. Extra warps at the
//      front of the grid zero the empty rows, 32 rows a warp.
// Lab (same call): preprocessing 26.6 µs (step 3's memset + 4 launches: 37 µs), gather 423 µs
// (96 % of copy; 414 when the indices are sorted), 451 µs in all: 90.4 % of copy. With 30 % of the
// tokens on one row: 547 µs (step 3: 749; without the warp-aggregated count 620).
#define EMB4_LONG 128
#define EMB4_LONG_BIT 0x80000000u
#define EMB4_K 4
#define EMB4_TILE 1024

// Exclusive scan of one value a thread over a block of 256; `ws` a __shared__ int[32].
__device__ __forceinline__ int emb4_block_scan(int s, int* ws, int& total) {
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    const int x = camel::warp_inclusive_scan(s);
    __syncthreads();  // ws may still be read by a previous call
    if (lane == 31) ws[w] = x;
    __syncthreads();
    if (w == 0) ws[lane] = camel::warp_inclusive_scan(lane < nw ? ws[lane] : 0);
    __syncthreads();
    total = ws[nw - 1];
    return x - s + (w > 0 ? ws[w - 1] : 0);
}

// zero: V ints (counts), then (V rounded up to even) ints on: ⌈V / 1024⌉ u64 tile flags, then 2
// ints (barrier, blocks out); all zero at launch and left zero. rank: n ints (used past EMB4_K
// tokens a thread). start: V + 1 ints. ent: n int2. Blocks of 256, all resident.
extern "C" __global__ void __launch_bounds__(256)
    embedding_bwd4_group(const long long* __restrict__ idx, long long n, long long V, long long D,
                         int* __restrict__ zero, int* __restrict__ rank, int* __restrict__ start,
                         int2* __restrict__ ent, float* __restrict__ out, long long* err) {
    CAMEL_PDL_WAIT();
    __shared__ int ws[32];
    int* counts = zero;
    const long long tiles = (V + EMB4_TILE - 1) / EMB4_TILE;
    unsigned long long* flags = reinterpret_cast<unsigned long long*>(zero + ((V + 1) & ~1ll));
    int* bar = reinterpret_cast<int*>(flags + tiles);
    const int lane = threadIdx.x % 32;
    const long long G = gridDim.x, step = G * blockDim.x;
    const long long base0 = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31);  // warp-uniform
    int kr[EMB4_K], kk[EMB4_K];  // the thread's first EMB4_K rows (-1: none or bad) and ranks

    // 1. count
    int it = 0;
    for (long long base = base0; base < n; base += step, ++it) {
        const long long i = base + lane;
        const long long r = i < n ? idx[i] : 0;
        const bool ok = i < n && r >= 0 && r < V;
        if (i < n && !ok) record_index_error(err, CAMEL_OP_EMBEDDING_BWD, r, V);
        const unsigned peers = __match_any_sync(camel::FULL_MASK, ok ? r : -1ll);
        const int leader = __ffs(peers) - 1;
        int old = 0;
        if (ok && lane == leader) old = atomicAdd(&counts[r], __popc(peers));
        old = __shfl_sync(camel::FULL_MASK, old, leader);
        const int rk = old + __popc(peers & ((1u << lane) - 1));
        if (it < EMB4_K) {
#pragma unroll
            for (int q = 0; q < EMB4_K; ++q)  // a constant index: kr/kk stay in registers
                if (q == it) kr[q] = ok ? (int)r : -1, kk[q] = rk;
        } else if (ok) {
            rank[i] = rk;
        }
    }
    camel::grid_barrier(bar, (int)G);

    // 2. scan
    for (long long t = blockIdx.x; t < tiles; t += G) {
        const long long r0 = t * EMB4_TILE + 4 * threadIdx.x;
        int c[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) c[q] = r0 + q < V ? counts[r0 + q] : 0;
#pragma unroll
        for (int q = 0; q < 4; ++q)
            if (r0 + q < V) counts[r0 + q] = 0;  // left zero for the next launch
        int total;
        int run = emb4_block_scan(c[0] + c[1] + c[2] + c[3], ws, total);
        if (threadIdx.x == 0) atomicExch(&flags[t], (1ull << 32) | (unsigned)total);
        int s = 0;  // the totals of the tiles before t
        for (long long j = threadIdx.x; j < t; j += blockDim.x) {
            unsigned long long f;
            while (((f = camel::ld_acquire_gpu(&flags[j])) >> 32) == 0) __nanosleep(32);
            s += (int)(unsigned)f;
        }
        const int offset = camel::block_sum(s, ws);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            if (r0 + q < V) start[r0 + q] = run + offset;
            run += c[q];
        }
        if (t == tiles - 1 && threadIdx.x == 0) start[V] = offset + total;
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // long rows: the whole warp zeroes each
            unsigned m = __ballot_sync(camel::FULL_MASK, r0 + q < V && c[q] > EMB4_LONG);
            while (m) {
                const int src = __ffs(m) - 1;
                m &= m - 1;
                const long long r = t * EMB4_TILE + 4 * ((threadIdx.x & ~31) + src) + q;
                for (long long d = lane; d < D; d += 32) out[r * D + d] = 0.0f;
            }
        }
    }
    camel::grid_barrier(bar, 2 * (int)G);

    // 3. fill
    it = 0;
    for (long long base = base0; base < n; base += step, ++it) {
        const long long i = base + lane;
        int r = -1, rk = 0;
        if (it < EMB4_K) {
#pragma unroll
            for (int q = 0; q < EMB4_K; ++q)
                if (q == it) r = kr[q], rk = kk[q];
        } else if (i < n) {
            const long long ri = idx[i];
            if (ri >= 0 && ri < V) r = (int)ri, rk = rank[i];
        }
        if (i < n && r >= 0) {
            const int s0 = start[r], e0 = start[r + 1];
            ent[s0 + rk] = make_int2((int)i, (int)((unsigned)r | (e0 - s0 > EMB4_LONG ? EMB4_LONG_BIT : 0u)));
        }
    }
    // the last block out (every block is past both barriers) leaves the flags and barrier zero
    if (threadIdx.x == 0 && atomicAdd(bar + 1, 1) == (int)G - 1) {
        for (long long t = 0; t < tiles; ++t) flags[t] = 0;
        bar[0] = 0;
        bar[1] = 0;
    }
}

// W floats a lane (4: float4, needs D % 4 == 0 and 16-byte aligned g and out). Warps [0, zw)
// zero the empty rows; the rest are (chunk, block of 32·W columns). A warp's positions [B, E):
//   B = the chunk's first position if a group starts there or it is inside a long group, else
//       the first start in the chunk (none: nothing to do, a warp before owns the group);
//   E = the end of the last group starting in the chunk, or the chunk's end if that is long.
template <int W>
__device__ __forceinline__ void emb4_gather(const float* __restrict__ g, const int* __restrict__ start,
                                            const int2* __restrict__ ent, long long V, long long D, long long zw,
                                            float* __restrict__ out) {
    const long long wid = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (wid < zw) {
        const long long r = wid * 32 + lane;
        unsigned m = __ballot_sync(camel::FULL_MASK, r < V && start[r] == start[r + 1]);
        while (m) {
            const int src = __ffs(m) - 1;
            m &= m - 1;
            float* o = out + (wid * 32 + src) * D;
            if (W == 4) {
                for (long long d = lane; d < D / 4; d += 32) reinterpret_cast<float4*>(o)[d] = make_float4(0, 0, 0, 0);
            } else {
                for (long long d = lane; d < D; d += 32) o[d] = 0.0f;
            }
        }
        return;
    }
    const long long w = wid - zw;
    const long long nb = (D / W + 31) / 32;  // column blocks
    const long long c = w / nb, cb = w % nb;
    const int total = start[V];
    const int p0 = (int)(c * EMB_CHUNK);
    if (p0 >= total) return;  // chunks past the valid tokens (bad ones were skipped)
    const int pc = min(p0 + EMB_CHUNK, total);
    const int p = p0 + lane;
    const int my_e = p < pc ? ent[p].y : -1;  // row | long bit
    int prev = __shfl_up_sync(camel::FULL_MASK, my_e, 1);
    if (lane == 0) prev = p0 > 0 ? ent[p0 - 1].y : -1;
    const unsigned starts = __ballot_sync(camel::FULL_MASK, p < pc && my_e != prev);
    const int e_first = __shfl_sync(camel::FULL_MASK, my_e, 0);
    int B, E;
    if ((starts & 1u) || e_first < 0) {
        B = p0;
    } else if (starts) {
        B = p0 + __ffs(starts) - 1;
    } else {
        return;
    }
    if (starts) {
        const int e_last = __shfl_sync(camel::FULL_MASK, my_e, 31 - __clz(starts));
        E = e_last < 0 ? pc : start[e_last + 1];
    } else {
        E = pc;
    }
    const long long col = (cb * 32 + lane) * W;
    const bool act = col < D;
    float acc[W];
#pragma unroll
    for (int q = 0; q < W; ++q) acc[q] = 0.0f;
    int row = -1;  // the entry's .y of the group being summed (negative: long)
    auto flush = [&]() {
        if (act && row != -1) emb_put<W>(out + (long long)(row & 0x7fffffff) * D + col, acc, row >= 0);
    };
    for (int j0 = B; j0 < E; j0 += 32) {  // the positions in batches of 32, one entry a lane
        const int cnt = min(32, E - j0);
        const int2 be = lane < cnt ? ent[j0 + lane] : make_int2(0, -1);
        emb_sum_grouped<W>(g, D, col, act, cnt, be.x, be.y, acc, row, flush);
    }
    flush();
}

extern "C" __global__ void embedding_bwd4_gather_f32(const float* __restrict__ g, const int* __restrict__ start,
                                                     const int2* __restrict__ ent, long long V, long long D,
                                                     long long zw, float* __restrict__ out) {
    CAMEL_PDL_WAIT();
    emb4_gather<1>(g, start, ent, V, D, zw, out);
}
extern "C" __global__ void embedding_bwd4_gather_vec_f32(const float* __restrict__ g, const int* __restrict__ start,
                                                         const int2* __restrict__ ent, long long V, long long D,
                                                         long long zw, float* __restrict__ out) {
    CAMEL_PDL_WAIT();
    emb4_gather<4>(g, start, ent, V, D, zw, out);
}
