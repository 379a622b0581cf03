// Softmax / log-softmax along the last dim, step 1: one block per row, three passes over the
// row (max, sum of exp, write), combined with the warp-shuffle block reductions of common.cuh.
// The memory-bound issue adds online-softmax and warp-per-row steps.
#include "common.cuh"

extern "C" __global__ void softmax_last_f32(const float* __restrict__ x, float* __restrict__ y,
                                            long long rows, long long cols, int log_out) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];  // one slot per warp for camel::block_max/sum
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float mx = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
    mx = camel::block_max(mx, scratch);
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - mx);
    s = camel::block_sum(s, scratch);
    if (log_out) {
        float lse = logf(s);
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] - mx - lse;
    } else {
        float inv = 1.0f / s;
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - mx) * inv;
    }
}

// ---------------------------------------------------------------------------------------------
// Step 2 (memory-bound issue): one pass to read the row, one to write it. A warp owns a row
// when it is short (cols ≤ 1024: 8 rows per block of 256, no __syncthreads), the whole block
// when it is long. The max and the sum of exponentials come from one *online* pass (a running
// (m, s) that rescales s when m grows, merged across the group with shuffles), so the row is
// read from DRAM once; the write pass re-reads it from L1/L2. float4 loads and stores when
// cols % 4 == 0. Figures: docs/benchmarks.md ("Memory-bound kernels").
// Backward: dx = y ⊙ (g − Σ g⊙y) (softmax) or g − exp(y) Σ g (log-softmax), one fused kernel
// (step 1 of the backward was four composed kernels: mul, sum, sub, mul).
#include "rows.cuh"

template <bool WARP, bool VEC>
__device__ __forceinline__ void softmax_fwd_row(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                long long cols, int log_out) {
    __shared__ float scratch[64];
    long long r = camel::group_row<WARP>();
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m, s;
    camel::row_online<WARP, VEC>(xr, cols, m, s);
    camel::group_online<WARP>(m, s, scratch);
    const int tid = camel::group_tid<WARP>(), gs = camel::group_size<WARP>();
    float lse = logf(s), inv = 1.0f / s;
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long c = tid; c < cols / 4; c += gs) {
            float4 v = x4[c], o;
            if (log_out) {
                o = make_float4(v.x - m - lse, v.y - m - lse, v.z - m - lse, v.w - m - lse);
            } else {
                o = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
            }
            y4[c] = o;
        }
    } else {
        for (long long c = tid; c < cols; c += gs) {
            float v = xr[c];
            yr[c] = log_out ? v - m - lse : expf(v - m) * inv;
        }
    }
}

template <bool WARP, bool VEC>
__device__ __forceinline__ void softmax_bwd_row(const float* __restrict__ y, const float* __restrict__ g,
                                                float* __restrict__ dx, long long rows, long long cols, int log_out) {
    __shared__ float scratch[32];
    long long r = camel::group_row<WARP>();
    if (r >= rows) return;
    const float* yr = y + r * cols;
    const float* gr = g + r * cols;
    float* dr = dx + r * cols;
    const int tid = camel::group_tid<WARP>(), gs = camel::group_size<WARP>();
    float dot = 0.0f;  // Σ g·y (softmax) or Σ g (log-softmax)
    if (VEC) {
        const float4* y4 = reinterpret_cast<const float4*>(yr);
        const float4* g4 = reinterpret_cast<const float4*>(gr);
        for (long long c = tid; c < cols / 4; c += gs) {
            float4 a = g4[c];
            if (log_out) {
                dot += (a.x + a.y) + (a.z + a.w);
            } else {
                float4 b = y4[c];
                dot += (a.x * b.x + a.y * b.y) + (a.z * b.z + a.w * b.w);
            }
        }
    } else {
        for (long long c = tid; c < cols; c += gs) dot += log_out ? gr[c] : gr[c] * yr[c];
    }
    dot = camel::group_sum<WARP>(dot, scratch);
    if (VEC) {
        const float4* y4 = reinterpret_cast<const float4*>(yr);
        const float4* g4 = reinterpret_cast<const float4*>(gr);
        float4* d4 = reinterpret_cast<float4*>(dr);
        for (long long c = tid; c < cols / 4; c += gs) {
            float4 a = g4[c], b = y4[c], o;
            if (log_out) {
                o = make_float4(a.x - expf(b.x) * dot, a.y - expf(b.y) * dot, a.z - expf(b.z) * dot,
                                a.w - expf(b.w) * dot);
            } else {
                o = make_float4(b.x * (a.x - dot), b.y * (a.y - dot), b.z * (a.z - dot), b.w * (a.w - dot));
            }
            d4[c] = o;
        }
    } else {
        for (long long c = tid; c < cols; c += gs) {
            float a = gr[c], b = yr[c];
            dr[c] = log_out ? a - expf(b) * dot : b * (a - dot);
        }
    }
}

