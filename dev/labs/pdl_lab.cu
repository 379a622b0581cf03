// Programmatic dependent launch (PDL) lab: does letting a kernel's launch overlap the tail of
// the kernel before it (cudaLaunchAttributeProgrammaticStreamSerialization, griddepcontrol.wait
// in the kernel) close the gap between back-to-back memory-bound kernels, and which entry does
// it best? The library's kernels (LayerNorm step 4, softmax step 3 at 65536×65, cross-entropy
// step 4 at 16384×65) and a float4 copy, each wrapped in a kernel that first runs a mode:
//
// Versions:
//   mode 0   nothing (a plain launch)
//   mode 1   griddepcontrol.wait (launched with the PDL attribute)
//   mode 2   griddepcontrol.launch_dependents, then the wait
//   mode 3   the trigger, thread 0's L2 prefetch of the block's rows, then the wait
//   mode 4   the prefetch, then the wait (no trigger)
//   mode 5   the prefetch, the wait, then the trigger (one kernel deep)
//   mode 6   the wait, then the trigger (no prefetch)
//   LAB_PART=3   modes 1 and 5 on the softmax family (backward too) and the LayerNorm backward
//                with grids of 264, 260, 256 and 248 blocks
// The wait comes before any load, so every mode is as safe as a plain launch in stream order.
//
// Timing: lab_common.cuh's streamed method on a created stream. What it found and where it
// went: dev/labs/README.md; raw output docs/data/pdl_lab_h100_prefetch.txt.
//
// Build and run on the GPU host (sm_90: griddepcontrol is Hopper PTX):  OUT=dir bash dev/labs/pdl_lab.sh
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "../kernels/layernorm/02_warp_welford.cu"
#include "../kernels/layernorm/03_row_registers.cu"
#include "../kernels/layernorm/04_streaming.cu"
#include "../kernels/loss/01_block_per_row.cu"
#include "../kernels/loss/02_saved_stats.cu"
#include "../kernels/loss/03_registers.cu"
#include "../kernels/loss/04_fused_mean.cu"
#include "../kernels/softmax/01_block_per_row.cu"
#include "../kernels/softmax/02_online_warp.cu"
#include "../kernels/softmax/03_warp_registers.cu"
#include "../kernels/softmax/04_streaming.cu"
#include "lab_common.cuh"

// One thread asks L2 to fetch [p, p + bytes) (the 16-byte-aligned part inside it) from DRAM;
// a hint: it loads nothing into registers, and L2 is where every SM's writes land, so a line
// fetched early still sees what the kernel before writes into it.
__device__ __forceinline__ void l2_prefetch(const void* p, long long bytes) {
    unsigned long long a = (unsigned long long)p, e = a + (unsigned long long)bytes;
    a = (a + 15) & ~15ull;
    e &= ~15ull;
    for (; a < e; a += 65536) {
        const unsigned n = (unsigned)(e - a < 65536 ? e - a : 65536);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"(n) : "memory");
    }
}

