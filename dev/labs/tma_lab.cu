// Short-row staging lab: can a softmax over short rows (65536×65) move its bytes as a copy does
// if each block stages a contiguous chunk of rows in shared memory instead of loading its rows
// element by element into registers? And if not, what holds softmax step 3 there? Not part of
// the library.
//
// Versions (entered as the library's step 3 on Hopper: L2 prefetch, PDL wait, trigger; compared
// with the library's step 3 kernels):
//   TMA          one bulk copy a block into shared memory (cp.async.bulk, mbarrier), a group of G
//                lanes a row there, one bulk store back; 32 / 64 / 128 rows a block
//   float4       the same staging through the block's float4 loads and stores
//   bulk copy    TMA load and store of the same bytes, nothing computed (the ceiling)
//   step 3 shape step 3's access pattern with 0 / 1 / 2 group reductions and no arithmetic
//   G 8 / G 32   other group widths; two and four rows a group
//   own max      exps from each thread's own max, merged once
//   exact slots  the padding's exps skipped, only the log Σ or 1 / Σ the output uses computed
//   bwd          the backward with every output computed before its stores, against each store
//                computing its own inside an `if`
//
// Timing: lab_common.cuh's streamed method, inputs rotated over 256 MiB. What it found and where
// it went: dev/labs/README.md; raw output docs/data/tma_lab_h100.txt.
//
// Build and run on the GPU host (sm_90):  OUT=dir bash dev/labs/tma_lab.sh
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "../kernels/softmax/01_block_per_row.cu"
#include "../kernels/softmax/02_online_warp.cu"
#include "../kernels/softmax/03_warp_registers.cu"
#include "../kernels/softmax/04_streaming.cu"
#include "lab_common.cuh"

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// One-shot mbarrier: thread 0 arms it for `bytes`, the bulk copies complete it, everyone waits on
// phase 0.
__device__ __forceinline__ void mbar_init(unsigned long long* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_wait0(unsigned long long* bar) {
    unsigned ok = 0;
    while (!ok) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
            : "=r"(ok)
            : "r"(smem_addr(bar))
            : "memory");
    }
}
// global → shared, `bytes` a multiple of 16, both addresses 16-byte aligned
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}
// shared → global; the block must not exit before the shared memory has been read
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_addr(src)),
                 "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// Entry "mode 5": prefetch the chunk(s) into L2, PDL wait, trigger the successor.
__device__ __forceinline__ void enter(const float* a, const float* b, long long bytes) {
    if (threadIdx.x == 0) {
        camel::l2_prefetch(a, bytes);
        if (b) camel::l2_prefetch(b, bytes);
    }
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
}

// Copies n floats (16-byte aligned, n a multiple of 4) with the block's float4s: global → shared
// or shared → global.
__device__ __forceinline__ void coop_copy(float* dst, const float* src, long long n) {
    const float4* s4 = reinterpret_cast<const float4*>(src);
    float4* d4 = reinterpret_cast<float4*>(dst);
    for (long long i = threadIdx.x; i < n / 4; i += blockDim.x) d4[i] = s4[i];
}

// Brings n floats at s0 (and at s1, if not null) into d0 (d1) in shared memory, whole block:
// TMA, one thread issues the bulk copies on one barrier and everyone waits on it; else float4s.
template <bool TMA>
__device__ __forceinline__ void stage_in(float* d0, const float* s0, float* d1, const float* s1, long long n,
                                         unsigned long long* bar) {
    if (TMA) {
        if (threadIdx.x == 0) {
            mbar_init(bar);
            mbar_expect(bar, (unsigned)(n * 4 * (s1 ? 2 : 1)));
            bulk_load(d0, s0, (unsigned)(n * 4), bar);
            if (s1) bulk_load(d1, s1, (unsigned)(n * 4), bar);
        }
        __syncthreads();  // the barrier is initialised before anyone waits on it
        mbar_wait0(bar);
    } else {
        coop_copy(d0, s0, n);
        if (s1) coop_copy(d1, s1, n);
        __syncthreads();
    }
}
// Writes n floats of `buf` (shared, written by the whole block) to dst.
template <bool TMA>
__device__ __forceinline__ void stage_out(float* dst, const float* buf, long long n) {
    if (TMA) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic writes → async proxy
        __syncthreads();
        if (threadIdx.x == 0) bulk_store(dst, buf, (unsigned)(n * 4));
    } else {
        __syncthreads();
        coop_copy(dst, buf, n);
    }
}