#define SOFTMAX_VARIANT(suffix, WARP, VEC)                                                                 \
    extern "C" __global__ void softmax_fwd_##suffix(const float* __restrict__ x, float* __restrict__ y,    \
                                                    long long rows, long long cols, int log_out) {         \
        CAMEL_PDL_WAIT();                                                                                  \
        softmax_fwd_row<WARP, VEC>(x, y, rows, cols, log_out);                                             \
    }                                                                                                      \
    extern "C" __global__ void softmax_bwd_##suffix(const float* __restrict__ y, const float* __restrict__ g, \
                                                    float* __restrict__ dx, long long rows, long long cols,  \
                                                    int log_out) {                                          \
        CAMEL_PDL_WAIT();                                                                                   \
        softmax_bwd_row<WARP, VEC>(y, g, dx, rows, cols, log_out);                                         \
    }

SOFTMAX_VARIANT(warp_f32, true, false)
SOFTMAX_VARIANT(warp_vec_f32, true, true)
SOFTMAX_VARIANT(block_f32, false, false)
SOFTMAX_VARIANT(block_vec_f32, false, true)

// Backward, step 1: one block per row, scalar loads (the reference point of the ladder).
extern "C" __global__ void softmax_bwd_f32(const float* __restrict__ y, const float* __restrict__ g,
                                           float* __restrict__ dx, long long rows, long long cols, int log_out) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];
    long long r = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (r >= rows) return;
    const float* yr = y + r * cols;
    const float* gr = g + r * cols;
    float* dr = dx + r * cols;
    float dot = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) dot += log_out ? gr[c] : gr[c] * yr[c];
    dot = camel::block_sum(dot, scratch);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x)
        dr[c] = log_out ? gr[c] - expf(yr[c]) * dot : yr[c] * (gr[c] - dot);
}

// ---------------------------------------------------------------------------------------------
// Step 3 (memory-bound issue): the row lives in registers. Step 2 read the row once for the
// online (max, Σ exp) and once more (from L1/L2) for the write, paid an exp per element in the
// online pass and another in the write, and gave a whole warp to every row — at 65 columns
// two thirds of the lanes idled through five shuffle rounds of (m, s) merges (860 GB/s against
// PyTorch's 1611 on the H200). Step 3 loads the row from global memory exactly once into
// registers (NV loads of VEC floats per thread, unrolled, a compile-time capacity), then takes
// the max, computes each exp once, sums, and stores from the registers: a plain max, no online
// rescaling. The row belongs to a group of G threads: G ≤ 32 lanes of a warp (short rows pack
// 32/G rows per warp: 65 columns → groups of 16 lanes, 2 rows per warp, shuffles limited to the
// group's width), or the whole block (G = blockDim.x ∈ {128 … 1024}, one shared-memory hop) for
// rows longer than 1024. Rows too long for the registers (> 16384 columns) stay on step 2; the
// launcher (`softmax3_f32`) picks (G, VEC, NV).
// Measured (H200, copy 4239 GB/s; bench_memory, softmax forward, GB/s step 2 → step 3, PyTorch):
// 16384×1024 2589 → 3510 (2905), 4096×4096 2589 → 3487 (2145), 65536×65 850 → 2096 (1455);
// log_softmax alike (3438, 3438, 2092). Step 3 is the default (CAMEL_SOFTMAX=3).
// At 65536×65 the forward is held by its arithmetic, not by where its bytes are
// (bench/tma_lab.cu, H100): the same loads and stores with two group reductions between them
// and nothing else take 12.5 µs (90 % of copy), the forward took 13.8. Staging a block's rows in
// shared memory (a TMA bulk copy, or float4) was slower, 69–76 %, as were other group widths and
// more rows a group. What the arithmetic lost was its shape (bench/exp_lab.cu, H100, the same
// bits throughout): with NV = 8 slots for 5 real ones, a per-lane test kept the padding's exps
// out and put each exp in a branch of its own, one after another (13.5 µs); an exact NV of 5
// (rows.cuh's shapes) runs them unconditionally, side by side, and a kernel each for softmax
// and log-softmax keeps one body: 12.6 µs softmax, 12.5 log-softmax (89–90 % of copy).
// Element j of a thread's registers is column (j·G + lane)·VEC (+0..3): each load instruction of
// a group is contiguous, so a warp's loads coalesce.

