// Short-row pipelining lab: can a group of 16 lanes keep its next row's loads in flight while it
// computes this one (softmax at 65536×65), and do fewer, longer-lived blocks or other block sizes
// help? Also: how the time a launch depends on the launches in a timed batch, and the floor of a
// small op. Not part of the library.
//
// Versions (the library's row arithmetic and entry, G = 16 lanes a row, NV = 5 floats a lane;
// each runs twice and is compared with the library's kernel):
//   K rows a group   a block owns K · PB consecutive rows, PB rows at a time
//   pipelined        row k + 1's loads issued before row k's arithmetic and stores
//   in turn          row k + 1's loads after row k's stores (the same kernel, no overlap)
//   bytes only       the same loads and stores, nothing computed (the pattern's floor)
//   rcp_sum          1 / Σ by camel::rcp_sum (rows.cuh), not 1.0f / s
//   batch            10 … 200 launches between the timing events
//   small op         an empty kernel; cross-entropy 16384×65's bytes with nothing computed
//
// Timing: lab_common.cuh's streamed method, inputs rotated over 256 MiB. What it found and where
// it went: dev/labs/README.md; raw output docs/data/pipe_lab_h100.txt.
//
// Build and run on the GPU host (sm_90):  OUT=dir bash dev/labs/pipe_lab.sh
#include <cstdio>
#include <cuda_runtime.h>

#include "../kernels/softmax/01_block_per_row.cu"
#include "../kernels/softmax/02_online_warp.cu"
#include "../kernels/softmax/03_warp_registers.cu"
#include "../kernels/softmax/04_streaming.cu"
#include "lab_common.cuh"

constexpr int G = 16, NV = 5;

// Row `r`'s NV slots of this lane (−inf past the row's end or past the last row).
__device__ __forceinline__ void load_row(const float* __restrict__ x, long long r, long long rows, long long cols,
                                         int lane, float (&v)[NV]) {
    const bool live = r < rows;
    const float* xr = x + (live ? r : 0) * cols;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = i * G + lane;
        v[i] = live && c < cols ? xr[c] : -INFINITY;
    }
}

// RCP variants: 1 / Σ by camel::rcp_sum (rows.cuh: rcp.approx and one Newton step, the
// compiler's fast path of 1.0f / s without its range test and slow-path call). main() checks
// every float in [1, 2^24] against 1.0f / s.
__global__ void k_rcp_check(unsigned first, unsigned n, unsigned long long* bad) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float s = __uint_as_float(first + i);
        if (__float_as_uint(camel::rcp_sum(s)) != __float_as_uint(1.0f / s)) atomicAdd(bad, 1ull);
    }
}

// What a k_rows kernel does with a loaded row.
enum Mode { BYTES = 0, SOFTMAX = 1, ROW_SUM = 2 };

// MODE SOFTMAX: the library's arithmetic (softmax3_row) on a loaded row, then its stores; BYTES:
// the stores of the loaded values only; ROW_SUM: one float a row, the row's sum (cross-entropy's
// bytes). RCP: camel::rcp_sum for 1 / Σ. Every lane of the warp calls it (the shuffles).
template <bool LOG, int MODE, bool RCP = false>
__device__ __forceinline__ void finish_row(float (&v)[NV], float* __restrict__ y, long long r, long long rows,
                                           long long cols, int lane, float* scratch) {
    const bool live = r < rows;
    constexpr bool MATH = MODE == SOFTMAX;
    if (MODE == ROW_SUM) {
        float t = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; ++i) t += v[i] == -INFINITY ? 0.0f : v[i];
        t = camel::g_reduce<G>(0, t, scratch);
        if (lane == 0 && live) y[r] = t;
        return;
    }
    float* yr = y + (live ? r : 0) * cols;
    float mref = 0.0f, lse = 0.0f, inv = 1.0f;
    if (MATH) {
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < NV; ++i) mx = fmaxf(mx, v[i]);
        mx = camel::g_reduce<G>(1, mx, scratch);
        mref = mx == -INFINITY ? 0.0f : mx;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const float e = expf(v[i] - mref);
            s += e;
            if (!LOG) v[i] = e;
        }
        s = camel::g_reduce<G>(0, s, scratch);
        lse = LOG ? logf(s) : 0.0f;
        inv = LOG ? 0.0f : RCP ? camel::rcp_sum(s) : 1.0f / s;
    }
    if (!live) return;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const long long c = i * G + lane;
        if (c < cols) yr[c] = !MATH ? v[i] : LOG ? (v[i] - mref) - lse : v[i] * inv;
    }
}

