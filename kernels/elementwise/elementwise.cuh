// Elementwise ops shared by both steps: the op codes of camel-core's `UnaryOp::code` /
// `BinaryOp::code` (crates/camel-core/src/ops/elementwise/mod.rs) and the GELU derivative (binary
// op 5, g·gelu'(x) with a = x, b = g). Comparisons give a mask of 0.0/1.0 with IEEE semantics
// (every comparison with NaN is false except `!=`); minimum/maximum return NaN when either side
// is NaN.
#pragma once

#include "common/common.cuh"
#include "common/half.cuh"

#define GELU_C 0.7978845608028654f

__device__ __forceinline__ float unary_apply(int op, float x, float s) {
    switch (op) {
        case 0: return -x;
        case 1: return x > 0.0f ? x : (x != x ? x : 0.0f);  // ReLU; NaN stays NaN (fmaxf drops it)
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
        case 8: return x <= 0.0f ? 0.0f : 1.0f;  // ReLU's derivative; NaN passes the gradient
        case 9: return sqrtf(x);
        case 10: return x * x;
        case 11: return x + s;
        case 12: return x * s;
        case 13: return powf(x, s);
        case 14: return x == s ? 1.0f : 0.0f;
        case 15: return x != s ? 1.0f : 0.0f;
        case 16: return x < s ? 1.0f : 0.0f;
        case 17: return x <= s ? 1.0f : 0.0f;
        case 18: return x > s ? 1.0f : 0.0f;
        case 19: return x >= s ? 1.0f : 0.0f;
        case 20: return fabsf(x);
        case 21: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);  // sign: ±1, 0 at ±0, NaN stays NaN
        default: return __int_as_float(0x7fc00000);  // NaN: unknown op
    }
}

__device__ __forceinline__ float binary_apply(int op, float a, float b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / b;
        case 4: return a == b ? 1.0f : 0.0f;
        case 6: return a != b ? 1.0f : 0.0f;
        case 7: return a < b ? 1.0f : 0.0f;
        case 8: return a <= b ? 1.0f : 0.0f;
        case 9: return a > b ? 1.0f : 0.0f;
        case 10: return a >= b ? 1.0f : 0.0f;
        case 11: return (a != a || b != b) ? a + b : (a < b ? a : b);  // minimum; NaN wins
        case 12: return (a != a || b != b) ? a + b : (a > b ? a : b);  // maximum; NaN wins
        default: return __int_as_float(0x7fc00000);
    }
}

__device__ __forceinline__ float gelu_grad(float x) {
    float u = GELU_C * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    float du = GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

__device__ __forceinline__ float binary_apply2(int op, float a, float b) {
    return op == 5 ? b * gelu_grad(a) : binary_apply(op, a, b);
}

// clamp: mode 0 gives min(max(x, lo), hi) (NaN stays NaN; lo > hi gives hi, as torch.clamp);
// mode 1 gives its derivative mask, 1 where lo <= x <= hi, else 0 (NaN gives 0).
__device__ __forceinline__ float clamp_apply(float x, float lo, float hi, int mode) {
    if (mode == 1) return (x >= lo && x <= hi) ? 1.0f : 0.0f;
    if (x != x) return x;
    float y = x < lo ? lo : x;
    return y > hi ? hi : y;
}
