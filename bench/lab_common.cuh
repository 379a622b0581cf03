// lab_common.cuh — what the labs in bench/ share: the CUDA error check, the blocker kernel that
// keeps the GPU busy while the host queues a timed batch (bench_memory's "streamed" timing), and
// a pair of events.
#pragma once
#include <cstdio>
#include <cstdlib>
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
