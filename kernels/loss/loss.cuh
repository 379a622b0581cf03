// Cross-entropy steps 3 and 4 share this row code; step 4 only swaps the per-row store for the
// fused mean (CeMean) and takes more rows a group.
// Long rows (> 16384 columns, a block of 512 per row): a scalar prologue of 0–3 elements reaches
// the row's first 16-byte boundary (rows of odd length start at every alignment), then float4
// loads, 4 of them issued before any is used (16 floats in flight per thread), folded into the
// running (m, s) with one rescale per 16 values (their max first, then 16 independent exps); a
// scalar tail; the block merges (m, s) with shuffles. Step 2 reads such rows with scalar loads,
// one in flight per thread, a data-dependent branch and exp per element.
// Short rows (≤ 16384): the softmax step 3 layout — the row in registers of a group of G threads
// (G < 32 packs several short rows per warp), a plain max then Σ exp, no online rescaling. Step 2
// gives a whole warp and five rounds of (m, s) shuffles to each row.
// Backward: with the saved (m, s) it is elementwise, dx = g·(exp(x − m)/s − onehot): long rows
// with the same prologue / 4-float4-unrolled body / tail (x and dx rows share their alignment
// when the two buffers do, which the launcher checks; else all scalar), short rows with the group
// layout (NV independent loads a thread, no reduction at all). The backward loads g whatever the
// target, so the row's loads do not wait behind the test of t[r].
#pragma once

#include "common/common.cuh"
#include "common/index_error.cuh"
#include "common/rows.cuh"

namespace {
// Fold N values into the running (m, s): one rescale for the group (its max first), then N
// independent exps. A NaN among them sets `nan` (fmaxf would skip it).
template <int N>
__device__ __forceinline__ void online_add_n(float& m, float& s, bool& nan, const float* v) {
    float cm = v[0];
#pragma unroll
    for (int k = 1; k < N; ++k) cm = fmaxf(cm, v[k]);
#pragma unroll
    for (int k = 0; k < N; ++k) nan |= v[k] != v[k];
    if (cm > m) {
        s *= expf(m - cm);  // m = −inf: s is 0 and stays 0
        m = cm;
    }
    if (m == -INFINITY) return;  // every value so far −inf: adds nothing
#pragma unroll
    for (int k = 0; k < N; ++k) s += expf(v[k] - m);
}

// Floats before the first 16-byte boundary of `p` (0–3), at most n.
__device__ __forceinline__ long long head_to_16(const float* p, long long n) {
    long long h = (long long)(((16u - ((unsigned)(unsigned long long)p & 15u)) & 15u) / 4u);
    return h < n ? h : n;
}

// Row r's loss from its (m, s) and its target tr, which the caller loaded with the row (so the
// load is not one more memory latency at the end); saves (m, s) as the row's stats; one thread
// calls. A target out of range records the deferred index error and gives NaN.
template <typename T>
__device__ __forceinline__ float ce_finish(const T* __restrict__ xr, long long tr, float* __restrict__ stats,
                                           long long r, long long cols, float m, float s, long long* err) {
    stats[2 * r] = m;
    stats[2 * r + 1] = s;
    if (tr < 0 || tr >= cols) {
        record_index_error(err, CAMEL_OP_CROSS_ENTROPY, tr, cols);
        return NAN;
    }
    return (m - camel::to_float(xr[tr])) + logf(s);
}

// Step 4's mean over rows, at the end of the forward kernel; every thread of every block calls
// it (no thread may have left), `v` being the loss of the row the thread finished, 0 if none.
// Each block stores its sum and a mark as one 64-bit word, words[block] (a single-copy-atomic
// store: the sum and the mark arrive together, so no fence or atomic orders them). The grid's
// last block (the highest index: in practice the last to start, so it seldom waits long) then
// takes the words in block order, each once it is marked, adds them as the block sums do,
// writes the mean and leaves every word zero for the next kernel (`words`: the device's
// counters, zero whenever no kernel runs). The order of every addition is fixed, so the mean
// has the same bits whichever block ends last.
// Only that one block waits, and only for blocks that wait for nothing, so any grid finishes:
// the others run to the end wherever the scheduler puts them (and the next kernel's blocks,
// which wait at their PDL wait, are let in only once every block of this one has started).

constexpr unsigned long long CE_MARKED = 1ull << 32;  // a word's mark: its low 32 bits are the sum

// Waits until the word at w is marked, leaves it zero (for the next kernel) and returns its sum.
__device__ __forceinline__ float ce_take(unsigned long long* w) {
    unsigned long long v;
    while (!((v = camel::ld_relaxed_gpu(w)) & CE_MARKED)) {
    }
    camel::st_relaxed_gpu(w, 0);
    return __uint_as_float((unsigned)v);
}

__device__ __forceinline__ void ce_mean_epilogue(float v, float* __restrict__ mean, unsigned long long* words,
                                                 long long rows) {
    __shared__ float scratch[32];
    const unsigned long long nb = (unsigned long long)gridDim.x * gridDim.y;
    const unsigned long long b = blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
    v = camel::block_sum(v, scratch);
    if (threadIdx.x == 0) camel::st_relaxed_gpu(words + b, CE_MARKED | __float_as_uint(v));
    if (b != nb - 1) return;  // uniform over the block
    float acc = 0.0f;
    for (unsigned long long i = threadIdx.x; i < nb; i += blockDim.x) acc += ce_take(words + i);
    acc = camel::block_sum(acc, scratch);
    if (threadIdx.x == 0) *mean = acc * (1.0f / (float)rows);
}

// What a forward kernel does with its rows' losses. kMean = false (steps 2 and 3): out[r] is row
// r's loss, stored as each row finishes. kMean = true (step 4): every thread of the block (none
// may have left) calls mean() once with the sum of the losses of the rows it finished (0 if
// none), and `out` is the one mean.
struct CeRowLoss {
    static constexpr bool kMean = false;
    __device__ static void mean(float, float*, unsigned long long*, long long) {}
};
struct CeMean {
    static constexpr bool kMean = true;
    __device__ static void mean(float acc, float* out, unsigned long long* words, long long rows) {
        ce_mean_epilogue(acc, out, words, rows);
    }
};
}  // namespace

