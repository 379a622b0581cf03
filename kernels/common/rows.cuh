// rows.cuh — helpers of the memory-bound ladder steps (reductions, softmax, cross-entropy,
// LayerNorm): a row is owned by a *group* of threads that is either one warp (short rows: a
// block of 256 threads holds 8 rows, no __syncthreads) or the whole block (long rows). The
// group reduces with warp shuffles (__shfl_xor_sync) and, for a block, one shared-memory hop.
// Loads are float4 where the row starts on a 16-byte boundary (cols % 4 == 0 and an aligned
// base, which the launchers check).
#pragma once
#include "common.cuh"
#include "half.cuh"

namespace camel {

// Row of this group, for a grid laid out by camel_cuda's `rows_grid` (x then y).
template <bool WARP>
__device__ __forceinline__ long long group_row() {
    long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    return WARP ? b * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE : b;
}
template <bool WARP>
__device__ __forceinline__ int group_tid() {
    return WARP ? threadIdx.x % WARP_SIZE : threadIdx.x;
}
template <bool WARP>
__device__ __forceinline__ int group_size() {
    return WARP ? WARP_SIZE : blockDim.x;
}

// Reduction combine: op 0 sum, 1 max, 2 min (NaN wins, as in PyTorch and the CPU reference).
__device__ __forceinline__ float combine(int op, float a, float b) {
    if (op == 0) return a + b;
    if (op == 1) return (b > a || isnan(b)) ? b : a;
    return (b < a || isnan(b)) ? b : a;
}
__device__ __forceinline__ float identity(int op) { return op == 0 ? 0.0f : (op == 1 ? -INFINITY : INFINITY); }

__device__ __forceinline__ float warp_reduce(int op, float v) {
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v = combine(op, v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// Every thread of the group gets the result. `scratch`: __shared__ float[32] (block mode only).
template <bool WARP>
__device__ __forceinline__ float group_reduce(int op, float v, float* scratch) {
    v = warp_reduce(op, v);
    if (WARP) return v;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / WARP_SIZE) ? scratch[lane] : identity(op);
    return warp_reduce(op, v);
}

template <bool WARP>
__device__ __forceinline__ float group_sum(float v, float* scratch) {
    return group_reduce<WARP>(0, v, scratch);
}

// ---- online softmax: a running (max m, sum s of exp(x - m)) ------------------------------------

__device__ __forceinline__ void online_add(float& m, float& s, float v) {
    if (v > m) {
        s = s * expf(m - v) + 1.0f;
        m = v;
    } else if (v != -INFINITY) {  // (-inf, -inf) adds nothing; NaN propagates through s
        s += expf(v - m);
    }
}

__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    if (mn == -INFINITY) {  // both empty
        s += s2;
        return;
    }
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

// Every thread of the group gets the merged (m, s). `scratch`: __shared__ float[64].
template <bool WARP>
__device__ __forceinline__ void group_online(float& m, float& s, float* scratch) {
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);
        online_merge(m, s, m2, s2);
    }
    if (WARP) return;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    __syncthreads();
    if (lane == 0) {
        scratch[warp] = m;
        scratch[32 + warp] = s;
    }
    __syncthreads();
    bool live = lane < (int)(blockDim.x / WARP_SIZE);
    m = live ? scratch[lane] : -INFINITY;
    s = live ? scratch[32 + lane] : 0.0f;
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);
        online_merge(m, s, m2, s2);
    }
}

// Online (m, s) of one row, read with float4 when VEC.
template <bool WARP, bool VEC>
__device__ __forceinline__ void row_online(const float* __restrict__ xr, long long cols, float& m, float& s) {
    const int tid = group_tid<WARP>(), gs = group_size<WARP>();
    m = -INFINITY;
    s = 0.0f;
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (long long c = tid; c < cols / 4; c += gs) {
            float4 v = x4[c];
            online_add(m, s, v.x);
            online_add(m, s, v.y);
            online_add(m, s, v.z);
            online_add(m, s, v.w);
        }
    } else {
        for (long long c = tid; c < cols; c += gs) online_add(m, s, xr[c]);
    }
}

// ---- Welford (count n, mean, M2 = sum of squared deviations) ----------------------------------

__device__ __forceinline__ void welford_add(float& n, float& mean, float& m2, float v) {
    n += 1.0f;
    float d = v - mean;
    mean += d / n;
    m2 += d * (v - mean);
}

__device__ __forceinline__ void welford_merge(float& n, float& mean, float& m2, float nb, float meanb, float m2b) {
    float nn = n + nb;
    if (nn == 0.0f) return;
    float d = meanb - mean, fb = nb / nn;
    mean += d * fb;
    m2 += m2b + d * d * n * fb;
    n = nn;
}

__device__ __forceinline__ void warp_welford(float& n, float& mean, float& m2) {
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) {
        float nb = __shfl_xor_sync(FULL_MASK, n, o);
        float meanb = __shfl_xor_sync(FULL_MASK, mean, o);
        float m2b = __shfl_xor_sync(FULL_MASK, m2, o);
        welford_merge(n, mean, m2, nb, meanb, m2b);
    }
}