// ---- kernels: RB rows a block (a multiple of 4; the lab's shapes fill every block) ----

template <int RB>
__global__ void __launch_bounds__(256) k_bulk_copy(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    extern __shared__ float4 smem4[];
    float* buf = reinterpret_cast<float*>(smem4);
    __shared__ alignas(8) unsigned long long bar;
    const long long off = (long long)blockIdx.x * RB * cols;
    const unsigned bytes = (unsigned)(RB * cols * 4);
    enter(x + off, nullptr, bytes);
    if (threadIdx.x == 0) {
        mbar_init(&bar);
        mbar_expect(&bar, bytes);
        bulk_load(buf, x + off, bytes, &bar);
        mbar_wait0(&bar);
        bulk_store(y + off, buf, bytes);
    }
}

template <int RB, int G, bool TMA>
__global__ void __launch_bounds__(256) k_fwd(const float* __restrict__ x, float* __restrict__ y, long long cols,
                                             int log_out) {
    extern __shared__ float4 smem4[];
    float* buf = reinterpret_cast<float*>(smem4);
    __shared__ alignas(8) unsigned long long bar;
    const long long off = (long long)blockIdx.x * RB * cols;
    const unsigned bytes = (unsigned)(RB * cols * 4);
    enter(x + off, nullptr, bytes);
    stage_in<TMA>(buf, x + off, nullptr, nullptr, RB * cols, &bar);
    constexpr int NG = 256 / G;
    const int lane = threadIdx.x % G;
    for (int r = threadIdx.x / G; r < RB; r += NG) {  // RB % NG == 0: uniform across the warp
        float* row = buf + r * cols;
        float m = -INFINITY;
        for (long long c = lane; c < cols; c += G) m = fmaxf(m, row[c]);
        m = camel::g_reduce<G>(1, m, nullptr);  // G ≤ 32: shuffles only, no scratch
        const float mref = m == -INFINITY ? 0.0f : m;
        float s = 0.0f;
        for (long long c = lane; c < cols; c += G) {
            const float e = expf(row[c] - mref);
            s += e;
            if (!log_out) row[c] = e;
        }
        s = camel::g_reduce<G>(0, s, nullptr);
        const float lse = logf(s), inv = 1.0f / s;
        for (long long c = lane; c < cols; c += G) row[c] = log_out ? (row[c] - mref) - lse : row[c] * inv;
    }
    stage_out<TMA>(y + off, buf, RB * cols);
}

template <int RB, int G, bool TMA>
__global__ void __launch_bounds__(256) k_bwd(const float* __restrict__ y, const float* __restrict__ g,
                                             float* __restrict__ dx, long long cols, int log_out) {
    extern __shared__ float4 smem4[];
    float* yb = reinterpret_cast<float*>(smem4);
    float* gb = yb + RB * cols;
    __shared__ alignas(8) unsigned long long bar;
    const long long off = (long long)blockIdx.x * RB * cols;
    const unsigned bytes = (unsigned)(RB * cols * 4);
    enter(y + off, g + off, bytes);
    stage_in<TMA>(yb, y + off, gb, g + off, RB * cols, &bar);
    constexpr int NG = 256 / G;
    const int lane = threadIdx.x % G;
    for (int r = threadIdx.x / G; r < RB; r += NG) {
        const float* yr = yb + r * cols;
        float* gr = gb + r * cols;
        float d = 0.0f;
        for (long long c = lane; c < cols; c += G) d += log_out ? gr[c] : gr[c] * yr[c];
        d = camel::g_reduce<G>(0, d, nullptr);
        for (long long c = lane; c < cols; c += G) gr[c] = log_out ? gr[c] - expf(yr[c]) * d : yr[c] * (gr[c] - d);
    }
    stage_out<TMA>(dx + off, gb, RB * cols);
}