// A block of 16 · PB threads takes K chunks of PB consecutive rows, one after another. INTER
// false: its chunks are consecutive (rows [b · K · PB, (b + 1) · K · PB)); true: chunk k is the
// grid's k-th sweep (rows (k · gridDim.x + b) · PB …), so the blocks in flight read one region
// together, as the one-chunk grid does. PIPE: row k + 1's loads before row k's arithmetic;
// MODE: what each row gets (finish_row). At most 32 registers (2048 threads an SM, as the
// library's kernel).
template <bool LOG, int K, int PB, bool PIPE, int MODE, bool INTER, bool RCP = false>
__global__ void __launch_bounds__(G * PB, 2048 / (G * PB))
    k_rows(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    __shared__ float scratch[32];
    const long long step = INTER ? (long long)gridDim.x * PB : PB;  // rows from one chunk to the next
    const long long r0 = INTER ? (long long)blockIdx.x * PB : (long long)blockIdx.x * K * PB;
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) camel::l2_prefetch_rows(x, r0 + k * step, PB, rows, cols);
    }
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    const int lane = threadIdx.x % G;
    const long long r = r0 + threadIdx.x / G;
    float v[2][NV];
    load_row(x, r, rows, cols, lane, v[0]);
#pragma unroll
    for (int k = 0; k < K; ++k) {
        if (PIPE && k + 1 < K) load_row(x, r + (k + 1) * step, rows, cols, lane, v[(k + 1) & 1]);
        finish_row<LOG, MODE, RCP>(v[k & 1], y, r + k * step, rows, cols, lane, scratch);
        if (!PIPE && k + 1 < K) load_row(x, r + (k + 1) * step, rows, cols, lane, v[(k + 1) & 1]);
    }
}

// The least a launch costs: PDL wait and trigger, nothing else (the floor of a small op).
__global__ void k_empty() {
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
}

static cudaStream_t S;

