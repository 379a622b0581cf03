// Optimizer updates, step 1: one launch per parameter tensor, grid-stride, in place.
// The memory-bound issue adds a multi-tensor version (all parameters in one launch).
#include "common.cuh"

extern "C" __global__ void sgd_f32(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ buf,
                                   long long n, float lr, float momentum, float wd) {
    GRID_STRIDE_LOOP(i, n) {
        float gi = g[i] + wd * p[i];
        if (momentum != 0.0f) {
            float b = momentum * buf[i] + gi;
            buf[i] = b;
            gi = b;
        }
        p[i] -= lr * gi;
    }
}

extern "C" __global__ void adam_f32(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                                    float* __restrict__ v, long long n, float lr, float beta1, float beta2,
                                    float eps, float wd, int decoupled, float bc1, float bc2) {
    GRID_STRIDE_LOOP(i, n) {
        float pi = p[i], gi = g[i];
        if (decoupled) pi -= lr * wd * pi;
        else gi += wd * pi;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    }
}

// ---------------------------------------------------------------------------------------------
// Step 2 (memory-bound issue): every parameter of the model in ONE launch. The host uploads a
// table of tensors (pointers, length, first block, per-tensor bias corrections); each block
// finds its tensor by binary search over `first_block` and updates one chunk of it, float4
// where the chunk is whole. A model of T tensors costs one launch instead of T, and the small
// tensors (biases, LayerNorm gains) no longer leave the GPU idle between launches.

struct MultiTensor {
    float* p;
    const float* g;
    float* s1;  // momentum buffer (SGD; null when momentum is 0) or Adam's m
    float* s2;  // Adam's v
    long long n;
    long long first_block;
    float bc1, bc2;  // Adam's 1 − β₁ᵗ, 1 − β₂ᵗ for this tensor
};

#define MT_CHUNK 4096  // elements per block (256 threads × 4 float4)

__device__ __forceinline__ int find_tensor(const MultiTensor* __restrict__ ts, int count, long long b) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (ts[mid].first_block <= b) lo = mid;
        else hi = mid - 1;
    }
    return lo;
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

extern "C" __global__ void adam_multi_f32(const MultiTensor* __restrict__ ts, int count, float lr, float beta1,
                                          float beta2, float eps, float wd, int decoupled) {
    long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    int k = find_tensor(ts, count, b);
    MultiTensor t = ts[k];
    long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;
    long long end = min(t.n, start + MT_CHUNK);
    if (end - start == MT_CHUNK) {  // whole chunk: float4 (start is a multiple of 4)
        float4* p4 = reinterpret_cast<float4*>(t.p + start);
        const float4* g4 = reinterpret_cast<const float4*>(t.g + start);
        float4* m4 = reinterpret_cast<float4*>(t.s1 + start);
        float4* v4 = reinterpret_cast<float4*>(t.s2 + start);
        for (int i = threadIdx.x; i < MT_CHUNK / 4; i += blockDim.x) {
            float4 p = p4[i], g = g4[i], m = m4[i], v = v4[i];
            adam_one(p.x, g.x, m.x, v.x, lr, beta1, beta2, eps, wd, decoupled, t.bc1, t.bc2);
            adam_one(p.y, g.y, m.y, v.y, lr, beta1, beta2, eps, wd, decoupled, t.bc1, t.bc2);
            adam_one(p.z, g.z, m.z, v.z, lr, beta1, beta2, eps, wd, decoupled, t.bc1, t.bc2);
            adam_one(p.w, g.w, m.w, v.w, lr, beta1, beta2, eps, wd, decoupled, t.bc1, t.bc2);
            p4[i] = p;
            m4[i] = m;
            v4[i] = v;
        }
    } else {
        for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
            float p = t.p[i], m = t.s1[i], v = t.s2[i];
            adam_one(p, t.g[i], m, v, lr, beta1, beta2, eps, wd, decoupled, t.bc1, t.bc2);
            t.p[i] = p;
            t.s1[i] = m;
            t.s2[i] = v;
        }
    }
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

extern "C" __global__ void sgd_multi_f32(const MultiTensor* __restrict__ ts, int count, float lr, float momentum,
                                         float wd) {
    long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    int k = find_tensor(ts, count, b);
    MultiTensor t = ts[k];
    long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;
    long long end = min(t.n, start + MT_CHUNK);
    float dummy = 0.0f;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        float p = t.p[i];
        sgd_one(p, t.g[i], momentum != 0.0f ? &t.s1[i] : &dummy, lr, momentum, wd);
        t.p[i] = p;
    }
}