// The library's step 3 backward row before this lab (the output computed inside each store's
// `if`), kept for the A/B against kernels/softmax/'s.
template <int G, int VEC, int NV>
__device__ __forceinline__ void old_bwd_row(const float* __restrict__ y, const float* __restrict__ g,
                                            float* __restrict__ dx, long long rows, long long cols, int log_out) {
    __shared__ float scratch[32];
    constexpr int PER_BLOCK = G <= 32 ? 256 / G : 1;
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const long long r = G <= 32 ? b * PER_BLOCK + threadIdx.x / G : b;
    const int lane = G <= 32 ? threadIdx.x % G : threadIdx.x;
    const bool live = r < rows;
    const long long base = (live ? r : 0) * cols;
    float yv[NV * VEC], gv[NV * VEC];
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (live && c < cols) {
            yv[i] = y[base + c];
            gv[i] = g[base + c];
        } else {
            yv[i] = gv[i] = 0.0f;
        }
        dot += log_out ? gv[i] : gv[i] * yv[i];
    }
    dot = camel::g_reduce<G>(0, dot, scratch);
    if (!live) return;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = (long long)(i * G + lane) * VEC;
        if (c < cols) {
            const float a = gv[i], p = yv[i];
            dx[base + c] = log_out ? a - expf(p) * dot : p * (a - dot);
        }
    }
}
__global__ void __launch_bounds__(256) k_old_bwd(const float* __restrict__ y, const float* __restrict__ g,
                                                 float* __restrict__ dx, long long rows, long long cols, int log_out) {
    softmax3_prefetch<16>(y, g, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    old_bwd_row<16, 1, 8>(y, g, dx, rows, cols, log_out);
}

// Step 3 with other group widths for 65 columns (the launcher picks G 16, NV 8): G lanes a row,
// 256 / G rows a block, the library's Hopper entry.
template <int G, int NV>
__global__ void __launch_bounds__(256) k_g_fwd(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                               long long cols, int log_out) {
    softmax3_prefetch<G>(x, nullptr, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    if (log_out) {
        softmax3_row<G, 1, NV, false, true>(x, y, rows, cols);
    } else {
        softmax3_row<G, 1, NV, false, false>(x, y, rows, cols);
    }
}
template <int G, int NV>
__global__ void __launch_bounds__(256) k_g_bwd(const float* __restrict__ y, const float* __restrict__ g,
                                               float* __restrict__ dx, long long rows, long long cols, int log_out) {
    softmax3_prefetch<G>(y, g, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    softmax3_bwd_row<G, 1, NV>(y, g, dx, rows, cols, log_out);
}

// Step 3's access shape with the arithmetic taken out: 16 lanes a row of 65, 5 scalar loads and
// 5 stores a lane, and NRED chained group reductions between them (the forward has two: the max,
// then the sum of exps). Is the forward held by where its bytes are, or by what it computes?
template <int NRED>
__global__ void __launch_bounds__(256) k_shape_copy(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                    long long cols) {
    __shared__ float scratch[32];
    softmax3_prefetch<16>(x, nullptr, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    const long long r = (long long)blockIdx.x * 16 + threadIdx.x / 16;
    const int lane = threadIdx.x % 16;
    if (r >= rows) return;  // the lab's rows fill every block: no group is split
    float v[8], s = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const long long c = i * 16 + lane;
        v[i] = c < cols ? x[r * cols + c] : 0.0f;
        s += v[i];
    }
#pragma unroll
    for (int k = 0; k < NRED; ++k) s = camel::g_reduce<16>(k % 2, s, scratch);
    const float z = NRED ? s * 0.0f : 0.0f;  // kept (s may be inf or NaN): the stores wait for it
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const long long c = i * 16 + lane;
        if (c < cols) y[r * cols + c] = v[i] + z;
    }
}

// The float4 copy of dev/labs/pdl_lab.cu (a float4 a thread), with the same entry.
__global__ void __launch_bounds__(256) k_copy4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    const long long i0 = (long long)blockIdx.x * 256;
    if (threadIdx.x == 0) camel::l2_prefetch(x + i0, (i0 + 256 <= n4 ? 256 : n4 - i0) * 16);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    const long long i = i0 + threadIdx.x;
    if (i < n4) y[i] = x[i];
}

// Step 3's forward with RPG rows a group of G lanes (rows k·(256/G) apart in the block, so a
// warp's loads still cover adjacent rows): every load of every row first, then the reductions
// of the rows side by side. Twice the bytes in flight a thread for about the same chain of
// dependent steps. The exps of the padding (columns past the row) are skipped.
template <int G, int NV, int RPG>
__global__ void __launch_bounds__(256) k_rows_fwd(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                  long long cols, int log_out) {
    __shared__ float scratch[32];
    constexpr int NG = 256 / G, PER_BLOCK = NG * RPG;
    const long long r0 = (long long)blockIdx.x * PER_BLOCK + threadIdx.x / G;
    const int lane = threadIdx.x % G;
    if (threadIdx.x == 0) camel::l2_prefetch_rows(x, (long long)blockIdx.x * PER_BLOCK, PER_BLOCK, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    float v[RPG][NV], mx[RPG], sm[RPG];
#pragma unroll
    for (int k = 0; k < RPG; ++k) {
        const long long r = r0 + (long long)k * NG;
        mx[k] = -INFINITY;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const long long c = i * G + lane;
            v[k][i] = (r < rows && c < cols) ? x[r * cols + c] : -INFINITY;
            mx[k] = fmaxf(mx[k], v[k][i]);
        }
    }
#pragma unroll
    for (int k = 0; k < RPG; ++k) mx[k] = camel::g_reduce<G>(1, mx[k], scratch);
#pragma unroll
    for (int k = 0; k < RPG; ++k) {
        const float mref = mx[k] == -INFINITY ? 0.0f : mx[k];
        mx[k] = mref;
        sm[k] = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            if (i * G + lane < cols) {
                const float e = expf(v[k][i] - mref);
                sm[k] += e;
                if (!log_out) v[k][i] = e;
            }
        }
    }
#pragma unroll
    for (int k = 0; k < RPG; ++k) sm[k] = camel::g_reduce<G>(0, sm[k], scratch);
#pragma unroll
    for (int k = 0; k < RPG; ++k) {
        const long long r = r0 + (long long)k * NG;
        if (r >= rows) continue;
        const float lse = log_out ? logf(sm[k]) : 0.0f, inv = log_out ? 0.0f : 1.0f / sm[k];
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const long long c = i * G + lane;
            if (c < cols) y[r * cols + c] = log_out ? (v[k][i] - mx[k]) - lse : v[k][i] * inv;
        }
    }
}

