// Optimizer step 2: every parameter of the model in ONE launch (optim/optim.cuh has the table).
// A model of T tensors costs one launch instead of T, and the small tensors do not leave the
// GPU idle between launches; float4 where a chunk is whole. Each iteration of a thread loads,
// computes and stores one float4 of each stream: the table's pointers are not restrict, so the
// compiler may not hoist the next iteration's loads above this one's stores.

#include "optim/optim.cuh"

extern "C" __global__ void adam_multi_f32(const __grid_constant__ MultiTable tab, int count, float lr, float beta1,
                                          float beta2, float eps, int decoupled, const float* __restrict__ found_inf,
                                          const float* __restrict__ skipped) {
    CAMEL_PDL_WAIT();
    if (guard_skip(found_inf)) return;
    long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const MultiTensor* ts = tab.t;
    int k = find_tensor(ts, count, b);
    MultiTensor t = ts[k];
    long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;
    guard_bias(skipped, t.step, beta1, beta2, t.bc1, t.bc2);
    long long end = min(t.n, start + MT_CHUNK);
    if (end - start == MT_CHUNK) {  // whole chunk: float4 (start is a multiple of 4)
        float4* p4 = reinterpret_cast<float4*>(t.p + start);
        const float4* g4 = reinterpret_cast<const float4*>(t.g + start);
        float4* m4 = reinterpret_cast<float4*>(t.s1 + start);
        float4* v4 = reinterpret_cast<float4*>(t.s2 + start);
        for (int i = threadIdx.x; i < MT_CHUNK / 4; i += blockDim.x) {
            float4 p = p4[i], g = g4[i], m = m4[i], v = v4[i];
            adam_one(p.x, g.x, m.x, v.x, lr, beta1, beta2, eps, t.wd, decoupled, t.bc1, t.bc2);
            adam_one(p.y, g.y, m.y, v.y, lr, beta1, beta2, eps, t.wd, decoupled, t.bc1, t.bc2);
            adam_one(p.z, g.z, m.z, v.z, lr, beta1, beta2, eps, t.wd, decoupled, t.bc1, t.bc2);
            adam_one(p.w, g.w, m.w, v.w, lr, beta1, beta2, eps, t.wd, decoupled, t.bc1, t.bc2);
            p4[i] = p;
            m4[i] = m;
            v4[i] = v;
        }
    } else {
        for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
            float p = t.p[i], m = t.s1[i], v = t.s2[i];
            adam_one(p, t.g[i], m, v, lr, beta1, beta2, eps, t.wd, decoupled, t.bc1, t.bc2);
            t.p[i] = p;
            t.s1[i] = m;
            t.s2[i] = v;
        }
    }
}

extern "C" __global__ void sgd_multi_f32(const __grid_constant__ MultiTable tab, int count, float lr, float momentum,
                                         const float* __restrict__ found_inf) {
    CAMEL_PDL_WAIT();
    if (guard_skip(found_inf)) return;
    long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const MultiTensor* ts = tab.t;
    int k = find_tensor(ts, count, b);
    MultiTensor t = ts[k];
    long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;
    long long end = min(t.n, start + MT_CHUNK);
    float dummy = 0.0f;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        float p = t.p[i];
        sgd_one(p, t.g[i], momentum != 0.0f ? &t.s1[i] : &dummy, lr, momentum, t.wd);
        t.p[i] = p;
    }
}