// mode 3: trigger, prefetch this block's input, wait; mode 4: prefetch, wait (no trigger).
template <int MODE>
__device__ __forceinline__ void pdl_enter(const void* p = nullptr, long long bytes = 0, const void* p2 = nullptr,
                                          long long bytes2 = 0) {
    if (MODE == 2 || MODE == 3) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if ((MODE == 3 || MODE == 4 || MODE == 5) && threadIdx.x == 0) {
        l2_prefetch(p, bytes);
        l2_prefetch(p2, bytes2);
    }
    if (MODE >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (MODE >= 5) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

template <int MODE>
__global__ void __launch_bounds__(256) k_copy(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    const long long b0 = (long long)blockIdx.x * blockDim.x;
    pdl_enter<MODE>(x + b0, (b0 + blockDim.x <= n4 ? blockDim.x : n4 - b0) * 16);
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) y[i] = x[i];
}
template <int MODE>
__global__ void __launch_bounds__(256) k_ln(const float* __restrict__ x, const float* __restrict__ gamma,
                                            const float* __restrict__ beta, float* __restrict__ y,
                                            float* __restrict__ mean, float* __restrict__ rstd, long long rows,
                                            long long cols, float eps) {
    pdl_enter<MODE>(x + (long long)blockIdx.x * 8 * cols, 8 * cols * 4);
    ln3_fwd_row<4, 6, true>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
}
template <int MODE>
__global__ void __launch_bounds__(256) k_softmax(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                 long long cols, int log_out) {
    pdl_enter<MODE>(x + (long long)blockIdx.x * 16 * cols, 16 * cols * 4);
    if (log_out) {
        softmax3_row<16, 1, 8, false, true>(x, y, rows, cols);
    } else {
        softmax3_row<16, 1, 8, false, false>(x, y, rows, cols);
    }
}
template <int MODE>
__global__ void __launch_bounds__(256) k_softmax_bwd(const float* __restrict__ y, const float* __restrict__ g,
                                                     float* __restrict__ dx, long long rows, long long cols,
                                                     int log_out) {
    pdl_enter<MODE>(y + (long long)blockIdx.x * 16 * cols, 16 * cols * 4, g + (long long)blockIdx.x * 16 * cols,
                    16 * cols * 4);
    softmax3_bwd_row<16, 1, 8>(y, g, dx, rows, cols, log_out);
}
template <int MODE>
__global__ void __launch_bounds__(256) k_ce(const float* __restrict__ x, const long long* __restrict__ t,
                                            float* __restrict__ mean, float* __restrict__ stats,
                                            unsigned long long* words, long long rows, long long cols,
                                            long long* err) {
    pdl_enter<MODE>(x + (long long)blockIdx.x * 32 * cols, 32 * cols * 4, t + blockIdx.x * 32, 32 * 8);
    ce3_fwd_row<16, 1, 8, CeMean, ce4_rows(16, 1, 8)>(x, t, mean, stats, words, rows, cols, err);
}

template <int MODE>
__global__ void __launch_bounds__(256, 2) k_lnb(const float* __restrict__ x, const float* __restrict__ gamma,
                                               const float* __restrict__ g, const float* __restrict__ mean,
                                               const float* __restrict__ rstd, float* __restrict__ dx,
                                               float* __restrict__ partial, long long rows, long long cols,
                                               float* __restrict__ dgamma, float* __restrict__ dbeta, int* counters) {
    // the block's first round of rows: 4 pairs of warps, 4 rows of x and of g
    pdl_enter<MODE>(x + (long long)blockIdx.x * 4 * cols, 4 * cols * 4, g + (long long)blockIdx.x * 4 * cols,
                    4 * cols * 4);
    ln3_bwd<4, 3, 64>(x, gamma, g, mean, rstd, dx, partial, rows, cols, dgamma, dbeta, counters);
}

static cudaStream_t S;

// run(mode, k<mode>) for the modes 0–6 of a kernel template k.
#define EACH_MODE(run, k) \
    do {                  \
        run(0, k<0>);     \
        run(1, k<1>);     \
        run(2, k<2>);     \
        run(3, k<3>);     \
        run(4, k<4>);     \
        run(5, k<5>);     \
        run(6, k<6>);     \
    } while (0)

// Launches k on S; every mode but 0 with the PDL attribute.
template <class... KA, class... A>
static void go_smem(int mode, size_t smem, void (*k)(KA...), unsigned grid, A... a) {
    lab_launch(S, mode != 0, smem, k, grid, a...);
}
template <class... KA, class... A>
static void go(int mode, void (*k)(KA...), unsigned grid, A... a) {
    go_smem(mode, 0, k, grid, a...);
}

static double streamed(const std::function<void(int)>& launch, int sets) {
    return lab_streamed(launch, sets, lab_per(20), [] { blocker<<<1, 1, 0, S>>>(2000000); }, S);
}

static bool same_bits(const float* a, const float* b, size_t n) {
    std::vector<float> ha(n), hb(n);
    CK(cudaMemcpy(ha.data(), a, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b, n * 4, cudaMemcpyDeviceToHost));
    return memcmp(ha.data(), hb.data(), n * 4) == 0;
}

int main() {
    const cudaDeviceProp prop = lab_open(&S);
    const size_t big = 1ull << 29;  // two buffers of 2 GiB: the copy bandwidth, then the lab's data
    float *a = dalloc(big), *b = dalloc(big);
    const double copy_bw = lab_copy_bw(a, b, S, streamed);
    unsigned s = 12345;
    auto fill = [&](float* p, size_t n, float lo, float hi) { lab_fill(p, n, lo, hi, s); };
    // same: µs of a cudaMemcpyAsync of the same bytes (0: not measured, the column left out)
    auto report = [&](const char* name, int mode, double us, double bytes, double same) {
        printf("%-34s mode %d  %8.2f us  %6.0f GB/s  %5.1f %% of copy", name, mode, us, bytes / us / 1e3,
               100.0 * bytes / us / 1e3 / copy_bw);
        if (same > 0) printf("  %5.1f %% of same-size copy", 100.0 * same / us);
        printf("\n");
    };
    auto same_copy = [&](size_t bytes_each_way, int sets) {
        return streamed(
            [&](int i) {
                CK(cudaMemcpyAsync(b + (size_t)i * bytes_each_way / 4, a + (size_t)i * bytes_each_way / 4, bytes_each_way,
                                   cudaMemcpyDeviceToDevice, S));
            },
            sets);
    };

    // LayerNorm backward 16384×768, step 4: modes 0–6 at 2 blocks an SM (sweep false), or
    // modes 1 and 5 by grid size (sweep true, part 3).
    auto layernorm_bwd = [&](bool sweep) {
        const long long R = 16384, C = 768, N = R * C;
        const int sets = 2, sms = prop.multiProcessorCount;
        const unsigned grid = 2 * sms;  // every block resident (the library's most)
        const size_t smem = 4 * 2 * 64 * 3 * 4 * 4;
        float *gamma = dalloc(C), *mean = dalloc(R * sets), *rstd = dalloc(R * sets), *partial = dalloc(2 * grid * C);
        float *dg = dalloc(C), *db = dalloc(C), *dg0 = dalloc(C), *ref = dalloc(N);
        int* counters = dalloc<int>(2);
        CK(cudaMemset(counters, 0, 8));
        fill(gamma, C, 0.5f, 1.5f);
        fill(mean, R * sets, -0.1f, 0.1f);
        fill(rstd, R * sets, 0.8f, 1.2f);
        fill(a, 2 * N * sets, -3.0f, 3.0f);  // x sets, then g sets
        float* gsets = a + N * sets;
        void (*ks[])(const float*, const float*, const float*, const float*, const float*, float*, float*,
                     long long, long long, float*, float*, int*) = {k_lnb<0>, k_lnb<1>, k_lnb<2>, k_lnb<3>,
                                                                     k_lnb<4>, k_lnb<5>, k_lnb<6>};
        for (auto k : ks) {
            CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        }
        const double bytes = 3.0 * N * 4 + 2.0 * R * 4;
        if (sweep) {  // part 3: modes 1 and 5 by grid size (at most 2 blocks an SM, all resident)
            for (unsigned gr : {2u * sms, 256u, 2u * sms - 4, 248u, 2u * sms, 256u}) {
                for (int mode : {1, 5}) {
                    const double t = streamed(
                        [&](int i) {
                            go_smem(mode, smem, ks[mode], gr, a + i * N, gamma, gsets + i * N, mean + i * R,
                                    rstd + i * R, b + i * N, partial, R, C, dg, db, counters);
                        },
                        sets);
                    char name[64];
                    snprintf(name, sizeof name, "layernorm bwd grid %u", gr);
                    report(name, mode, t, bytes, 0.0);
                }
            }
            return;
        }
        const double same = same_copy(N * 4 * 3 / 2, sets);  // reads x, g; writes dx
        go_smem(0, smem, k_lnb<0>, grid, a, gamma, gsets, mean, rstd, ref, partial, R, C, dg0, db, counters);
        CK(cudaStreamSynchronize(S));
        auto run = [&](int mode, auto k) {
            CK(cudaMemsetAsync(b, 0xff, N * 4, S));
            go_smem(mode, smem, k, grid, a, gamma, gsets, mean, rstd, b, partial, R, C, dg, db, counters);
            CK(cudaStreamSynchronize(S));
            if (!same_bits(ref, b, N) || !same_bits(dg0, dg, C)) printf("  !! mode %d differs\n", mode);
            const double t = streamed(
                [&](int i) {
                    go_smem(mode, smem, k, grid, a + i * N, gamma, gsets + i * N, mean + i * R, rstd + i * R,
                            b + i * N, partial, R, C, dg, db, counters);
                },
                sets);
            report("layernorm bwd 16384x768 step 4", mode, t, bytes, same);
        };
        for (int mode = 0; mode < 7; ++mode) run(mode, ks[mode]);
    };

    // ---- part 3 (LAB_PART=3): modes 1 and 5 on the softmax family's backward at 65536×65 and
    // the LayerNorm backward's grid ----
    if (getenv("LAB_PART") && atoi(getenv("LAB_PART")) == 3) {
        const long long R = 65536, C = 65, N = R * C;
        const int sets = 6;
        float* ref = dalloc(N);
        fill(a, 2 * N * sets, -3.0f, 0.5f);  // y sets (log-probabilities or probabilities), then g sets
        float* gs = a + N * sets;
        const unsigned grid = R / 16;
        for (int log_out : {0, 1}) {
            go(0, k_softmax_bwd<0>, grid, a, gs, ref, R, C, log_out);
            CK(cudaStreamSynchronize(S));
            auto run = [&](int mode, auto k) {
                CK(cudaMemsetAsync(b, 0xff, N * 4, S));
                go(mode, k, grid, a, gs, b, R, C, log_out);
                CK(cudaDeviceSynchronize());
                if (!same_bits(ref, b, N)) printf("  !! mode %d differs\n", mode);
                const double t = streamed(
                    [&](int i) { go(mode, k, grid, a + i * N, gs + i * N, b + i * N, R, C, log_out); }, sets);
                report(log_out ? "log-softmax bwd 65536x65 step 3" : "softmax bwd 65536x65 step 3", mode, t,
                       3.0 * N * 4, 0.0);
            };
            run(1, k_softmax_bwd<1>);
            run(5, k_softmax_bwd<5>);
            run(1, k_softmax_bwd<1>);
            run(5, k_softmax_bwd<5>);
        }
        for (int log_out : {0, 1}) {
            auto run = [&](int mode, auto k) {
                const double t = streamed([&](int i) { go(mode, k, grid, a + i * N, b + i * N, R, C, log_out); }, sets);
                report(log_out ? "log-softmax fwd 65536x65 step 3" : "softmax fwd 65536x65 step 3", mode, t,
                       2.0 * N * 4, 0.0);
            };
            run(1, k_softmax<1>);
            run(5, k_softmax<5>);
        }
        layernorm_bwd(true);
        return 0;
    }

    // ---- copy kernel, 2 × 50 MB (the LayerNorm's bytes) and 2 × 17 MB ----
    for (long long n : {16384LL * 768, 65536LL * 65 + 3}) {
        const long long n4 = n / 4;
        const int sets = (int)std::max<long long>(1, (256ll << 20) / (n * 8) + 1);
        const double same = same_copy(n4 * 16, sets);
        char name[64];
        snprintf(name, sizeof name, "copy kernel %lld floats", n4 * 4);
        auto run = [&](int mode, auto k) {
            const double t = streamed(
                [&](int i) {
                    go(mode, k, (unsigned)((n4 + 255) / 256), (const float4*)(a + (size_t)i * n4 * 4),
                       (float4*)(b + (size_t)i * n4 * 4), n4);
                },
                sets);
            report(name, mode, t, 2.0 * n4 * 16, same);
        };
        EACH_MODE(run, k_copy);
    }

    // ---- LayerNorm forward 16384×768, step 4 ----
    {
        const long long R = 16384, C = 768, N = R * C;
        const int sets = 3;
        float *gamma = dalloc(C), *beta = dalloc(C), *mean = dalloc(R), *rstd = dalloc(R), *ref = dalloc(N);
        fill(gamma, C, 0.5f, 1.5f);
        fill(beta, C, -0.5f, 0.5f);
        fill(a, N * sets, -3.0f, 3.0f);
        const double same = same_copy(N * 4, sets);
        const double bytes = 2.0 * N * 4 + 2.0 * R * 4;
        go(0, k_ln<0>, R / 8, a, gamma, beta, ref, mean, rstd, R, C, 1e-5f);
        CK(cudaStreamSynchronize(S));
        auto run = [&](int mode, auto k) {
            CK(cudaMemsetAsync(b, 0xff, N * 4, S));  // poison, in stream order
            go(mode, k, R / 8, a, gamma, beta, b, mean, rstd, R, C, 1e-5f);
            CK(cudaDeviceSynchronize());
            if (!same_bits(ref, b, N)) printf("  !! mode %d differs\n", mode);
            const double t = streamed(
                [&](int i) { go(mode, k, R / 8, a + i * N, gamma, beta, b + i * N, mean, rstd, R, C, 1e-5f); }, sets);
            report("layernorm fwd 16384x768 step 4", mode, t, bytes, same);
        };
        EACH_MODE(run, k_ln);
    }

    // ---- LayerNorm backward 16384×768, step 4 (pairs of warps, column sum fused; 2 blocks an SM) ----
    layernorm_bwd(false);

    // ---- softmax 65536×65, step 3 (G 16, scalar, NV 8) ----
    {
        const long long R = 65536, C = 65, N = R * C;
        const int sets = 8;
        float* ref = dalloc(N);
        fill(a, N * sets, -6.0f, 6.0f);
        const double same = same_copy(N * 4, sets);
        const unsigned grid = R / 16;
        go(0, k_softmax<0>, grid, a, ref, R, C, 0);
        CK(cudaStreamSynchronize(S));
        auto run = [&](int mode, auto k) {
            CK(cudaMemsetAsync(b, 0xff, N * 4, S));  // poison, in stream order
            go(mode, k, grid, a, b, R, C, 0);
            CK(cudaDeviceSynchronize());
            if (!same_bits(ref, b, N)) printf("  !! mode %d differs\n", mode);
            const double t = streamed([&](int i) { go(mode, k, grid, a + i * N, b + i * N, R, C, 0); }, sets);
            report("softmax 65536x65 step 3", mode, t, 2.0 * N * 4, same);
        };
        EACH_MODE(run, k_softmax);
    }

    // ---- cross-entropy 16384×65, step 4 (mean fused) ----
    {
        const long long R = 16384, C = 65, N = R * C;
        const int sets = 60;
        std::vector<long long> ht(R);
        for (auto& v : ht) v = ((s = s * 1664525u + 1013904223u) >> 8) % C;
        long long *t = dalloc<long long>(R), *err = dalloc<long long>(4);
        CK(cudaMemcpy(t, ht.data(), R * 8, cudaMemcpyHostToDevice));
        CK(cudaMemset(err, 0, 32));
        float *stats = dalloc(2 * R), *m = dalloc(4);
        unsigned long long* words = dalloc<unsigned long long>(R);  // zero between kernels
        CK(cudaMemset(words, 0, R * 8));
        fill(a, N * sets, -6.0f, 6.0f);
        const double same = same_copy((N * 4 + R * 8) / 2, sets);
        const unsigned grid = (R / 16 + 1) / 2;
        float want = 0;
        go(0, k_ce<0>, grid, a, t, m, stats, words, R, C, err);
        CK(cudaStreamSynchronize(S));
        CK(cudaMemcpy(&want, m, 4, cudaMemcpyDeviceToHost));
        auto run = [&](int mode, auto k) {
            CK(cudaMemsetAsync(m, 0xff, 4, S));  // NaN: a mean never written shows
            go(mode, k, grid, a, t, m, stats, words, R, C, err);
            CK(cudaStreamSynchronize(S));
            float got;
            CK(cudaMemcpy(&got, m, 4, cudaMemcpyDeviceToHost));
            if (memcmp(&got, &want, 4)) printf("  !! mode %d mean %g against %g\n", mode, got, want);
            const double us = streamed(
                [&](int i) { go(mode, k, grid, a + i * N, t, m, stats, words, R, C, err); }, sets);
            report("cross-entropy 16384x65 step 4", mode, us, N * 4.0 + R * 8.0 + R * 8.0, same);
        };
        EACH_MODE(run, k_ce);
    }
    return 0;
}