// ---- groups of G threads per row (the step-3 kernels: softmax, cross-entropy) ---------------
// G ≤ 32: G consecutive lanes of a warp own a row (several rows per warp; shuffles of width G,
// but every lane of the warp must call, FULL_MASK); G > 32: the whole block (G = blockDim.x),
// one shared-memory hop through `scratch` (__shared__ float[32]).
// op 0: sum, 1: max over the G threads of a group (every thread gets the result).
template <int G>
__device__ __forceinline__ float g_reduce(int op, float v, float* scratch) {
    constexpr int W = G < WARP_SIZE ? G : WARP_SIZE;
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(FULL_MASK, v, o, W);
        v = op == 0 ? v + u : fmaxf(v, u);
    }
    if (G <= WARP_SIZE) return v;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    __syncthreads();  // scratch may still be read by the previous reduction
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < G / WARP_SIZE ? scratch[lane] : (op == 0 ? 0.0f : -INFINITY);
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(FULL_MASK, v, o);
        v = op == 0 ? v + u : fmaxf(v, u);
    }
    return v;
}

// 1 / s for a softmax sum (s in [1, cols], or 0 or NaN): the compiler's fast path of 1.0f / s
// (rcp.approx, then one Newton step) without its range test and the call to its slow path, which
// an s in [1, 2^126) never takes, so the same bits there (dev/labs/pipe_lab.cu checks every float
// in [1, 2^24] against 1.0f / s). s = 0 (an all −inf row) gives NaN where 1.0f / 0 gives inf: both
// make the output 0 · (1 / s) NaN. NaN stays NaN. (+inf, which a softmax sum cannot be, would
// give NaN, not 0.)
__device__ __forceinline__ float rcp_sum(float s) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
    return fmaf(r, fmaf(-s, r, 1.0f), r);
}

// ---- loads and stores, plain or streaming -----------------------------------------------------
// CS = false: plain accesses (the step-3 kernels). CS = true: the cache-streaming hints
// ld.global.cs / st.global.cs (evict first), for data read or written exactly once (the step-4
// forwards: the input row and the output row).
template <bool CS>
__device__ __forceinline__ float4 ld4(const float* p) {
    return CS ? __ldcs(reinterpret_cast<const float4*>(p)) : *reinterpret_cast<const float4*>(p);
}
template <bool CS>
__device__ __forceinline__ float ld1(const float* p) {
    return CS ? __ldcs(p) : *p;
}
template <bool CS>
__device__ __forceinline__ void st4(float* p, float4 v) {
    if (CS) __stcs(reinterpret_cast<float4*>(p), v);
    else *reinterpret_cast<float4*>(p) = v;
}
template <bool CS>
__device__ __forceinline__ void st1(float* p, float v) {
    if (CS) __stcs(p, v);
    else *p = v;
}

// ---- VEC elements of any float dtype, widened to f32 or narrowed from it ------------------------
// The row kernels that take f16 and bf16 (softmax step 3, cross-entropy steps 3–4) load VEC
// elements of T into f32 registers and store f32 registers as T, rounding once (half.cuh). VEC = 4
// is one 16-byte access for f32 and one 8-byte access for the 16-bit types (the launchers check
// the row's alignment for its element size).
template <bool CS, int VEC, typename T>
__device__ __forceinline__ void ldv(const T* p, float* v) {
    if constexpr (sizeof(T) == 4) {
        if (VEC == 4) {
            float4 q = ld4<CS>(reinterpret_cast<const float*>(p));
            v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        } else {
            v[0] = ld1<CS>(reinterpret_cast<const float*>(p));
        }
    } else if (VEC == 4) {
        const uint2* q = reinterpret_cast<const uint2*>(p);
        const uint2 w = CS ? __ldcs(q) : *q;
        v[0] = bits_to_float<T>(w.x & 0xffff), v[1] = bits_to_float<T>(w.x >> 16);
        v[2] = bits_to_float<T>(w.y & 0xffff), v[3] = bits_to_float<T>(w.y >> 16);
    } else {
        const unsigned short* q = reinterpret_cast<const unsigned short*>(p);
        v[0] = bits_to_float<T>(CS ? __ldcs(q) : *q);
    }
}
template <bool CS, int VEC, typename T>
__device__ __forceinline__ void stv(T* p, const float* v) {
    if constexpr (sizeof(T) == 4) {
        if (VEC == 4) {
            st4<CS>(reinterpret_cast<float*>(p), make_float4(v[0], v[1 % VEC], v[2 % VEC], v[3 % VEC]));
        } else {
            st1<CS>(reinterpret_cast<float*>(p), v[0]);
        }
    } else if (VEC == 4) {
        uint2 w;
        w.x = float_to_bits<T>(v[0]) | (unsigned)float_to_bits<T>(v[1 % VEC]) << 16;
        w.y = float_to_bits<T>(v[2 % VEC]) | (unsigned)float_to_bits<T>(v[3 % VEC]) << 16;
        uint2* q = reinterpret_cast<uint2*>(p);
        if (CS) __stcs(q, w);
        else *q = w;
    } else {
        unsigned short* q = reinterpret_cast<unsigned short*>(p);
        if (CS) __stcs(q, float_to_bits<T>(v[0]));
        else *q = float_to_bits<T>(v[0]);
    }
}

