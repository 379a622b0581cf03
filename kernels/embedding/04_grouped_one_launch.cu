// Embedding step 4: step 3 without its zero pass and atomics on ordinary rows, and its
// preprocessing in one launch. Step 3 zeroes the rows whose group crosses a 32-token chunk and
// then read-modify-writes them with atomics, and spends a memset and 4 launches before its gather.
// Here
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

#include "common/index_error.cuh"
#include "common/rows.cuh"  // grid_barrier
#include "embedding/embedding.cuh"

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
