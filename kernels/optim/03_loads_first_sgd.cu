// Optimizer step 3, SGD (Adam stays step 2's):
// every thread issues *all* its loads of the chunk before any arithmetic or store, where step 2
// has one float4 of each stream in flight per thread. A thread holds its float4s in unrolled
// register arrays. Whole chunks run unpredicated; a tensor's last, partial chunk runs the same
// code predicated on whole float4s plus a scalar tail of at most 3 elements. Chunks whose pointers
// are not 16-byte aligned (never from the allocator; a guard, not a path) run scalar. Same table,
// chunks and arithmetic as step 2 (the same sgd_one / adam_one; results agree to a few ulp, since
// nvcc may contract a multiply-add differently in each inlined copy).
// SGD with momentum has 12 float4 in flight per thread, without 8 (the momentum buffer is
// neither read nor written, and may be null).

#include "optim/optim.cuh"

// SGD over the chunk [0, len); MOM: momentum != 0 (buf read and written), else buf unused.
template <bool WHOLE, bool MOM>
__device__ __forceinline__ void sgd3_chunk(float* __restrict__ p, const float* __restrict__ g,
                                           float* __restrict__ buf, int len, float lr, float momentum, float wd) {
    float4* p4 = reinterpret_cast<float4*>(p);
    const float4* g4 = reinterpret_cast<const float4*>(g);
    float4* b4 = reinterpret_cast<float4*>(buf);
    const int n4 = WHOLE ? MT_CHUNK / 4 : len / 4;
    float4 pr[MT3_V], gr[MT3_V], br[MT3_V];
#pragma unroll
    for (int k = 0; k < MT3_V; ++k) {
        const int j = threadIdx.x + k * MT3_THREADS;
        br[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (WHOLE || j < n4) {
            pr[k] = p4[j];
            gr[k] = g4[j];
            if (MOM) br[k] = b4[j];
        } else {
            pr[k] = gr[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
#pragma unroll
    for (int k = 0; k < MT3_V; ++k) {
        sgd_one(pr[k].x, gr[k].x, &br[k].x, lr, momentum, wd);
        sgd_one(pr[k].y, gr[k].y, &br[k].y, lr, momentum, wd);
        sgd_one(pr[k].z, gr[k].z, &br[k].z, lr, momentum, wd);
        sgd_one(pr[k].w, gr[k].w, &br[k].w, lr, momentum, wd);
    }
#pragma unroll
    for (int k = 0; k < MT3_V; ++k) {
        const int j = threadIdx.x + k * MT3_THREADS;
        if (WHOLE || j < n4) {
            p4[j] = pr[k];
            if (MOM) b4[j] = br[k];
        }
    }
    if (!WHOLE) {  // the last len % 4 elements
        const int i = n4 * 4 + threadIdx.x;
        if (i < len) {
            float pi = p[i], bi = MOM ? buf[i] : 0.0f;
            sgd_one(pi, g[i], &bi, lr, momentum, wd);
            p[i] = pi;
            if (MOM) buf[i] = bi;
        }
    }
}

// One chunk of SGD: float4 when every pointer it touches is 16-byte aligned, else scalar.
template <bool MOM>
__device__ __forceinline__ void sgd3_any(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ buf,
                                         int len, float lr, float momentum, float wd) {
    if (mt3_aligned(p) && mt3_aligned(g) && (!MOM || mt3_aligned(buf))) {
        if (len == MT_CHUNK) sgd3_chunk<true, MOM>(p, g, buf, len, lr, momentum, wd);
        else sgd3_chunk<false, MOM>(p, g, buf, len, lr, momentum, wd);
    } else {
        for (int i = threadIdx.x; i < len; i += blockDim.x) {
            float pi = p[i], bi = MOM ? buf[i] : 0.0f;
            sgd_one(pi, g[i], &bi, lr, momentum, wd);
            p[i] = pi;
            if (MOM) buf[i] = bi;
        }
    }
}

extern "C" __global__ void __launch_bounds__(MT3_THREADS) sgd_multi3_f32(const __grid_constant__ MultiTable tab,
                                                                         int count, float lr, float momentum,
                                                                         const float* __restrict__ found_inf) {
    CAMEL_PDL_WAIT();
    if (guard_skip(found_inf)) return;
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const MultiTensor* ts = tab.t;
    const MultiTensor t = ts[find_tensor(ts, count, b)];
    const long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;
    const int len = (int)min(t.n - start, (long long)MT_CHUNK);
    const float wd = t.wd;
    float* p = t.p + start;
    const float* g = t.g + start;
    MT3_GLOBAL(p);
    MT3_GLOBAL(g);
    if (momentum != 0.0f) {  // as sgd_one's test
        float* buf = t.s1 + start;
        MT3_GLOBAL(buf);
        sgd3_any<true>(p, g, buf, len, lr, momentum, wd);
    } else {  // s1 may be null: never read, written or offset
        sgd3_any<false>(p, g, nullptr, len, lr, momentum, wd);
    }
}