// One row a group; the exps start from the thread's own max, while the group's max is still in
// the shuffles, and the thread's sum is rescaled once by exp(own max − row max) (output
// e · exp(own − row) / Σ: two more roundings than exp(x − max) / Σ).
template <int G, int NV>
__global__ void __launch_bounds__(256) k_local_fwd(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                   long long cols, int log_out) {
    __shared__ float scratch[32];
    constexpr int PER_BLOCK = 256 / G;
    const long long r = (long long)blockIdx.x * PER_BLOCK + threadIdx.x / G;
    const int lane = threadIdx.x % G;
    if (threadIdx.x == 0) camel::l2_prefetch_rows(x, (long long)blockIdx.x * PER_BLOCK, PER_BLOCK, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    float v[NV], mt = -INFINITY;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = i * G + lane;
        v[i] = (r < rows && c < cols) ? x[r * cols + c] : -INFINITY;
        mt = fmaxf(mt, v[i]);
    }
    const float mloc = mt == -INFINITY ? 0.0f : mt;
    float st = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        if (i * G + lane < cols) {
            const float e = expf(v[i] - mloc);
            st += e;
            if (!log_out) v[i] = e;
        }
    }
    const float m = camel::g_reduce<G>(1, mt, scratch);
    const float mref = m == -INFINITY ? 0.0f : m;
    const float f = mt == -INFINITY ? 0.0f : expf(mt - mref);
    const float s = camel::g_reduce<G>(0, st * f, scratch);
    if (r >= rows) return;
    const float lse = log_out ? logf(s) : 0.0f, scale = log_out ? 0.0f : f / s;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = i * G + lane;
        if (c < cols) y[r * cols + c] = log_out ? (v[i] - mref) - lse : v[i] * scale;
    }
}

static cudaStream_t S;

