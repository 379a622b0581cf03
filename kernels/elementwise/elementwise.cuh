// Elementwise ops shared by both steps: the op codes of camel-core's `UnaryOp::code` /
// `BinaryOp::code` (crates/camel-core/src/backend/mod.rs) and the GELU derivative (binary op 5,
// g·gelu'(x) with a = x, b = g).
#pragma once

#include "common/common.cuh"

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