// camel::g_reduce<G> (rows.cuh): the sum or max over a group of G threads.

// CS: streaming loads of x and stores of y (step 4 of the forward; step 3 is CS = false).
// LOG: log-softmax, else softmax (a kernel each: see the kernel names below).
template <int G, int VEC, int NV, bool CS, bool LOG>
__device__ __forceinline__ void softmax3_row(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                             long long cols) {
    __shared__ float scratch[32];
    constexpr int PER_BLOCK = G <= 32 ? 256 / G : 1;  // rows per block (blocks of 256 for G ≤ 32)
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const long long r = G <= 32 ? b * PER_BLOCK + threadIdx.x / G : b;
    const int lane = G <= 32 ? threadIdx.x % G : threadIdx.x;
    // A group past the last row still takes part in its warp's shuffles (full mask), with no loads.
    const bool live = r < rows;
    if (G > 32 && !live) return;  // the whole block: uniform
    const float* xr = x + (live ? r : 0) * cols;
    float* yr = y + (live ? r : 0) * cols;
    float v[NV * VEC];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (live && c < cols) {
            if (VEC == 4) {
                float4 q = camel::ld4<CS>(xr + c);
                v[4 * i] = q.x;
                v[4 * i + 1] = q.y;
                v[4 * i + 2] = q.z;
                v[4 * i + 3] = q.w;
            } else {
                v[i] = camel::ld1<CS>(xr + c);
            }
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[VEC * i + k] = -INFINITY;
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, v[VEC * i + k]);  // NaN reaches the sum instead
    }
    mx = camel::g_reduce<G>(1, mx, scratch);
    const float mref = mx == -INFINITY ? 0.0f : mx;  // an all −inf row: exp(−inf) = 0, then 0/0
    // Every exp unconditional, side by side (the padding is −inf: exp adds 0). Short rows have
    // an exact NV (rows.cuh), so only the last slot holds padding; when a per-lane test skipped
    // the padding's exps of 8 slots, the compiler put each exp in a branch of its own and they
    // ran one after another (bench/exp_lab.cu).
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV * VEC; ++i) {
        const float e = expf(v[i] - mref);
        s += e;
        if (!LOG) v[i] = e;
    }
    s = camel::g_reduce<G>(0, s, scratch);
    if (!live) return;
    // log: (x − max) − log Σ, in that order: folding max + log Σ first rounds at the ulp of the
    // max (≈ 1e-3 for logits of 1e4) — the CPU-compared ±1e4 tests caught it.
    // 1 / Σ by camel::rcp_sum (rows.cuh): the same bits as 1.0f / s for a sum ≥ 1, without the
    // slow-path test and call.
    const float lse = LOG ? logf(s) : 0.0f, inv = LOG ? 0.0f : camel::rcp_sum(s);
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < cols) {
            float o[VEC];
#pragma unroll
            for (int k = 0; k < VEC; ++k) o[k] = LOG ? (v[VEC * i + k] - mref) - lse : v[VEC * i + k] * inv;
            if (VEC == 4) {
                camel::st4<CS>(yr + c, make_float4(o[0], o[1 % VEC], o[2 % VEC], o[3 % VEC]));
            } else {
                camel::st1<CS>(yr + c, o[0]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Step 3 of the backward (`CAMEL_SOFTMAX=3`, the default): the rows of y and g live in
// registers, with the forward step 3's layout and shapes. Step 2's backward reads y and g once
// for Σ g·y (Σ g for log-softmax) and once more (from L1/L2) for the write, and gives a whole
// warp to every short row (65 columns: two thirds of the lanes idle through the shuffles);
// on the H200 it moved 2522 GB/s at 16384×1024 (59 % of copy), 3053 at 4096×4096, 1918 at
// 65536×65. Here a group of G threads (G ≤ 32: lanes of a warp, 32/G rows per warp; more: the
// whole block) loads its row of y and g from global memory exactly once (NV loads of VEC
// floats each, unrolled and independent), reduces the dot product over the group, and writes
// dx = y ⊙ (g − Σ g⊙y) (softmax) or g − exp(y)·Σ g (log-softmax) from the registers. Same
// (G, VEC, NV) as the forward for the same row (`softmax3_shape`), twice the registers (y and g:
// at most 64 floats a thread). Rows past 16384 columns stay on step 2.
// Measured (H100, copy 2988 GB/s, bench_memory; softmax_bwd GB/s step 2 → step 3, % of copy):
// 16384×1024 1807 → 2752 (92 %), 4096² 1933 → 2734 (91 %), 65536×65 1635 → 2165 (72 %; 94 % of a
// same-size copy); log_softmax_bwd 91–93 % and 71 %; 1.13–2.24× PyTorch.
// Every output is computed before the first store (bench/tma_lab.cu, H100, 65536×65): with the
// log-softmax's exp inside each store's `if` the compiler branched around every element and the
// stores left one exp apart: 19.2 → 17.9 µs (88 → 94.5 % of copy), softmax 17.9 → 17.8.
template <int G, int VEC, int NV>
__device__ __forceinline__ void softmax3_bwd_row(const float* __restrict__ y, const float* __restrict__ g,
                                                 float* __restrict__ dx, long long rows, long long cols,
                                                 int log_out) {
    __shared__ float scratch[32];
    constexpr int PER_BLOCK = G <= 32 ? 256 / G : 1;
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const long long r = G <= 32 ? b * PER_BLOCK + threadIdx.x / G : b;
    const int lane = G <= 32 ? threadIdx.x % G : threadIdx.x;
    // A group past the last row still takes part in its warp's shuffles (full mask), with no loads.
    const bool live = r < rows;
    if (G > 32 && !live) return;  // the whole block: uniform
    const long long base = (live ? r : 0) * cols;
    float yv[NV * VEC], gv[NV * VEC];
    float dot = 0.0f;  // Σ g·y (softmax) or Σ g (log-softmax) over this thread's columns
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (live && c < cols) {
            if (VEC == 4) {
                float4 p = *reinterpret_cast<const float4*>(y + base + c);
                float4 q = *reinterpret_cast<const float4*>(g + base + c);
                yv[4 * i] = p.x, yv[4 * i + 1] = p.y, yv[4 * i + 2] = p.z, yv[4 * i + 3] = p.w;
                gv[4 * i] = q.x, gv[4 * i + 1] = q.y, gv[4 * i + 2] = q.z, gv[4 * i + 3] = q.w;
            } else {
                yv[i] = y[base + c];
                gv[i] = g[base + c];
            }
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) yv[VEC * i + k] = gv[VEC * i + k] = 0.0f;  // adds nothing
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) dot += log_out ? gv[VEC * i + k] : gv[VEC * i + k] * yv[VEC * i + k];
    }
    dot = camel::g_reduce<G>(0, dot, scratch);
    if (!live) return;
    // Every output first (padding included: harmless, never stored), then the stores in one
    // burst. Computed inside each store's `if`, the log-softmax's exp made the compiler branch
    // around every element, and the stores trickled out one exp apart.
#pragma unroll
    for (int i = 0; i < NV * VEC; ++i) gv[i] = log_out ? gv[i] - expf(yv[i]) * dot : yv[i] * (gv[i] - dot);
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < cols) {
            if (VEC == 4) {
                *reinterpret_cast<float4*>(dx + base + c) =
                    make_float4(gv[VEC * i], gv[VEC * i + 1 % VEC], gv[VEC * i + 2 % VEC], gv[VEC * i + 3 % VEC]);
            } else {
                dx[base + c] = gv[i];
            }
        }
    }
}