constexpr int CE3_UNROLL = 4;  // float4 loads issued together per thread in the long-row loops

// Put: CeRowLoss (step 3: out[r]) or CeMean (step 4: the one mean).
template <class Put>
__device__ __forceinline__ void ce_fwd_long(const float* __restrict__ x, const long long* __restrict__ t,
                                            float* __restrict__ out, float* __restrict__ stats,
                                            unsigned long long* words, long long rows, long long cols,
                                            long long* err) {
    __shared__ float scratch[64];
    const long long r0 = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const bool live = r0 < rows;
    if (!Put::kMean && !live) return;  // whole block; step 4 keeps it for the epilogue
    const long long r = live ? r0 : 0;
    const float* xr = x + r * cols;
    const int tid = threadIdx.x, nt = blockDim.x;
    const long long tr = tid == 0 ? t[r] : 0;  // with the row's loads, for the end (thread 0's)
    float m = -INFINITY, s = 0.0f;
    bool nan = false;
    const long long head = live ? head_to_16(xr, cols) : 0;
    if (tid < head) camel::online_add(m, s, xr[tid]);
    const long long n4 = live ? (cols - head) / 4 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(xr + head);
    long long c = tid;
    for (; c + (long long)(CE3_UNROLL - 1) * nt < n4; c += (long long)CE3_UNROLL * nt) {
        float v[4 * CE3_UNROLL];
#pragma unroll
        for (int u = 0; u < CE3_UNROLL; ++u) {
            float4 q = x4[c + (long long)u * nt];
            v[4 * u] = q.x, v[4 * u + 1] = q.y, v[4 * u + 2] = q.z, v[4 * u + 3] = q.w;
        }
        online_add_n<4 * CE3_UNROLL>(m, s, nan, v);
    }
    for (; c < n4; c += nt) {
        float4 q = x4[c];
        float v[4] = {q.x, q.y, q.z, q.w};
        online_add_n<4>(m, s, nan, v);
    }
    for (long long k = head + 4 * n4 + tid; live && k < cols; k += nt) camel::online_add(m, s, xr[k]);
    if (nan) s = NAN;
    camel::group_online<false>(m, s, scratch);
    const float l = live && tid == 0 ? ce_finish(xr, tr, stats, r, cols, m, s, err) : 0.0f;
    if (Put::kMean) {
        Put::mean(l, out, words, rows);
    } else if (tid == 0) {
        out[r] = l;
    }
}