int main() {
    const cudaDeviceProp prop = lab_open(&S);
    const size_t big = 1ull << 29;
    float *a = dalloc(big), *b = dalloc(big);
    // per: launches a timed batch (0: LAB_PER, else 20).
    auto streamed = [](const std::function<void(int)>& launch, int sets, int per = 0) {
        return lab_streamed(launch, sets, per ? per : lab_per(20), [] { blocker<<<1, 1, 0, S>>>(2000000); }, S);
    };
    const double copy_bw = lab_copy_bw(a, b, S, streamed);
    {
        unsigned long long* bad = dalloc<unsigned long long>(1);
        CK(cudaMemset(bad, 0, 8));
        const unsigned first = 0x3f800000u, last = 0x4b800000u;  // the bits of 1.0f and of 2^24
        k_rcp_check<<<1024, 256, 0, S>>>(first, last - first + 1, bad);
        unsigned long long h = 0;
        CK(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
        printf("rcp_sum against 1.0f / s, every float in [1, 2^24]: %llu differ\n\n", h);
    }
    unsigned seed = 12345;
    const long long R = 65536, C = 65, N = R * C;
    const int sets = 8;  // 8 · 2 · 17 MB > 256 MiB
    lab_fill(a, N * sets, -3.0f, 0.5f, seed);
    float* ref = dalloc(N);
    const double bytes = 2.0 * N * 4;
    using Kernel = void (*)(const float*, float*, long long, long long);
    // Blocks of PB rows, K rows a group, over the whole matrix.
    auto grid_of = [&](int K, int PB) { return (R + (long long)K * PB - 1) / ((long long)K * PB); };
    // Launches kernel k over the whole matrix (input set i).
    auto go = [&](Kernel k, int K, int PB, int i, float* out) {
        lab_launch_block(S, true, 0, k, (unsigned)grid_of(K, PB), (unsigned)(G * PB), a + i * N, out, R, C);
    };
    auto regs = [](Kernel k) {
        cudaFuncAttributes at;
        CK(cudaFuncGetAttributes(&at, k));
        return at.numRegs;
    };
    // Poisons b, runs once, compares with the library's output, times streamed.
    auto measure = [&](const char* what, int log_out, Kernel k, int K, int PB, int per = 0) {
        CK(cudaMemsetAsync(b, 0xff, N * 4, S));
        go(k, K, PB, 0, b);
        CK(cudaStreamSynchronize(S));
        const double err = max_diff(ref, b, N, true);
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, G * PB, 0));
        const long long grid = grid_of(K, PB);
        const double us = streamed([&](int i) { go(k, K, PB, i, b + i * N); }, sets, per);
        char label[96];
        if (per) snprintf(label, sizeof label, "%s, %d a batch", what, per);
        else snprintf(label, sizeof label, "%s", what);
        printf("%-12s %-40s %3d regs %5lld blocks (%.2f waves) %7.2f us %6.0f GB/s %5.1f %% of copy  diff %.2e\n",
               log_out ? "log-softmax" : "softmax", label, regs(k), grid,
               (double)grid / (per_sm * prop.multiProcessorCount), us, bytes / us / 1e3,
               100.0 * bytes / us / 1e3 / copy_bw, err);
    };
    for (int log_out : {0, 1}) {
        const Kernel lib = log_out ? (Kernel)log_softmax3_g16_v1_n5_f32 : (Kernel)softmax3_g16_v1_n5_f32;
        go(lib, 1, 16, 0, ref);
        CK(cudaStreamSynchronize(S));
#define V(L, K, PB, PIPE, MODE, INTER) (Kernel) k_rows<L, K, PB, PIPE, MODE, INTER>, K, PB
#define VARIANTS(L)                                                                                             \
    measure("bytes only, K 1", log_out, V(L, 1, 16, true, BYTES, false));                                       \
    measure("bytes only, K 4 pipelined", log_out, V(L, 4, 16, true, BYTES, false));                             \
    measure("bytes only, K 4 pipelined, sweeps", log_out, V(L, 4, 16, true, BYTES, true));                      \
    measure("K 1, 1.0f / s (the library before)", log_out, V(L, 1, 16, true, SOFTMAX, false));                  \
    measure("K 1, 8 rows a block", log_out, V(L, 1, 8, true, SOFTMAX, false));                                  \
    measure("K 1, 32 rows a block", log_out, V(L, 1, 32, true, SOFTMAX, false));                                \
    measure("K 2 pipelined", log_out, V(L, 2, 16, true, SOFTMAX, false));                                       \
    measure("K 2 in turn", log_out, V(L, 2, 16, false, SOFTMAX, false));                                        \
    measure("K 2 pipelined, sweeps", log_out, V(L, 2, 16, true, SOFTMAX, true));                                \
    measure("K 2 in turn, sweeps", log_out, V(L, 2, 16, false, SOFTMAX, true));                                 \
    measure("K 2 pipelined, sweeps, 8 rows a block", log_out, V(L, 2, 8, true, SOFTMAX, true));                 \
    measure("K 4 pipelined", log_out, V(L, 4, 16, true, SOFTMAX, false));                                       \
    measure("K 4 pipelined, sweeps", log_out, V(L, 4, 16, true, SOFTMAX, true));                                \
    measure("K 4 in turn, sweeps", log_out, V(L, 4, 16, false, SOFTMAX, true));                                 \
    measure("K 4 pipelined, sweeps, 8 rows a block", log_out, V(L, 4, 8, true, SOFTMAX, true));                 \
    measure("K 8 pipelined, sweeps", log_out, V(L, 8, 16, true, SOFTMAX, true));                                \
    measure("K 1, rcp_sum", log_out, (Kernel)k_rows<L, 1, 16, true, SOFTMAX, false, true>, 1, 16);
        for (int rep = 0; rep < 2; ++rep) {
            measure("library", log_out, lib, 1, 16);
            if (log_out) {
                VARIANTS(true)
            } else {
                VARIANTS(false)
            }
        }
#undef V
#undef VARIANTS
    }
    // How long a timed batch is: each batch pays once for the GPU filling up after its first
    // event and draining before its last, which back-to-back launches do not pay each time.
    printf("\nlaunches a timed batch (bench_memory took 10, the labs 20):\n");
    for (int log_out : {0, 1}) {
        const Kernel lib = log_out ? (Kernel)log_softmax3_g16_v1_n5_f32 : (Kernel)softmax3_g16_v1_n5_f32;
        go(lib, 1, 16, 0, ref);
        CK(cudaStreamSynchronize(S));
        for (int per : {10, 20, 50, 100, 200}) {
            measure("library", log_out, lib, 1, 16, per);
            measure("bytes only", log_out, (Kernel)k_rows<false, 1, 16, true, BYTES, false>, 1, 16, per);
            if (!log_out) measure("K 1, 1.0f / s", log_out, (Kernel)k_rows<false, 1, 16, true, SOFTMAX, false, false>, 1, 16, per);
        }
    }
    // The floor of a small op (cross-entropy 16384×65 moves 4.3 MB: 90 % of copy would be
    // 1.57 µs a launch): an empty kernel, and the bytes-only kernel at 16384×65, 200 a batch.
    printf("\nsmall ops, 200 launches a batch:\n");
    for (unsigned blocks : {64u, 1024u, 4096u}) {
        const double us = streamed([&](int) { lab_launch(S, true, 0, k_empty, blocks); }, 1, 200);
        printf("empty kernel (PDL wait + trigger), %4u blocks of 256: %5.2f us\n", blocks, us);
    }
    {
        const long long r = 16384, n = r * C;
        const Kernel k = (Kernel)k_rows<false, 1, 16, true, BYTES, false>;
        const double us = streamed(
            [&](int i) { lab_launch(S, true, 0, k, (unsigned)(r / 16), a + i * n, b + i * n, r, C); }, 32, 200);
        printf("bytes only 16384x65 (read and write 4.3 MB each, 1024 blocks): %5.2f us, %4.1f %% of copy\n", us,
               100.0 * (2.0 * n * 4) / us / 1e3 / copy_bw);
        auto read = [&](const char* what, Kernel k, int K) {
            const double t = streamed(
                [&](int i) { lab_launch(S, true, 0, k, (unsigned)(r / 16 / K), a + i * n, b + i * r, r, C); }, 32, 200);
            printf("read 16384x65 (4.3 MB), a float a row out, %-22s %5.2f us, %4.1f %% of copy\n", what, t,
                   100.0 * ((double)n * 4 + r * 4) / t / 1e3 / copy_bw);
        };
        read("1024 blocks:", (Kernel)k_rows<false, 1, 16, true, ROW_SUM, true>, 1);
        read("256 blocks (4 rows):", (Kernel)k_rows<false, 4, 16, true, ROW_SUM, true>, 4);
        read("64 blocks (16 rows):", (Kernel)k_rows<false, 16, 16, true, ROW_SUM, true>, 16);
    }
    return 0;
}
