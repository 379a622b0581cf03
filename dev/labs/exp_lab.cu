// Short-row exp lab: softmax step 3's forward at 65536×65 moves its bytes slower than the same
// loads and stores with only its two group reductions (dev/labs/tma_lab.cu): which part of the
// arithmetic between them costs the time? Not part of the library.
//
// Versions (each keeps the library's entry, loads and stores; only the exp loop or the kernel
// around it changes; each runs twice and is compared with "before"):
//   before      the library's row code as it was: NV = 8 slots a lane, each exp behind a test
//               of its own column
//   uniform     a slot's exps skipped only when the whole slot is past the row
//   NV 5        exactly ceil(65 / 16) slots a lane, every exp unconditional
//   +const      softmax or log-softmax a compile-time choice, not a kernel argument
//   one / two bodies   a kernel with one of softmax and log-softmax, or both behind the argument
//   ex2         exp(x − max) as ex2.approx(log2 e · (x − max)) (not the same bits)
//   own max     exps from the lane's own max while the group's max is in the shuffles, the
//               lane's sum rescaled once
//
// Timing: lab_common.cuh's streamed method, inputs rotated over 256 MiB. What it found and where
// it went: dev/labs/README.md; raw output docs/data/exp_lab_h100.txt.
//
// Build and run on the GPU host (sm_90):  OUT=dir bash dev/labs/exp_lab.sh
#include <cstdio>
#include <type_traits>
#include <cuda_runtime.h>

#include "../kernels/softmax/01_block_per_row.cu"
#include "../kernels/softmax/02_online_warp.cu"
#include "../kernels/softmax/03_warp_registers.cu"
#include "../kernels/softmax/04_streaming.cu"
#include "lab_common.cuh"

__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// The library's forward row for G = 16, VEC = 1, with the exp loop as the template says.
// NV: slots a lane; LOG: −1 the kernel argument decides, 0 softmax, 1 log-softmax;
// SKIP: 0 none (every slot's exp), 1 per lane (the library's), 2 per slot (uniform);
// EX2: the approximate exp.
template <int NV, int LOG, int SKIP, bool EX2>
__device__ __forceinline__ void lab_row(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                        long long cols, int log_arg) {
    constexpr int G = 16;
    __shared__ float scratch[32];
    const int log_out = LOG < 0 ? log_arg : LOG;
    const long long r = (long long)blockIdx.x * (256 / G) + threadIdx.x / G;
    const int lane = threadIdx.x % G;
    const bool live = r < rows;
    const float* xr = x + (live ? r : 0) * cols;
    float* yr = y + (live ? r : 0) * cols;
    float v[NV], mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = i * G + lane;
        v[i] = live && c < cols ? xr[c] : -INFINITY;
        mx = fmaxf(mx, v[i]);
    }
    mx = camel::g_reduce<G>(1, mx, scratch);
    const float mref = mx == -INFINITY ? 0.0f : mx;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const bool skip = SKIP == 1 ? i * G + lane >= cols : SKIP == 2 ? i * G >= cols : false;
        if (!skip) {
            const float e = EX2 ? ex2_approx((v[i] - mref) * 1.4426950408889634f) : expf(v[i] - mref);
            s += e;
            if (!log_out) v[i] = e;
        }
    }
    s = camel::g_reduce<G>(0, s, scratch);
    if (!live) return;
    const float lse = log_out ? logf(s) : 0.0f, inv = log_out ? 0.0f : 1.0f / s;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = i * G + lane;
        if (c < cols) yr[c] = log_out ? (v[i] - mref) - lse : v[i] * inv;
    }
}

template <int NV, int LOG, int SKIP, bool EX2>
__global__ void __launch_bounds__(256) k_fwd(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                             long long cols, int log_arg) {
    softmax3_prefetch<16>(x, nullptr, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    lab_row<NV, LOG, SKIP, EX2>(x, y, rows, cols, log_arg);
}

// Exps from the lane's own max, started while the group's max is still in the shuffles; the
// lane's sum is rescaled once by exp(own max − row max) before the group sum (softmax output
// e · (exp(own − row) / Σ): two more roundings than exp(x − max) / Σ, not the same bits).
template <int NV, int LOG, bool EX2>
__global__ void __launch_bounds__(256) k_own(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                             long long cols, int) {
    constexpr int G = 16;
    __shared__ float scratch[32];
    softmax3_prefetch<G>(x, nullptr, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    const long long r = (long long)blockIdx.x * (256 / G) + threadIdx.x / G;
    const int lane = threadIdx.x % G;
    const bool live = r < rows;
    const float* xr = x + (live ? r : 0) * cols;
    float* yr = y + (live ? r : 0) * cols;
    float v[NV], mt = -INFINITY;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = i * G + lane;
        v[i] = live && c < cols ? xr[c] : -INFINITY;
        mt = fmaxf(mt, v[i]);
    }
    const float mloc = mt == -INFINITY ? 0.0f : mt;
    float st = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const float e = EX2 ? ex2_approx((v[i] - mloc) * 1.4426950408889634f) : expf(v[i] - mloc);
        st += e;
        if (!LOG) v[i] = e;
    }
    const float m = camel::g_reduce<G>(1, mt, scratch);
    const float mref = m == -INFINITY ? 0.0f : m;
    const float f = mt == -INFINITY ? 0.0f : expf(mt - mref);
    const float s = camel::g_reduce<G>(0, st * f, scratch);
    if (!live) return;
    const float lse = LOG ? logf(s) : 0.0f, scale = LOG ? 0.0f : f / s;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = i * G + lane;
        if (c < cols) yr[c] = LOG ? (v[i] - mref) - lse : v[i] * scale;
    }
}