// ---- waiting for the other blocks of a grid --------------------------------------------------
// A load with acquire semantics at GPU scope: after it sees another block's counter update, the
// writes that block made before its update (and its __threadfence) are visible. Only for kernels
// whose launcher made sure every block of the grid is resident at once (else a block could wait
// for one that never starts).
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ unsigned long long ld_acquire_gpu(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.b64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// An atomic add with release and acquire semantics at GPU scope, returning the old value: the
// writes this thread made before it are visible to whoever acquires the value it leaves, and it
// sees the writes of those whose increments it counted. For "the last block to arrive" (which
// waits for no one, so any grid will do); the labs use it (dev/labs/ce_lab.cu,
// dev/labs/mean_lab.cu).
__device__ __forceinline__ unsigned atom_add_acq_rel_gpu(unsigned* p, unsigned v) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

// A 64-bit store and load, relaxed at GPU scope: the word is written and read whole (single-copy
// atomic), so a value and a mark packed into one word arrive together with no fence between
// them; cross-entropy step 4's mean (kernels/loss/, ce_mean_epilogue).
__device__ __forceinline__ void st_relaxed_gpu(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_relaxed_gpu(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// A barrier over the whole grid (every block resident, see above): each block counts itself in
// on `*bar` and waits until it reads `target` (gridDim.x for the first barrier of a launch,
// 2 × gridDim.x for the second, …). The kernel must leave `*bar` zero for the next launch.
__device__ __forceinline__ void grid_barrier(int* bar, int target) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();  // this block's writes are visible before it counts itself in
        atomicAdd(bar, 1);
        while (ld_acquire_gpu(bar) < target) __nanosleep(32);
    }
    __syncthreads();
}

}  // namespace camel

// ---- the register-row shapes ------------------------------------------------------------------
// Every (G, VEC, NV) that `softmax3_shape` (crates/camel-cuda/src/kernels/softmax.rs) can pick
// for a row of at most 16384 columns; softmax step 3 (SOFTMAX3, kernels/softmax/) and
// cross-entropy steps 3 and 4 (CE3, kernels/loss/) instantiate each one as
// CAMEL_ROW3_SHAPES(SOFTMAX3). G lanes a row, NV loads of VEC floats a lane.
// Short rows (n = cols / VEC < 128 vector elements): G = the largest power of two ≤ n / 4 and NV
// = ceil(n / G) exactly, so only the last slot holds padding (G = 1: NV = n, 1 … 7; G ≥ 2: NV
// 4 … 8). An exact NV lets every exp of the row run unconditionally, side by side: with NV a
// power of two (8 slots for 65 columns, 3 of them padding) the exps of the real columns need a
// per-lane test, and the compiler puts each in a branch of its own, one after another
// (dev/labs/exp_lab.cu). Warp rows (32 lanes, 128 ≤ n ≤ 1024): NV a power of two. Block rows
// (cols > 1024): NV 4 float4 or 16 floats, G 128 … 1024 threads.
#define CAMEL_ROW3_SHORT(X, VEC)                                                                         \
    X(1, VEC, 1) X(1, VEC, 2) X(1, VEC, 3) X(1, VEC, 4) X(1, VEC, 5) X(1, VEC, 6) X(1, VEC, 7)           \
    X(2, VEC, 4) X(2, VEC, 5) X(2, VEC, 6) X(2, VEC, 7) X(2, VEC, 8)                                     \
    X(4, VEC, 4) X(4, VEC, 5) X(4, VEC, 6) X(4, VEC, 7) X(4, VEC, 8)                                     \
    X(8, VEC, 4) X(8, VEC, 5) X(8, VEC, 6) X(8, VEC, 7) X(8, VEC, 8)                                     \
    X(16, VEC, 4) X(16, VEC, 5) X(16, VEC, 6) X(16, VEC, 7) X(16, VEC, 8)                                \
    X(32, VEC, 4) X(32, VEC, 8)
#define CAMEL_ROW3_SHAPES(X)                                                                             \
    CAMEL_ROW3_SHORT(X, 1)                                                                               \
    CAMEL_ROW3_SHORT(X, 4)                                                                               \
    X(32, 1, 16) X(32, 1, 32)                                                                            \
    X(128, 4, 4) X(256, 4, 4) X(512, 4, 4) X(1024, 4, 4)                                                 \
    X(128, 1, 16) X(256, 1, 16) X(512, 1, 16) X(1024, 1, 16)