// Launches k on S with the PDL attribute, as camel_cuda launches on Hopper.
template <class... KA, class... A>
static void go(size_t smem, void (*k)(KA...), unsigned grid, A... a) {
    lab_launch(S, true, smem, k, grid, a...);
}
template <class K>
static void allow_smem(K k, size_t smem) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
}

static double streamed(const std::function<void(int)>& launch, int sets) {
    return lab_streamed(launch, sets, lab_per(20), [] { blocker<<<1, 1, 0, S>>>(2000000); }, S);
}

int main() {
    lab_open(&S);
    const size_t big = 1ull << 29;  // two buffers of 2 GiB: the copy bandwidth, then the lab's data
    float *a = dalloc(big), *b = dalloc(big);
    const double copy_bw = lab_copy_bw(a, b, S, streamed);
    unsigned s = 12345;
    auto fill = [&](float* p, size_t n, float lo, float hi) { lab_fill(p, n, lo, hi, s); };
    auto report = [&](const char* name, double us, double bytes, double err) {
        printf("%-44s %8.2f us  %6.0f GB/s  %5.1f %% of copy", name, us, bytes / us / 1e3,
               100.0 * bytes / us / 1e3 / copy_bw);
        if (err >= 0) printf("  max diff %.2e", err);
        printf("\n");
    };

    const long long R = 65536, C = 65, N = R * C;
    const int sets = 6;  // 6 · 3 · 17 MB > 256 MiB
    float* ref = dalloc(N);
    fill(a, 2 * N * sets, -3.0f, 0.5f);  // x / y sets, then g sets
    float* gs = a + N * sets;
    // One line: poisons b, runs launch(0) once and compares b with `want` (relative where `rel`;
    // no comparison where want is null), then times launch(i), which writes b + i·N, streamed.
    auto measure = [&](const char* name, double bytes, const float* want, bool rel,
                       const std::function<void(int)>& launch) {
        CK(cudaMemsetAsync(b, 0xff, N * 4, S));
        launch(0);
        CK(cudaStreamSynchronize(S));
        const double err = want ? max_diff(want, b, N, rel) : -1.0;
        report(name, streamed(launch, sets), bytes, err);
    };
    char name[96];

    // ---- forward: the library's step 3 (G 16, scalar, NV 8; prefetch, wait, trigger) ----
    for (int log_out : {0, 1}) {
        const char* fam = log_out ? "log-softmax" : "softmax";
        const double bytes = 2.0 * N * 4;
        // (NV 8 and one kernel for both when this lab ran; NV 5, a kernel each since dev/labs/exp_lab.cu)
        auto lib = log_out ? log_softmax3_g16_v1_n5_f32 : softmax3_g16_v1_n5_f32;
        go(0, lib, R / 16, a, ref, R, C);
        CK(cudaStreamSynchronize(S));
        snprintf(name, sizeof name, "%s fwd step 3 (library)", fam);
        measure(name, bytes, nullptr, true, [&](int i) { go(0, lib, R / 16, a + i * N, b + i * N, R, C); });
        // lab kernels with the library's arguments: g lanes a row, grid of `grid` blocks
        auto run_step3 = [&](const char* what, unsigned grid, auto k) {
            snprintf(name, sizeof name, "%s fwd step 3%s", fam, what);
            measure(name, bytes, ref, true, [&](int i) { go(0, k, grid, a + i * N, b + i * N, R, C, log_out); });
        };
        run_step3(", 1 rows a group", R / 16, k_rows_fwd<16, 8, 1>);
        run_step3(", exps from the own max", R / 16, k_local_fwd<16, 8>);
        run_step3(", 2 rows a group", R / 32, k_rows_fwd<16, 8, 2>);
        run_step3(", 4 rows a group", R / 64, k_rows_fwd<16, 8, 4>);
        run_step3(" with G 8", R * 8 / 256, k_g_fwd<8, 16>);
        run_step3(" with G 32", R * 32 / 256, k_g_fwd<32, 4>);
        // staged: rb rows a block in shared memory
        auto run = [&](const char* what, int rb, auto k) {
            const size_t smem = (size_t)rb * C * 4;
            allow_smem(k, smem);
            snprintf(name, sizeof name, "%s fwd %s rows %d", fam, what, rb);
            measure(name, bytes, ref, true,
                    [&](int i) { go(smem, k, (unsigned)(R / rb), a + i * N, b + i * N, C, log_out); });
        };
        run("tma g16", 32, k_fwd<32, 16, true>);
        run("tma g16", 64, k_fwd<64, 16, true>);
        run("tma g16", 128, k_fwd<128, 16, true>);
        run("tma g8", 64, k_fwd<64, 8, true>);
        run("float4 g16", 32, k_fwd<32, 16, false>);
        run("float4 g16", 64, k_fwd<64, 16, false>);
        run("float4 g16", 128, k_fwd<128, 16, false>);
    }
    // ---- step 3's shape, nothing computed; the float4 copy ----
    auto run_shape = [&](int nred, auto k) {
        snprintf(name, sizeof name, "step 3 shape copy, %d reductions", nred);
        measure(name, 2.0 * N * 4, a, false, [&](int i) { go(0, k, (unsigned)(R / 16), a + i * N, b + i * N, R, C); });
    };
    run_shape(0, k_shape_copy<0>);
    run_shape(1, k_shape_copy<1>);
    run_shape(2, k_shape_copy<2>);
    const long long n4 = N / 4;
    measure("float4 copy, a float4 a thread", 2.0 * n4 * 16, a, false, [&](int i) {
        go(0, k_copy4, (unsigned)((n4 + 255) / 256), (const float4*)(a + i * N), (float4*)(b + i * N), n4);
    });
    // ---- the bulk copy of the forward's bytes ----
    for (int rb : {32, 64, 128}) {
        auto k = rb == 32 ? k_bulk_copy<32> : rb == 64 ? k_bulk_copy<64> : k_bulk_copy<128>;
        const size_t smem = (size_t)rb * C * 4;
        allow_smem(k, smem);
        snprintf(name, sizeof name, "bulk copy 2 x 17 MB rows %d", rb);
        measure(name, 2.0 * N * 4, a, false, [&](int i) { go(smem, k, (unsigned)(R / rb), a + i * N, b + i * N, C); });
    }

    // ---- backward ----
    for (int log_out : {0, 1}) {
        const char* fam = log_out ? "log-softmax" : "softmax";
        const double bytes = 3.0 * N * 4;
        go(0, softmax3_bwd_g16_v1_n5_f32, R / 16, a, gs, ref, R, C, log_out);
        CK(cudaStreamSynchronize(S));
        auto library = [&] {
            snprintf(name, sizeof name, "%s bwd step 3 (library)", fam);
            measure(name, bytes, nullptr, true, [&](int i) {
                go(0, softmax3_bwd_g16_v1_n5_f32, R / 16, a + i * N, gs + i * N, b + i * N, R, C, log_out);
            });
        };
        library();
        auto run_step3 = [&](const char* what, unsigned grid, auto k) {
            snprintf(name, sizeof name, "%s bwd step 3%s", fam, what);
            measure(name, bytes, ref, true,
                    [&](int i) { go(0, k, grid, a + i * N, gs + i * N, b + i * N, R, C, log_out); });
        };
        for (int rep = 0; rep < 2; ++rep) {  // A/B, twice: the step before this lab, the library's
            run_step3(" before (store in the if)", R / 16, k_old_bwd);
            library();
        }
        run_step3(" with G 8", R * 8 / 256, k_g_bwd<8, 16>);
        run_step3(" with G 32", R * 32 / 256, k_g_bwd<32, 4>);
        auto run = [&](const char* what, int rb, auto k) {
            const size_t smem = 2 * (size_t)rb * C * 4;
            allow_smem(k, smem);
            snprintf(name, sizeof name, "%s bwd %s rows %d", fam, what, rb);
            measure(name, bytes, ref, true,
                    [&](int i) { go(smem, k, (unsigned)(R / rb), a + i * N, gs + i * N, b + i * N, C, log_out); });
        };
        run("tma g16", 32, k_bwd<32, 16, true>);
        run("tma g16", 64, k_bwd<64, 16, true>);
        run("tma g16", 128, k_bwd<128, 16, true>);
        run("float4 g16", 32, k_bwd<32, 16, false>);
        run("float4 g16", 64, k_bwd<64, 16, false>);
    }
    return 0;
}