// `vec`: x and dx rows share their 16-byte alignment (the launcher checks x ≡ dx mod 16), so one
// prologue aligns both; else every element goes the scalar way.
// MEAN (step 4): g is the mean's one upstream gradient, so every row's is g[0] / rows.
template <bool MEAN>
__device__ __forceinline__ void ce_bwd_long(const float* __restrict__ x, const long long* __restrict__ t,
                                            const float* __restrict__ stats, const float* __restrict__ g,
                                            float* __restrict__ dx, long long rows, long long cols, long long* err,
                                            int vec) {
    const long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* dr = dx + r * cols;
    const int tid = threadIdx.x, nt = blockDim.x;
    const long long tr = t[r];
    const bool bad = tr < 0 || tr >= cols;
    const float m = stats[2 * r], inv = 1.0f / stats[2 * r + 1];
    // g is loaded whatever the target (not after the test of t[r]): two loads in flight, not in a row
    const float g0 = MEAN ? g[0] * (1.0f / (float)rows) : g[r];
    const float gr = bad ? NAN : g0;
    const long long head = vec ? head_to_16(xr, cols) : cols;
    for (long long k = tid; k < head; k += nt) dr[k] = gr * (expf(xr[k] - m) * inv - (k == tr ? 1.0f : 0.0f));
    const long long n4 = (cols - head) / 4;
    const float4* x4 = reinterpret_cast<const float4*>(xr + head);
    float4* d4 = reinterpret_cast<float4*>(dr + head);
    auto grad4 = [&](float4 q, long long c4) {  // c4: index of the float4 in the aligned body
        const long long c0 = head + 4 * c4;
        return make_float4(gr * (expf(q.x - m) * inv - (c0 == tr ? 1.0f : 0.0f)),
                           gr * (expf(q.y - m) * inv - (c0 + 1 == tr ? 1.0f : 0.0f)),
                           gr * (expf(q.z - m) * inv - (c0 + 2 == tr ? 1.0f : 0.0f)),
                           gr * (expf(q.w - m) * inv - (c0 + 3 == tr ? 1.0f : 0.0f)));
    };
    long long c = tid;
    for (; c + (long long)(CE3_UNROLL - 1) * nt < n4; c += (long long)CE3_UNROLL * nt) {
        float4 q[CE3_UNROLL];
#pragma unroll
        for (int u = 0; u < CE3_UNROLL; ++u) q[u] = x4[c + (long long)u * nt];
#pragma unroll
        for (int u = 0; u < CE3_UNROLL; ++u) d4[c + (long long)u * nt] = grad4(q[u], c + (long long)u * nt);
    }
    for (; c < n4; c += nt) d4[c] = grad4(x4[c], c);
    for (long long k = head + 4 * n4 + tid; k < cols; k += nt)
        dr[k] = gr * (expf(xr[k] - m) * inv - (k == tr ? 1.0f : 0.0f));
    if (bad && tid == 0) record_index_error(err, CAMEL_OP_CROSS_ENTROPY, tr, cols);
}

