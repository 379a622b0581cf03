// Floor lab: what is the least time a kernel that reads cross-entropy 16384×65's logits can
// take, launched back to back with PDL as bench_memory times it, and so how close to a copy can
// a kernel of that size get? Not part of the library.
//
// Versions (each entry × each body, over 128 … 1024 threads a block and 1 … 16 float4 a thread):
//   entries   plain launch (no PDL); PDL wait only; wait, then trigger; thread 0 prefetches the
//             block's bytes to L2, wait, trigger (pdl.cuh's early entry); prefetch, trigger, wait
//   empty     the entry alone
//   read      flat float4 loads, all issued before any is used, a float a block out
//   atomic    the read with one float atomicAdd a block into one address (a fused mean's least)
//   rw        the read with the bytes written back (the backward's traffic)
//   step 4    cross-entropy step 4 at 16384×65 (the library's row code) with each entry,
//             checked against the library's kernels bit for bit
//
// Timing: lab_common.cuh's streamed method, 200 launches a batch, the logits rotated over 32
// sets. What it found and where it went: dev/labs/README.md; raw output
// docs/data/floor_lab_h100.txt.
//
// Build and run on the GPU host (sm_90):  OUT=dir bash dev/labs/floor_lab.sh
#include <cstdio>
#include <cuda_runtime.h>

#include "../kernels/loss/01_block_per_row.cu"  // the library's cross-entropy kernels (and common.cuh)
#include "../kernels/loss/02_saved_stats.cu"
#include "../kernels/loss/03_registers.cu"
#include "../kernels/loss/04_fused_mean.cu"
#include "lab_common.cuh"

namespace {

enum Entry { PLAIN = 0, WAIT = 1, TRIGGER = 2, PREFETCH = 3, EARLY = 4 };
enum Out { EMPTY = 0, SUM = 1, ATOMIC = 2, COPY = 3 };

// The kernel's work after its entry: the loads, then the block sum, the atomic or the stores.
template <int V, int OUT>
__device__ __forceinline__ void body(const float4* __restrict__ x, float* __restrict__ out, float4* __restrict__ y,
                                     long long n4, long long first) {
    float4 v[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
        const long long j = first + threadIdx.x + (long long)i * blockDim.x;
        v[i] = j < n4 ? x[j] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if (OUT == COPY) {
#pragma unroll
        for (int i = 0; i < V; ++i) {
            const long long j = first + threadIdx.x + (long long)i * blockDim.x;
            if (j < n4) y[j] = v[i];
        }
        return;
    }
    __shared__ float scratch[32];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < V; ++i) s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    s = camel::block_sum(s, scratch);
    if (threadIdx.x == 0) {
        if (OUT == SUM) out[blockIdx.x] = s;
        else atomicAdd(out, s);
    }
}

// Every kernel's entry after its prefetch (if ENTRY ≥ PREFETCH): the PDL wait, and the trigger
// where ENTRY puts it.
template <int ENTRY>
__device__ __forceinline__ void lab_enter() {
    if (ENTRY == EARLY) CAMEL_PDL_TRIGGER();
    CAMEL_PDL_WAIT();
    if (ENTRY == TRIGGER || ENTRY == PREFETCH) CAMEL_PDL_TRIGGER();
}

// A block covers blockDim.x · V consecutive float4; thread i loads float4 i, i + blockDim.x, …
template <int V, int ENTRY, int OUT>
__global__ void k_floor(const float4* __restrict__ x, float* __restrict__ out, float4* __restrict__ y, long long n4) {
    const long long first = (long long)blockIdx.x * blockDim.x * V;
    if (ENTRY >= PREFETCH && threadIdx.x == 0 && OUT != EMPTY) {
        const long long left = n4 - first;
        camel::l2_prefetch(x + first, 16 * (left < (long long)blockDim.x * V ? left : (long long)blockDim.x * V));
    }
    lab_enter<ENTRY>();
    if constexpr (OUT != EMPTY) body<V, OUT>(x, out, y, n4, first);
}

using Kernel = void (*)(const float4*, float*, float4*, long long);

// Cross-entropy 16384×65 step 4 (kernels/loss/: 16 lanes a row, 5 floats a lane; forward 2
// rows a group, 32 rows a block; backward 16 rows a block) with another entry: ENTRY as above.
// WAIT is the library's old entry; PREFETCH its entry now (the library's ce3_prefetch: the
// block's logits, and the backward's targets and stats, asked of L2 before the wait).
constexpr int CE_R = ce4_rows(16, 1, 5);
template <int ENTRY>
__global__ void __launch_bounds__(256) lab_ce_fwd(const float* __restrict__ x, const long long* __restrict__ t,
                                                  float* __restrict__ mean, float* __restrict__ stats,
                                                  unsigned long long* words, long long rows, long long cols,
                                                  long long* err) {
    if (ENTRY >= PREFETCH) ce3_prefetch<16, CE_R>(x, nullptr, nullptr, rows, cols);
    lab_enter<ENTRY>();
    ce3_fwd_row<16, 1, 5, CeMean, CE_R>(x, t, mean, stats, words, rows, cols, err);
}
template <int ENTRY>
__global__ void __launch_bounds__(256) lab_ce_bwd(const float* __restrict__ x, const long long* __restrict__ t,
                                                  const float* __restrict__ stats, const float* __restrict__ g,
                                                  float* __restrict__ dx, long long rows, long long cols, long long* err) {
    if (ENTRY >= PREFETCH) ce3_prefetch<16, 1>(x, t, stats, rows, cols);
    lab_enter<ENTRY>();
    ce3_bwd_row<16, 1, 5, true>(x, t, stats, g, dx, rows, cols, err);
}

template <int V, int ENTRY>
Kernel pick(int out) {
    switch (out) {
        case EMPTY: return k_floor<V, ENTRY, EMPTY>;
        case SUM: return k_floor<V, ENTRY, SUM>;
        case ATOMIC: return k_floor<V, ENTRY, ATOMIC>;
        default: return k_floor<V, ENTRY, COPY>;
    }
}

template <int V>
Kernel pick(int entry, int out) {
    switch (entry) {
        case PLAIN: return pick<V, PLAIN>(out);
        case WAIT: return pick<V, WAIT>(out);
        case TRIGGER: return pick<V, TRIGGER>(out);
        case PREFETCH: return pick<V, PREFETCH>(out);
        default: return pick<V, EARLY>(out);
    }
}

Kernel pick(int v, int entry, int out) {
    switch (v) {
        case 1: return pick<1>(entry, out);
        case 2: return pick<2>(entry, out);
        case 4: return pick<4>(entry, out);
        case 8: return pick<8>(entry, out);
        default: return pick<16>(entry, out);
    }
}

cudaStream_t S;

}  // namespace

