// Optimizer updates, step 1: one launch per parameter tensor, grid-stride, in place.
// The memory-bound issue adds a multi-tensor version (all parameters in one launch, step 2) and
// its step 3 (all of a thread's loads before its stores), below. Launchers:
// crates/camel-cuda/src/kernels/optim.rs.
#include "common/common.cuh"

extern "C" __global__ void sgd_f32(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ buf,
                                   long long n, float lr, float momentum, float wd) {
    CAMEL_PDL_WAIT();
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
    CAMEL_PDL_WAIT();
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
// Step 2 (memory-bound issue): every parameter of the model in ONE launch. The host passes a
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

// The table travels in the launch's parameters (no upload, no allocation per optimizer step):
// up to MT_PARAM_MAX tensors a launch, 3584 bytes, within the 4 KB kernel-parameter space;
// more tensors take more launches. __grid_constant__ lets the kernel index it in place
// (constant bank) instead of copying it to each thread's local memory.
#define MT_PARAM_MAX 64
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

__device__ __forceinline__ float adam_one(float& p, float g, float& m, float& v, float lr, float beta1, float beta2,
                                          float eps, float wd, int decoupled, float bc1, float bc2) {
    if (decoupled) p -= lr * wd * p;
    else g += wd * p;
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    p -= lr * (m / bc1) / (sqrtf(v / bc2) + eps);
    return p;
}

extern "C" __global__ void adam_multi_f32(const __grid_constant__ MultiTable tab, int count, float lr, float beta1,
                                          float beta2, float eps, float wd, int decoupled) {
    CAMEL_PDL_WAIT();
    long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const MultiTensor* ts = tab.t;
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

extern "C" __global__ void sgd_multi_f32(const __grid_constant__ MultiTable tab, int count, float lr, float momentum,
                                         float wd) {
    CAMEL_PDL_WAIT();
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
        sgd_one(p, t.g[i], momentum != 0.0f ? &t.s1[i] : &dummy, lr, momentum, wd);
        t.p[i] = p;
    }
}

// ---------------------------------------------------------------------------------------------
// Step 3 (`CAMEL_OPTIM=3`, the default): step 2's table, chunks of 4096 elements and arithmetic
// (the same adam_one / sgd_one; results agree with step 2 to a few ulp, since nvcc may contract
// a multiply-add differently in each inlined copy), but every thread issues *all*
// its loads of the chunk before any arithmetic or store. Step 2's loop (i += blockDim.x) loads,
// computes and stores one float4 of each stream per iteration; the table's pointers are not
// restrict, so the compiler may not hoist the next iteration's loads above this iteration's
// stores (they might alias), and each thread has one float4 of each stream in flight (Adam: 4
// float4 = 64 B; step 2's SGD is scalar: 2–3 floats). Here a thread owns the float4s
// threadIdx.x + k·256, k < 4, of each stream (each load instruction of a warp is contiguous),
// held in unrolled register arrays: Adam has 16 float4 (256 B) in flight per thread, SGD with
// momentum 12, without 8 (the momentum buffer is neither read nor written, and may be null).
// Whole chunks run unpredicated; a tensor's last, partial chunk runs the same code predicated
// on whole float4s plus a scalar tail of at most 3 elements. Chunks whose pointers are not
// 16-byte aligned (never from the allocator; a guard, not a path) run scalar.

#define MT3_THREADS 256                       // block size (the launcher's)
#define MT3_V (MT_CHUNK / 4 / MT3_THREADS)    // float4 of each stream per thread: 4

__device__ __forceinline__ bool mt3_aligned(const void* p) { return ((unsigned long long)p & 15ull) == 0; }

// The table's pointers are generic; telling the compiler they address global memory (cudaMalloc'd
// tensors, never null where assumed) turns generic LD/ST into LDG/STG.
#define MT3_GLOBAL(ptr) __builtin_assume(__isGlobal(ptr))

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
                                                                          float beta2, float eps, float wd,
                                                                          int decoupled) {
    CAMEL_PDL_WAIT();
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const MultiTensor* ts = tab.t;
    const MultiTensor t = ts[find_tensor(ts, count, b)];
    const long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;
    const int len = (int)min(t.n - start, (long long)MT_CHUNK);
    float* p = t.p + start;
    const float* g = t.g + start;
    float* m = t.s1 + start;
    float* v = t.s2 + start;
    MT3_GLOBAL(p);
    MT3_GLOBAL(g);
    MT3_GLOBAL(m);
    MT3_GLOBAL(v);
    if (mt3_aligned(p) && mt3_aligned(g) && mt3_aligned(m) && mt3_aligned(v)) {
        if (len == MT_CHUNK) adam3_chunk<true>(p, g, m, v, len, lr, beta1, beta2, eps, wd, decoupled, t.bc1, t.bc2);
        else adam3_chunk<false>(p, g, m, v, len, lr, beta1, beta2, eps, wd, decoupled, t.bc1, t.bc2);
    } else {
        for (int i = threadIdx.x; i < len; i += blockDim.x) {
            float pi = p[i], mi = m[i], vi = v[i];
            adam_one(pi, g[i], mi, vi, lr, beta1, beta2, eps, wd, decoupled, t.bc1, t.bc2);
            p[i] = pi;
            m[i] = mi;
            v[i] = vi;
        }
    }
}

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
                                                                         float wd) {
    CAMEL_PDL_WAIT();
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const MultiTensor* ts = tab.t;
    const MultiTensor t = ts[find_tensor(ts, count, b)];
    const long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;
    const int len = (int)min(t.n - start, (long long)MT_CHUNK);
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