// Step 4 of the forward (`CAMEL_SOFTMAX=4`, opt-in: it measured slower): step 3 with the
// cache-streaming hints on the row's load and store (ld.global.cs / st.global.cs: evict first).
// Each element of x is read once and each of y written once, so neither needs to stay in L2;
// marking them evict-first leaves L2 to the lines still being filled and drained, which may
// smooth the DRAM stream at sizes that exceed L2 (64 MB at 16384×1024 against the H100's
// 50 MB). Same arithmetic and shapes as step 3 (the same results bit for bit). An A/B
// experiment, kept selectable as the evidence: measured (H100, streamed, bench_memory,
// docs/data/bench_memory_h100_batch.txt) step 4 against step 3, softmax 16384×1024 47.3 / 45.7 µs,
// 4096×4096 46.2 / 45.7, 65536×65 15.0 / 12.5 (log-softmax alike), so the hint does not pay here,
// where LayerNorm's forward (the same hint, its step 4) gained.

// Step 3's entry on Hopper (kernels/pdl.cuh): thread 0 asks L2 for the block's rows of a (and
// b, if not null) before the PDL wait, and the kernel triggers its successor right after it, so
// the next kernel's first blocks fetch their rows while this one's last blocks finish. At
// 65536×65 (bench/pdl_lab.cu, same call): backward 18.8 → 17.5 µs (90 → 96.5 % of copy),
// log-softmax backward 19.2 → 18.3, forward 13.6 → 13.3. The forward does it only for short rows
// (G ≤ 16, at most 16 rows of < 128 vector elements a block): at 16384×1024 (8 rows, 32 KiB a
// block) it lost 0.8 µs in bench_memory (46.0 → 46.8), as the LayerNorm forward (24 KiB a
// block) did in the lab. Step 4 (the A/B experiment) keeps the plain wait.
template <int G>
__device__ __forceinline__ void softmax3_prefetch(const float* a, const float* b, long long rows, long long cols) {
    if (threadIdx.x != 0) return;
    constexpr long long PER_BLOCK = G <= 32 ? 256 / G : 1;
    const long long r0 = (blockIdx.x + (long long)blockIdx.y * gridDim.x) * PER_BLOCK;
    camel::l2_prefetch_rows(a, r0, PER_BLOCK, rows, cols);
    if (b != nullptr) camel::l2_prefetch_rows(b, r0, PER_BLOCK, rows, cols);
}