int main() {
    const cudaDeviceProp prop = lab_open(&S);
    const size_t big = 1ull << 29;
    float *a = dalloc(big), *b = dalloc(big);
    auto streamed = [](const std::function<void(int)>& launch, int sets, int per = 200) {
        return lab_streamed(launch, sets, per, [] { blocker<<<1, 1, 0, S>>>(2000000); }, S);
    };
    const double copy_bw = lab_copy_bw(a, b, S, [&](const std::function<void(int)>& l, int s) { return streamed(l, s, 20); });
    const long long rows = 16384, cols = 65, n = rows * cols, n4 = n / 4;  // 65 · 16384 is a multiple of 4
    const int sets = 32;
    unsigned seed = 7;
    lab_fill(a, n * sets, -1.0f, 1.0f, seed);
    std::vector<float> h(n);
    CK(cudaMemcpy(h.data(), a, n * 4, cudaMemcpyDeviceToHost));
    double want = 0;
    for (float f : h) want += f;
    float* parts = dalloc(1 << 16);
    float* acc = dalloc(1);
    const char* entries[] = {"plain", "PDL wait", "wait, trigger", "prefetch, wait, trigger", "prefetch, trigger, wait"};
    printf("cross-entropy 16384x65's logits: %.2f MB; 90 %% of copy (%.0f GB/s) = %.2f us to read them\n\n",
           n * 4 / 1e6, copy_bw, (double)n * 4 / (0.9 * copy_bw) / 1e3);
    printf("%-24s %5s %3s %6s %6s | %7s | %7s %6s | %7s %6s | %7s %6s | check\n", "entry", "block", "V", "blocks",
           "waves", "empty", "read", "%copy", "+atomic", "%copy", "copy", "%copy");
    double best_read = 1e9, best_atomic = 1e9, best_copy = 1e9;
    for (int entry : {PLAIN, WAIT, TRIGGER, PREFETCH, EARLY}) {
        for (unsigned threads : {128u, 256u, 512u, 1024u}) {
            for (int v : {1, 2, 4, 8, 16}) {
                const unsigned blocks = (unsigned)((n4 + (long long)threads * v - 1) / ((long long)threads * v));
                if (blocks > (1u << 16)) continue;
                bool fits = true;  // 16 float4 and the prefetch at 1024 threads: too many registers
                for (int out : {EMPTY, SUM, ATOMIC, COPY}) {
                    cudaFuncAttributes at;
                    CK(cudaFuncGetAttributes(&at, pick(v, entry, out)));
                    fits = fits && at.maxThreadsPerBlock >= (int)threads;
                }
                if (!fits) {
                    printf("%-24s %5u %3d %6u: too many registers a thread for blocks of %u\n", entries[entry], threads, v,
                           blocks, threads);
                    continue;
                }
                double us[4];
                for (int out : {EMPTY, SUM, ATOMIC, COPY}) {
                    const Kernel k = pick(v, entry, out);
                    float* o = out == ATOMIC ? acc : parts;  // the atomics all go to one float
                    auto launch = [&](int i) {
                        lab_launch_block(S, entry != PLAIN, 0, k, blocks, threads,
                                         reinterpret_cast<const float4*>(a + (size_t)i * n), o,
                                         reinterpret_cast<float4*>(b + (size_t)i * n), n4);
                    };
                    us[out] = streamed(launch, sets);
                }
                // Check: the block sums of set 0 add up to the host's sum; the copy of set 0 is exact.
                lab_launch_block(S, entry != PLAIN, 0, pick(v, entry, SUM), blocks, threads,
                                 reinterpret_cast<const float4*>(a), parts, reinterpret_cast<float4*>(b), n4);
                CK(cudaMemsetAsync(b, 0xff, n * 4, S));
                lab_launch_block(S, entry != PLAIN, 0, pick(v, entry, COPY), blocks, threads,
                                 reinterpret_cast<const float4*>(a), parts, reinterpret_cast<float4*>(b), n4);
                CK(cudaStreamSynchronize(S));
                std::vector<float> hp(blocks);
                CK(cudaMemcpy(hp.data(), parts, blocks * 4, cudaMemcpyDeviceToHost));
                double got = 0;
                for (float f : hp) got += f;
                const double copy_diff = max_diff(a, b, n);
                int per_sm = 0;
                CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pick(v, entry, SUM), threads, 0));
                const double rb = (double)n * 4, cb = 2.0 * n * 4;
                auto pc = [&](double bytes, double t) { return 100.0 * bytes / t / 1e3 / copy_bw; };
                printf("%-24s %5u %3d %6u %6.2f | %7.2f | %7.2f %5.1f%% | %7.2f %5.1f%% | %7.2f %5.1f%% | sum %.1e copy %.0e\n",
                       entries[entry], threads, v, blocks, (double)blocks / (per_sm * prop.multiProcessorCount), us[EMPTY],
                       us[SUM], pc(rb, us[SUM]), us[ATOMIC], pc(rb, us[ATOMIC]), us[COPY], pc(cb, us[COPY]),
                       std::fabs(got - want) / std::fabs(want), copy_diff);
                best_read = std::min(best_read, us[SUM]);
                best_atomic = std::min(best_atomic, us[ATOMIC]);
                best_copy = std::min(best_copy, us[COPY]);
            }
        }
    }
    printf("\nbest: read %.2f us (%.1f %% of copy), read + one atomic a block %.2f us (%.1f %%), read and write %.2f us (%.1f %%)\n",
           best_read, 100.0 * n * 4 / best_read / 1e3 / copy_bw, best_atomic, 100.0 * n * 4 / best_atomic / 1e3 / copy_bw,
           best_copy, 100.0 * 2 * n * 4 / best_copy / 1e3 / copy_bw);

    // Cross-entropy 16384×65 step 4, the library's entry (PDL wait) against the others.
    {
        const int ce_sets = 16;  // 16 · 2 · 4.3 MB > L2
        std::vector<long long> ht(rows);
        for (auto& v : ht) v = ((seed = seed * 1664525u + 1013904223u) >> 8) % cols;
        long long *t = dalloc<long long>(rows), *err = dalloc<long long>(4);
        CK(cudaMemcpy(t, ht.data(), rows * 8, cudaMemcpyHostToDevice));
        CK(cudaMemset(err, 0, 32));
        float *stats = dalloc(2 * rows * ce_sets), *mean = dalloc(1), *g = dalloc(1);
        unsigned long long* words = dalloc<unsigned long long>(rows);  // zero between kernels
        CK(cudaMemset(words, 0, rows * 8));
        const float one = 1.0f;
        CK(cudaMemcpy(g, &one, 4, cudaMemcpyHostToDevice));
        using Fwd = void (*)(const float*, const long long*, float*, float*, unsigned long long*, long long, long long,
                             long long*);
        using Bwd = void (*)(const float*, const long long*, const float*, const float*, float*, long long, long long, long long*);
        const Fwd fwds[] = {lab_ce_fwd<PLAIN>, lab_ce_fwd<WAIT>, lab_ce_fwd<TRIGGER>, lab_ce_fwd<PREFETCH>, lab_ce_fwd<EARLY>};
        const Bwd bwds[] = {lab_ce_bwd<PLAIN>, lab_ce_bwd<WAIT>, lab_ce_bwd<TRIGGER>, lab_ce_bwd<PREFETCH>, lab_ce_bwd<EARLY>};
        const unsigned fb = (unsigned)((rows + 16 * CE_R - 1) / (16 * CE_R)), bb = (unsigned)((rows + 15) / 16);
        auto fwd = [&](int e, int i, const Fwd k) {
            lab_launch_block(S, e != PLAIN, 0, k, fb, 256u, a + (size_t)i * n, (const long long*)t, mean,
                             stats + 2 * rows * (i % ce_sets), words, rows, cols, err);
        };
        auto bwd = [&](int e, int i, const Bwd k) {
            lab_launch_block(S, e != PLAIN, 0, k, bb, 256u, (const float*)a + (size_t)i * n, (const long long*)t,
                             (const float*)stats + 2 * rows * (i % ce_sets), (const float*)g, b + (size_t)i * n, rows,
                             cols, err);
        };
        // The library's kernels give the reference: the mean, and the gradient of set 0.
        const Fwd lib_f = ce4_fwd_g16_v1_n5_f32;
        const Bwd lib_b = ce4_bwd_g16_v1_n5_f32;
        for (int i = 0; i < ce_sets; ++i) fwd(WAIT, i, lib_f);
        float want_mean;
        fwd(WAIT, 0, lib_f);
        CK(cudaStreamSynchronize(S));  // S does not wait on the null stream, nor it on S
        CK(cudaMemcpy(&want_mean, mean, 4, cudaMemcpyDeviceToHost));
        float* ref = dalloc(n);
        bwd(WAIT, 0, lib_b);
        CK(cudaMemcpyAsync(ref, b, n * 4, cudaMemcpyDeviceToDevice, S));
        CK(cudaStreamSynchronize(S));
        printf("\ncross-entropy 16384x65 step 4 (mean fused), %d sets rotated; %% of copy counts the logits "
               "(forward) or the logits and the gradient (backward), as bench_memory does:\n", ce_sets);
        for (int rep = 0; rep < 2; ++rep) {
            for (int e : {PLAIN, WAIT, TRIGGER, PREFETCH, EARLY}) {
                CK(cudaMemset(mean, 0xff, 4));
                CK(cudaMemsetAsync(b, 0xff, n * 4, S));
                fwd(e, 0, fwds[e]);
                bwd(e, 0, bwds[e]);
                CK(cudaStreamSynchronize(S));
                float got;
                CK(cudaMemcpy(&got, mean, 4, cudaMemcpyDeviceToHost));
                const double dd = max_diff(ref, b, n);
                const double tf = streamed([&](int i) { fwd(e, i, fwds[e]); }, ce_sets);
                const double tb = streamed([&](int i) { bwd(e, i, bwds[e]); }, ce_sets);
                printf("%-24s forward %5.2f us %5.1f %% of copy | backward %5.2f us %5.1f %% | mean - library's %.1e, "
                       "gradient diff %.1e\n",
                       entries[e], tf, 100.0 * n * 4 / tf / 1e3 / copy_bw, tb, 100.0 * 2 * n * 4 / tb / 1e3 / copy_bw,
                       (double)got - want_mean, dd);
            }
            const double tf = streamed([&](int i) { fwd(WAIT, i, lib_f); }, ce_sets);
            const double tb = streamed([&](int i) { bwd(WAIT, i, lib_b); }, ce_sets);
            printf("%-24s forward %5.2f us %5.1f %% of copy | backward %5.2f us %5.1f %%\n", "library (ce4_*_g16_v1_n5)",
                   tf, 100.0 * n * 4 / tf / 1e3 / copy_bw, tb, 100.0 * 2 * n * 4 / tb / 1e3 / copy_bw);
        }
        std::vector<unsigned long long> hw(rows);
        long long he[4];
        CK(cudaMemcpy(hw.data(), words, rows * 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(he, err, 32, cudaMemcpyDeviceToHost));
        unsigned long long left = 0;
        for (unsigned long long w : hw) left |= w;
        printf("mean's words after the runs: %s (must be zero); index errors recorded: %lld (must be 0)\n",
               left ? "NOT ZERO" : "zero", he[0]);
    }
    return 0;
}