// Rows ≤ 16384 columns: the softmax step 3 layout (kernels/softmax/, `softmax3_shape` picks
// (G, VEC, NV)): a group of G threads per row, NV loads of VEC floats per thread.
// Put: CeRowLoss (step 3: out[r]) or CeMean (step 4: the one mean). R: rows a group takes (G ≤ 32
// only), all R loaded before any is reduced; the block covers R · 256/G consecutive rows, the
// k-th 256/G of them with row k of each group, so each load instruction of a warp stays
// contiguous. Step 3 is R = 1; step 4 takes R > 1 where the registers allow (ce4_rows), so the
// grid has R times fewer block sums for the mean's last block to take.
// T: the logits' element type (float, __half, __nv_bfloat16), widened to f32 as loaded; the
// losses and statistics are f32 whatever T.
template <int G, int VEC, int NV, class Put, int R = 1, typename T = float>
__device__ __forceinline__ void ce3_fwd_row(const T* __restrict__ x, const long long* __restrict__ t,
                                            float* __restrict__ out, float* __restrict__ stats,
                                            unsigned long long* words, long long rows, long long cols,
                                            long long* err) {
    static_assert(R == 1 || G <= 32, "several rows a group only where a group is part of a warp");
    __shared__ float scratch[32];
    constexpr int PER_BLOCK = G <= 32 ? 256 / G : 1;
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const int lane = G <= 32 ? threadIdx.x % G : threadIdx.x;
    long long r[R], tr[R];
    bool live[R];
    float v[R][NV * VEC];
#pragma unroll
    for (int k = 0; k < R; ++k) {
        r[k] = G <= 32 ? (b * R + k) * PER_BLOCK + threadIdx.x / G : b;
        // A group past the last row still takes part in its warp's shuffles (full mask), with no loads.
        live[k] = r[k] < rows;
    }
    if (!Put::kMean && G > 32 && !live[0]) return;  // the whole block: uniform (not for step 4)
#pragma unroll
    for (int k = 0; k < R; ++k) {
        const T* xr = x + (live[k] ? r[k] : 0) * cols;
        tr[k] = live[k] ? t[r[k]] : 0;  // with the row's loads, for the end
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const long long c = (long long)(i * G + lane) * VEC;
            if (live[k] && c < cols) {
                camel::ldv<false, VEC>(xr + c, v[k] + VEC * i);
            } else {
#pragma unroll
                for (int q = 0; q < VEC; ++q) v[k][VEC * i + q] = -INFINITY;
            }
        }
    }
    float acc = 0.0f;  // step 4: the losses of this thread's rows
#pragma unroll
    for (int k = 0; k < R; ++k) {
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < NV * VEC; ++i) mx = fmaxf(mx, v[k][i]);  // NaN reaches the sum instead
        mx = camel::g_reduce<G>(1, mx, scratch);
        const float mref = mx == -INFINITY ? 0.0f : mx;  // an all −inf row: Σ = 0, loss NaN as step 2
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < NV * VEC; ++i) s += expf(v[k][i] - mref);  // padding is −inf: adds 0
        s = camel::g_reduce<G>(0, s, scratch);
        if (live[k] && lane == 0) {
            const float l = ce_finish(x + r[k] * cols, tr[k], stats, r[k], cols, mx, s, err);
            if (Put::kMean) {
                acc += l;
            } else {
                out[r[k]] = l;
            }
        }
    }
    if (Put::kMean) Put::mean(acc, out, words, rows);
}