// Kernel names: softmax3_g{G}_v{VEC}_n{NV}_f32 and log_softmax3_… (forward),
// softmax3_bwd_g{G}_v{VEC}_n{NV}_f32 (backward, both: the argument log_out picks) and
// softmax4_… / log_softmax4_… (forward, step 4); the launchers build the same names. One
// SOFTMAX3 line instantiates them all, so every shape the forward can pick exists for the
// backward and step 4 too.
// Softmax and log-softmax are separate forward kernels, each one body: with both bodies in one
// kernel behind the argument (as before), the same row code ran 0.3–0.4 µs slower at 65536×65,
// softmax 12.7 → 13.1 µs, log-softmax 12.6 → 12.8 (bench/exp_lab.cu, H100: the row code of the
// lab and of the library alike, 24 registers against 20–23; the cause is not established).
#define SOFTMAX3_FWD(NAME, G, VEC, NV, CS, LOG)                                                           \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G)                                       \
        NAME##_g##G##_v##VEC##_n##NV##_f32(const float* __restrict__ x, float* __restrict__ y,             \
                                            long long rows, long long cols) {                             \
        if (!CS && G <= 16) softmax3_prefetch<G>(x, nullptr, rows, cols);                                 \
        CAMEL_PDL_WAIT();                                                                                 \
        if (!CS && G <= 16) CAMEL_PDL_TRIGGER();                                                          \
        softmax3_row<G, VEC, NV, CS, LOG>(x, y, rows, cols);                                              \
    }
#define SOFTMAX3(G, VEC, NV)                                                                              \
    SOFTMAX3_FWD(softmax3, G, VEC, NV, false, false)                                                      \
    SOFTMAX3_FWD(log_softmax3, G, VEC, NV, false, true)                                                   \
    SOFTMAX3_FWD(softmax4, G, VEC, NV, true, false)                                                       \
    SOFTMAX3_FWD(log_softmax4, G, VEC, NV, true, true)                                                    \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G)                                       \
        softmax3_bwd_g##G##_v##VEC##_n##NV##_f32(const float* __restrict__ y, const float* __restrict__ g,  \
                                                  float* __restrict__ dx, long long rows, long long cols,  \
                                                  int log_out) {                                          \
        softmax3_prefetch<G>(y, g, rows, cols);                                                           \
        CAMEL_PDL_WAIT();                                                                                 \
        CAMEL_PDL_TRIGGER();                                                                              \
        softmax3_bwd_row<G, VEC, NV>(y, g, dx, rows, cols, log_out);                                      \
    }
// Every shape softmax3_shape can pick (rows.cuh lists them).
CAMEL_ROW3_SHAPES(SOFTMAX3)
