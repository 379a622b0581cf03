// The multi-tensor table of optimizer steps 2–4 and the per-element update rules they share.
// The host passes a table of tensors (pointers, length, first block, per-tensor bias
// corrections and weight decay, so parameter groups with different decay share one launch);
// each block finds its tensor by binary search over `first_block` and updates one
// chunk of MT_CHUNK elements of it. Launchers: crates/camel-cuda/src/kernels/optim.rs.
#pragma once

#include "common/common.cuh"

struct MultiTensor {
    float* p;
    const float* g;
    float* s1;  // momentum buffer (SGD; null when momentum is 0) or Adam's m
    float* s2;  // Adam's v
    long long n;
    long long first_block;
    float bc1, bc2;  // Adam's 1 − β₁ᵗ, 1 − β₂ᵗ for this tensor
    float wd;        // this tensor's weight decay (its parameter group's)
    float step;      // a guarded step's count for this tensor (see guard_bias)
};

#define MT_CHUNK 4096  // elements per block (256 threads × 4 float4)

// The table travels in the launch's parameters (no upload, no allocation per optimizer step):
// up to MT_PARAM_MAX tensors a launch, 3840 bytes (64 a tensor), within the 4 KB
// kernel-parameter space with the scalar and guard arguments;
// more tensors take more launches. __grid_constant__ lets the kernel index it in place
// (constant bank) instead of copying it to each thread's local memory.
#define MT_PARAM_MAX 60
struct MultiTable {
    MultiTensor t[MT_PARAM_MAX];
};

__device__ __forceinline__ int find_tensor(const MultiTensor* __restrict__ ts, int count, long long b) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (ts[mid].first_block <= b) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// A guarded update (dynamic loss scaling, kernels/optim/loss_scale.cu) reads two device scalars
// that an unguarded one passes as null: `found_inf`, set when a gradient held an inf or NaN, skips
// the whole update (nothing is written); `skipped`, the number of steps skipped so far, makes
// Adam's step count t = step − skipped, so the bias corrections come from the steps that really
// happened without the host reading the flag.
__device__ __forceinline__ bool guard_skip(const float* found_inf) { return found_inf && *found_inf != 0.0f; }

// 1 − βᵗ as −expm1(t·ln β): no cancellation when βᵗ is close to 1 (β₂ = 0.999 at small t).
__device__ __forceinline__ void guard_bias(const float* skipped, float step, float beta1, float beta2, float& bc1,
                                           float& bc2) {
    if (!skipped) return;
    const float t = step - *skipped;
    bc1 = -expm1f(t * logf(beta1));
    bc2 = -expm1f(t * logf(beta2));
}

__device__ __forceinline__ float adam_one(float& p, float g, float& m, float& v, float lr, float beta1, float beta2,
                                          float eps, float wd, int decoupled, float bc1, float bc2) {
    if (decoupled) p -= lr * wd * p;
    else g += wd * p;
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    p -= lr * (m / bc1) / (sqrtf(v / bc2) + eps);
    return p;
}

__device__ __forceinline__ void sgd_one(float& p, float g, float* buf, float lr, float momentum, float wd) {
    g += wd * p;
    if (momentum != 0.0f) {
        float b = momentum * *buf + g;
        *buf = b;
        g = b;
    }
    p -= lr * g;
}

// Steps 3 and 4: a thread owns the float4s threadIdx.x + k·MT3_THREADS, k < MT3_V, of each
// stream of its chunk, so each load instruction of a warp is contiguous.

#define MT3_THREADS 256                       // block size (the launcher's)
#define MT3_V (MT_CHUNK / 4 / MT3_THREADS)    // float4 of each stream per thread: 4

__device__ __forceinline__ bool mt3_aligned(const void* p) { return ((unsigned long long)p & 15ull) == 0; }

// The table's pointers are generic; telling the compiler they address global memory (cudaMalloc'd
// tensors, never null where assumed) turns generic LD/ST into LDG/STG.
#define MT3_GLOBAL(ptr) __builtin_assume(__isGlobal(ptr))
