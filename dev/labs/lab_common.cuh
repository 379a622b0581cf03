// lab_common.cuh — what the labs in dev/labs/ share: the CUDA error check, the blocker kernel that
// keeps the GPU busy while the host queues a timed batch, a pair of events, and the streamed
// timing loop itself (bench_memory's "streamed" method).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);     \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

// Spins for `cycles` clocks on one thread (2000000: ~1 ms at 1.98 GHz).
__global__ void blocker(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

struct Timer {
    cudaEvent_t a, b;
    Timer() {
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
    }
};

// Launches a batch of `per` takes: LAB_PER from the environment, else `dflt`.
static int lab_per(int dflt) { return getenv("LAB_PER") ? atoi(getenv("LAB_PER")) : dflt; }

// The labs' timing (bench_memory's "streamed" method): median µs per launch of `launch(set)`
// over 20 batches of `per` back-to-back launches (set i % sets), each queued while `block` keeps
// the GPU busy (default: the spin blocker, ~1 ms at 1.98 GHz), after 3 · sets warm-up launches.
// `stream`: where the events go (the stream `launch` and `block` use).
static double lab_streamed(const std::function<void(int)>& launch, int sets, int per,
                           const std::function<void()>& block = [] { blocker<<<1, 1>>>(2000000); },
                           cudaStream_t stream = 0) {
    static Timer t;
    for (int i = 0; i < 3 * sets; ++i) launch(i % sets);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<double> v;
    for (int rep = 0; rep < 20; ++rep) {
        block();
        CK(cudaEventRecord(t.a, stream));
        for (int i = 0; i < per; ++i) launch(i % sets);
        CK(cudaEventRecord(t.b, stream));
        CK(cudaEventSynchronize(t.b));
        float ms;
        CK(cudaEventElapsedTime(&ms, t.a, t.b));
        v.push_back(ms * 1000.0 / per);
    }
    CK(cudaGetLastError());
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// n elements of device memory (floats unless T says otherwise).
template <class T = float>
static T* dalloc(size_t n) {
    T* p;
    CK(cudaMalloc(&p, n * sizeof(T)));
    return p;
}

// The largest difference between two device arrays of n floats (any NaN: infinity); `relative`:
// relative to |a| where |a| > 1.
static double max_diff(const float* a, const float* b, size_t n, bool relative = false) {
    std::vector<float> ha(n), hb(n);
    CK(cudaMemcpy(ha.data(), a, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b, n * 4, cudaMemcpyDeviceToHost));
    double m = 0;
    for (size_t i = 0; i < n; ++i) {
        double d = std::fabs((double)ha[i] - hb[i]);
        if (relative) d /= std::max(1.0, std::fabs((double)ha[i]));
        if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
    }
    return m;
}

// Fills n floats of device memory with uniform values in [lo, hi) from a fixed LCG (`seed`, kept
// between calls so successive fills differ and every run is the same).
static void lab_fill(float* p, size_t n, float lo, float hi, unsigned& seed) {
    std::vector<float> h(n);
    for (auto& v : h) v = lo + (hi - lo) * (((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f);
    CK(cudaMemcpy(p, h.data(), n * 4, cudaMemcpyHostToDevice));
}

// The copy bandwidth the labs report against: a 2 GiB cudaMemcpyAsync from `a` to `b` (each of
// 2^29 floats) on `stream`, warmed up, timed with `streamed` (the lab's timing on that stream);
// prints and returns GB/s, read + write.
static double lab_copy_bw(float* a, float* b, cudaStream_t stream,
                          const std::function<double(const std::function<void(int)>&, int)>& streamed) {
    const size_t big = 1ull << 29;
    CK(cudaMemset(a, 0, big * 4));
    for (int i = 0; i < 2; ++i) CK(cudaMemcpyAsync(b, a, big * 4, cudaMemcpyDeviceToDevice, stream));
    CK(cudaStreamSynchronize(stream));
    const double us = streamed([&](int) { CK(cudaMemcpyAsync(b, a, big * 4, cudaMemcpyDeviceToDevice, stream)); }, 1);
    const double bw = 2.0 * big * 4 / us / 1e3;
    printf("copy 2 GiB: %.1f us, %.0f GB/s\n\n", us, bw);
    return bw;
}

// Prints the GPU and makes the lab's stream (non-blocking: it does not wait on the null stream).
static cudaDeviceProp lab_open(cudaStream_t* stream) {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s (%d SMs)\n", prop.name, prop.multiProcessorCount);
    CK(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
    return prop;
}

// Launches k<<<grid, block, smem, stream>>>(a...), with the programmatic-dependent-launch
// attribute when `pdl` (Hopper: the kernel may be scheduled while the one before drains; its
// griddepcontrol.wait, if any, waits for that one's memory).
template <class... KA, class... A>
static void lab_launch_block(cudaStream_t stream, bool pdl, size_t smem, void (*k)(KA...), unsigned grid,
                             unsigned block, A... a) {
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3(grid);
    c.blockDim = dim3(block);
    c.dynamicSmemBytes = smem;
    c.stream = stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    c.attrs = at;
    c.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&c, k, ((KA)a)...));
}

// lab_launch_block with blocks of 256 threads.
template <class... KA, class... A>
static void lab_launch(cudaStream_t stream, bool pdl, size_t smem, void (*k)(KA...), unsigned grid, A... a) {
    lab_launch_block(stream, pdl, smem, k, grid, 256u, a...);
}

// Median milliseconds of `reps` launches of `launch`, each between its own pair of events, after
// `warmup` untimed launches (for kernels long enough that one launch's overhead does not count).
template <typename F>
static double lab_median_ms(F launch, int reps, int warmup) {
    static Timer t;
    for (int i = 0; i < warmup; ++i) launch();
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(t.a));
        launch();
        CK(cudaEventRecord(t.b));
        CK(cudaEventSynchronize(t.b));
        float ms;
        CK(cudaEventElapsedTime(&ms, t.a, t.b));
        v.push_back(ms);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