// MEAN (step 4): g is the mean's one upstream gradient, so every row's is g[0] / rows.
// T: the element type of the logits and of dx (widened as loaded, rounded once as stored); g and
// the statistics are f32.
template <int G, int VEC, int NV, bool MEAN, typename T = float>
__device__ __forceinline__ void ce3_bwd_row(const T* __restrict__ x, const long long* __restrict__ t,
                                            const float* __restrict__ stats, const float* __restrict__ g,
                                            T* __restrict__ dx, long long rows, long long cols, long long* err) {
    constexpr int PER_BLOCK = G <= 32 ? 256 / G : 1;
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const long long r = G <= 32 ? b * PER_BLOCK + threadIdx.x / G : b;
    const int lane = G <= 32 ? threadIdx.x % G : threadIdx.x;
    if (r >= rows) return;  // no reduction here: a finished group may leave
    const T* xr = x + r * cols;
    T* dr = dx + r * cols;
    const long long tr = t[r];
    const bool bad = tr < 0 || tr >= cols;
    const float m = stats[2 * r], inv = 1.0f / stats[2 * r + 1];
    // g is loaded whatever the target (not after the test of t[r]): two loads in flight, not in a row
    const float g0 = MEAN ? g[0] * (1.0f / (float)rows) : g[r];
    const float gr = bad ? NAN : g0;
    float v[NV * VEC];
#pragma unroll
    for (int i = 0; i < NV; ++i) {  // every load first: NV independent loads in flight
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < cols) {
            camel::ldv<false, VEC>(xr + c, v + VEC * i);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[VEC * i + k] = -INFINITY;  // padding, never stored
        }
    }
    // Every gradient first, then the stores in one burst (as softmax3_bwd_row: with the exp
    // inside each store's `if` the compiler branched around every element).
#pragma unroll
    for (int i = 0; i < NV; ++i) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const long long c = (long long)(i * G + lane) * VEC + k;
            v[VEC * i + k] = gr * (expf(v[VEC * i + k] - m) * inv - (c == tr ? 1.0f : 0.0f));
        }
    }
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < cols) camel::stv<false, VEC>(dr + c, v + VEC * i);
    }
    if (bad && lane == 0) record_index_error(err, CAMEL_OP_CROSS_ENTROPY, tr, cols);
}

// Rows a group takes in step 4's forward: 2 where a row is at most 16 floats a thread (so two
// fit in 32 registers), else 1: half as many block sums for the mean's last block to take. The
// launcher's `ce4_rows` (crates/camel-cuda/src/kernels/loss.rs) is the same rule: it sizes the
// grid.
__host__ __device__ constexpr int ce4_rows(int g, int vec, int nv) { return g <= 32 && nv * vec <= 16 ? 2 : 1; }

// The entry of steps 3 and 4 with programmatic dependent launch for short rows (G ≤ 16: at most
// 16 rows of < 128 vector elements a block), as softmax step 3's (softmax/softmax.cuh,
// common/pdl.cuh): thread 0 asks L2 for the block's logits (backward: and their targets and
// statistics) before the PDL wait, and the kernel triggers its successor right after it, so the
// next kernel's first blocks fetch their rows while this one's last blocks finish. R: rows a
// group (the forward's ce4_rows). Rows of 128 floats or more keep the plain wait.
template <int G, int R, typename T>
__device__ __forceinline__ void ce3_prefetch(const T* x, const long long* t, const float* stats, long long rows,
                                             long long cols) {
    if (G > 16 || threadIdx.x != 0) return;
    constexpr long long PER_BLOCK = 256 / G * R;
    const long long r0 = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * PER_BLOCK;
    camel::l2_prefetch_rows(x, r0, PER_BLOCK, rows, cols);
    if (t != nullptr && r0 < rows) {
        const long long n = rows - r0 < PER_BLOCK ? rows - r0 : PER_BLOCK;
        camel::l2_prefetch(t + r0, 8 * n);
        camel::l2_prefetch(stats + 2 * r0, 8 * n);
    }
}

// Kernel names: ce{3,4}_fwd_g{G}_v{VEC}_n{NV}_f32 and ce{3,4}_bwd_g{G}_v{VEC}_n{NV}_f32 (the
// launchers build the same names); the shapes are softmax step 3's (CAMEL_ROW3_SHAPES, rows.cuh).
