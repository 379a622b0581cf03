// Optimizer step 4: step 3 for Adam too (SGD runs step 3's kernel):
// every thread issues *all* its loads of the chunk before any arithmetic or store, where step 2
// has one float4 of each stream in flight per thread. A thread holds its float4s in unrolled
// register arrays. Whole chunks run unpredicated; a tensor's last, partial chunk runs the same
// code predicated on whole float4s plus a scalar tail of at most 3 elements. Chunks whose pointers
// are not 16-byte aligned (never from the allocator; a guard, not a path) run scalar. Same table,
// chunks and arithmetic as step 2 (the same sgd_one / adam_one; results agree to a few ulp, since
// nvcc may contract a multiply-add differently in each inlined copy).
// Adam has 16 float4 (256 B) in flight per thread.

#include "optim/optim.cuh"

// The chunk [0, len) of p, g, m, v (already offset to the chunk's start).
template <bool WHOLE>
__device__ __forceinline__ void adam3_chunk(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                                            float* __restrict__ v, int len, float lr, float beta1, float beta2,
                                            float eps, float wd, int decoupled, float bc1, float bc2) {
    float4* p4 = reinterpret_cast<float4*>(p);
    const float4* g4 = reinterpret_cast<const float4*>(g);
    float4* m4 = reinterpret_cast<float4*>(m);
    float4* v4 = reinterpret_cast<float4*>(v);
    const int n4 = WHOLE ? MT_CHUNK / 4 : len / 4;
    float4 pr[MT3_V], gr[MT3_V], mr[MT3_V], vr[MT3_V];
#pragma unroll
    for (int k = 0; k < MT3_V; ++k) {
        const int j = threadIdx.x + k * MT3_THREADS;
        if (WHOLE || j < n4) {
            pr[k] = p4[j];
            gr[k] = g4[j];
            mr[k] = m4[j];
            vr[k] = v4[j];
        } else {
            pr[k] = gr[k] = mr[k] = vr[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
#pragma unroll
    for (int k = 0; k < MT3_V; ++k) {
        adam_one(pr[k].x, gr[k].x, mr[k].x, vr[k].x, lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
        adam_one(pr[k].y, gr[k].y, mr[k].y, vr[k].y, lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
        adam_one(pr[k].z, gr[k].z, mr[k].z, vr[k].z, lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
        adam_one(pr[k].w, gr[k].w, mr[k].w, vr[k].w, lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
    }
#pragma unroll
    for (int k = 0; k < MT3_V; ++k) {
        const int j = threadIdx.x + k * MT3_THREADS;
        if (WHOLE || j < n4) {
            p4[j] = pr[k];
            m4[j] = mr[k];
            v4[j] = vr[k];
        }
    }
    if (!WHOLE) {  // the last len % 4 elements
        const int i = n4 * 4 + threadIdx.x;
        if (i < len) {
            float pi = p[i], gi = g[i], mi = m[i], vi = v[i];
            adam_one(pi, gi, mi, vi, lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
            p[i] = pi;
            m[i] = mi;
            v[i] = vi;
        }
    }
}

extern "C" __global__ void __launch_bounds__(MT3_THREADS) adam_multi3_f32(const __grid_constant__ MultiTable tab,
                                                                          int count, float lr, float beta1,
                                                                          float beta2, float eps, int decoupled,
                                                                          const float* __restrict__ found_inf,
                                                                          const float* __restrict__ skipped) {
    CAMEL_PDL_WAIT();
    if (guard_skip(found_inf)) return;
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const MultiTensor* ts = tab.t;
    const MultiTensor t = ts[find_tensor(ts, count, b)];
    const long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;
    const int len = (int)min(t.n - start, (long long)MT_CHUNK);
    const float wd = t.wd;
    float bc1 = t.bc1, bc2 = t.bc2;
    guard_bias(skipped, t.step, beta1, beta2, bc1, bc2);
    float* p = t.p + start;
    const float* g = t.g + start;
    float* m = t.s1 + start;
    float* v = t.s2 + start;
    MT3_GLOBAL(p);
    MT3_GLOBAL(g);
    MT3_GLOBAL(m);
    MT3_GLOBAL(v);
    if (mt3_aligned(p) && mt3_aligned(g) && mt3_aligned(m) && mt3_aligned(v)) {
        if (len == MT_CHUNK) adam3_chunk<true>(p, g, m, v, len, lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
        else adam3_chunk<false>(p, g, m, v, len, lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
    } else {
        for (int i = threadIdx.x; i < len; i += blockDim.x) {
            float pi = p[i], mi = m[i], vi = v[i];
            adam_one(pi, g[i], mi, vi, lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
            p[i] = pi;
            m[i] = mi;
            v[i] = vi;
        }
    }
}
