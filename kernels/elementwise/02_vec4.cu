// Elementwise step 2: float4 loads and stores. Each thread moves 16 bytes per load instead of 4,
// so a warp issues a quarter of the memory instructions for the same bytes; the grid-stride loop
// walks float4s and the first threads take the last n % 4 elements. The launcher picks these only
// when every pointer is 16-byte aligned.

#include "elementwise/elementwise.cuh"

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