// Two bodies in one kernel, as the library's forward had them (the argument picks the body):
// the lab's row (k_fwd's) or the library's softmax3_row.
// BODY 0: lab_row, 1: the library's softmax3_row. LOG −1: both bodies, the argument picks.
template <int BODY, int LOG>
__global__ void __launch_bounds__(256) k_body(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                              long long cols, int log_arg) {
    softmax3_prefetch<16>(x, nullptr, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    const int log_out = LOG < 0 ? log_arg : LOG;
    if (log_out) {
        if (BODY == 0) lab_row<5, 1, 0, false>(x, y, rows, cols, 1);
        if (BODY == 1) softmax3_row<16, 1, 5, false, true>(x, y, rows, cols);
    } else {
        if (BODY == 0) lab_row<5, 0, 0, false>(x, y, rows, cols, 0);
        if (BODY == 1) softmax3_row<16, 1, 5, false, false>(x, y, rows, cols);
    }
}

static cudaStream_t S;

int main() {
    lab_open(&S);
    const size_t big = 1ull << 29;
    float *a = dalloc(big), *b = dalloc(big);
    auto streamed = [](const std::function<void(int)>& launch, int sets) {
        return lab_streamed(launch, sets, lab_per(20), [] { blocker<<<1, 1, 0, S>>>(2000000); }, S);
    };
    const double copy_bw = lab_copy_bw(a, b, S, streamed);
    unsigned seed = 12345;
    const long long R = 65536, C = 65, N = R * C;
    const int sets = 8;  // 8 · 2 · 17 MB > 256 MiB
    lab_fill(a, N * sets, -3.0f, 0.5f, seed);
    float* ref = dalloc(N);
    const double bytes = 2.0 * N * 4;
    char name[96];
    // The library's forward kernels take no log_out (one kernel each); the lab's take it.
    using LibKernel = void (*)(const float*, float*, long long, long long);
    auto go = [&](auto k, int i, int log_out, float* out) {
        const float* in = a + i * N;
        if constexpr (std::is_same_v<decltype(k), LibKernel>) {
            lab_launch(S, true, 0, k, (unsigned)(R / 16), in, out, R, C);
        } else {
            lab_launch(S, true, 0, k, (unsigned)(R / 16), in, out, R, C, log_out);
        }
    };
    auto regs = [](auto k) {
        cudaFuncAttributes at;
        CK(cudaFuncGetAttributes(&at, k));
        return at.numRegs;
    };
    // Poisons b, runs once, compares with the library's output (relative), times streamed.
    auto measure = [&](const char* what, int log_out, auto k) {
        CK(cudaMemsetAsync(b, 0xff, N * 4, S));
        go(k, 0, log_out, b);
        CK(cudaStreamSynchronize(S));
        const double err = max_diff(ref, b, N, true);
        const double us = streamed([&](int i) { go(k, i, log_out, b + i * N); }, sets);
        snprintf(name, sizeof name, "%s %s", log_out ? "log-softmax" : "softmax", what);
        printf("%-40s %3d regs %8.2f us  %6.0f GB/s  %5.1f %% of copy  max rel diff %.2e\n", name, regs(k), us,
               bytes / us / 1e3, 100.0 * bytes / us / 1e3 / copy_bw, err);
    };
    for (int log_out : {0, 1}) {
        go(k_fwd<8, -1, 1, false>, 0, log_out, ref);  // the step before: every variant's reference
        CK(cudaStreamSynchronize(S));
        for (int rep = 0; rep < 2; ++rep) {
            measure("before (NV 8, per lane)", log_out, k_fwd<8, -1, 1, false>);
            measure("library (NV 5, one body)", log_out,
                    log_out ? (LibKernel)log_softmax3_g16_v1_n5_f32 : (LibKernel)softmax3_g16_v1_n5_f32);
            measure("NV 8, uniform", log_out, k_fwd<8, -1, 2, false>);
            measure("NV 5", log_out, k_fwd<5, -1, 0, false>);
            if (log_out) {
                measure("NV 5 +const", log_out, k_fwd<5, 1, 0, false>);
                measure("NV 8, uniform +const", log_out, k_fwd<8, 1, 2, false>);
                measure("NV 5 +const ex2", log_out, k_fwd<5, 1, 0, true>);
            } else {
                measure("NV 5 +const", log_out, k_fwd<5, 0, 0, false>);
                measure("NV 8, uniform +const", log_out, k_fwd<8, 0, 2, false>);
                measure("NV 5 +const ex2", log_out, k_fwd<5, 0, 0, true>);
            }
            measure("NV 5 ex2", log_out, k_fwd<5, -1, 0, true>);
            measure("own max", log_out, log_out ? k_own<5, 1, false> : k_own<5, 0, false>);
            measure("own max ex2", log_out, log_out ? k_own<5, 1, true> : k_own<5, 0, true>);
            measure("lab row, one body", log_out, log_out ? k_body<0, 1> : k_body<0, 0>);
            measure("lab row, two bodies", log_out, k_body<0, -1>);
            measure("library row, one body", log_out, log_out ? k_body<1, 1> : k_body<1, 0>);
            measure("library row, two bodies", log_out, k_body<1, -1>);
        }
    }
    return 0;
}
