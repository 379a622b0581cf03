// elementwise.cu — one thread per element, grid-stride. Launchers:
// crates/camel-cuda/src/kernels/elementwise.rs.
#include "common.cuh"

// out[i] = value
extern "C" __global__ void fill_f32(float* __restrict__ out, long long n, float value) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) { out[i] = value; }
}

// ---------------------------------------------------------------------------------------------
// Unary and binary elementwise ops, step 1: grid-stride, one element per thread per iteration.
// Op codes match camel-core's `UnaryOp::code` / `BinaryOp::code` (crates/camel-core/src/backend/mod.rs).

#define GELU_C 0.7978845608028654f

__device__ __forceinline__ float unary_apply(int op, float x, float s) {
    switch (op) {
        case 0: return -x;
        case 1: return fmaxf(x, 0.0f);
        case 2: return x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
        case 3: return tanhf(x);
        case 4: { float u = GELU_C * (x + 0.044715f * x * x * x); return 0.5f * x * (1.0f + tanhf(u)); }
        case 5: {
            float u = GELU_C * (x + 0.044715f * x * x * x);
            float t = tanhf(u);
            float du = GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
            return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
        }
        case 6: return expf(x);
        case 7: return logf(x);
        case 8: return x > 0.0f ? 1.0f : 0.0f;
        case 9: return sqrtf(x);
        case 10: return x * x;
        case 11: return x + s;
        case 12: return x * s;
        case 13: return powf(x, s);
        default: return __int_as_float(0x7fc00000);  // NaN: unknown op
    }
}

extern "C" __global__ void unary_f32(const float* __restrict__ x, float* __restrict__ y, long long n, int op, float s) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) y[i] = unary_apply(op, x[i], s);
}

__device__ __forceinline__ float binary_apply(int op, float a, float b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / b;
        case 4: return a == b ? 1.0f : 0.0f;
        default: return __int_as_float(0x7fc00000);
    }
}

// Same shapes: out[i] = a[i] op b[i].
extern "C" __global__ void binary_f32(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                      long long n, int op) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) out[i] = binary_apply(op, a[i], b[i]);
}

#define BCAST_MAX_DIMS 8
struct BcastArgs {
    long long ndim;
    long long shape[BCAST_MAX_DIMS];  // output shape
    long long sa[BCAST_MAX_DIMS];     // a's strides against the output (0 where broadcast)
    long long sb[BCAST_MAX_DIMS];
};

// Broadcasting: each output index is decomposed into a multi-index and mapped through the strides.
extern "C" __global__ void binary_bcast_f32(const float* __restrict__ a, const float* __restrict__ b,
                                            float* __restrict__ out, long long n, int op, BcastArgs p) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) {
        long long rem = i, ia = 0, ib = 0;
        for (int d = (int)p.ndim - 1; d >= 0; --d) {
            long long q = rem % p.shape[d];
            rem /= p.shape[d];
            ia += q * p.sa[d];
            ib += q * p.sb[d];
        }
        out[i] = binary_apply(op, a[ia], b[ib]);
    }
}

// ---------------------------------------------------------------------------------------------
// Step 2 (memory-bound issue): float4. Each thread moves 16 bytes per load instead of 4, so a
// warp issues a quarter of the memory instructions for the same bytes; the grid-stride loop
// walks float4s and the last n % 4 elements are done by the first threads. The launcher picks
// these only when every pointer is 16-byte aligned (camel's buffers are 256-byte aligned).
// Binary op 5 is the fused GELU backward, g·gelu'(x) (a = x, b = g), in both steps: step 1 of
// it composed two kernels (gelu' then mul). Figures: docs/benchmarks.md.

__device__ __forceinline__ float gelu_grad(float x) {
    float u = GELU_C * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    float du = GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

__device__ __forceinline__ float binary_apply2(int op, float a, float b) {
    return op == 5 ? b * gelu_grad(a) : binary_apply(op, a, b);
}

// out[i] = a[i] op b[i] with the ops of step 1 plus 5 (gelu backward), scalar.
extern "C" __global__ void binary2_f32(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ out, long long n, int op) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) out[i] = binary_apply2(op, a[i], b[i]);
}

extern "C" __global__ void unary_vec4_f32(const float* __restrict__ x, float* __restrict__ y, long long n, int op,
                                          float s) {
    CAMEL_PDL_WAIT();
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    GRID_STRIDE_LOOP(i, n / 4) {
        float4 v = x4[i];
        y4[i] = make_float4(unary_apply(op, v.x, s), unary_apply(op, v.y, s), unary_apply(op, v.z, s),
                            unary_apply(op, v.w, s));
    }
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, i = n / 4 * 4 + t;
    if (i < n) y[i] = unary_apply(op, x[i], s);
}

extern "C" __global__ void binary_vec4_f32(const float* __restrict__ a, const float* __restrict__ b,
                                           float* __restrict__ out, long long n, int op) {
    CAMEL_PDL_WAIT();
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* o4 = reinterpret_cast<float4*>(out);
    GRID_STRIDE_LOOP(i, n / 4) {
        float4 u = a4[i], v = b4[i];
        o4[i] = make_float4(binary_apply2(op, u.x, v.x), binary_apply2(op, u.y, v.y), binary_apply2(op, u.z, v.z),
                            binary_apply2(op, u.w, v.w));
    }
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, i = n / 4 * 4 + t;
    if (i < n) out[i] = binary_apply2(op, a[i], b[i]);
}
