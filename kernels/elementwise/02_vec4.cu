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

// ---------------------------------------------------------------- f16 and bf16
// The same 16-byte words for 16-bit elements: eight per load and per store (common/half.cuh's
// Half8), each widened to f32, computed and rounded once. The first threads take the last n % 8.

// A unary op does twice f32's arithmetic per byte here, so each thread keeps two words in flight
// (the second a grid stride away): the loads of one overlap the other's math.
template <typename T>
__device__ void unary_vec8(const T* __restrict__ x, T* __restrict__ y, long long n, int op, float s) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    uint4* y8 = reinterpret_cast<uint4*>(y);
    const long long words = n / 8, stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += 2 * stride) {
        const bool two = i + stride < words;
        camel::Half8 v, w;
        v.u = x8[i];
        if (two) w.u = x8[i + stride];
#pragma unroll
        for (int j = 0; j < 8; ++j)
            v.h[j] = camel::float_to_bits<T>(unary_apply(op, camel::bits_to_float<T>(v.h[j]), s));
        y8[i] = v.u;
        if (two) {
#pragma unroll
            for (int j = 0; j < 8; ++j)
                w.h[j] = camel::float_to_bits<T>(unary_apply(op, camel::bits_to_float<T>(w.h[j]), s));
            y8[i + stride] = w.u;
        }
    }
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, i = words * 8 + t;
    if (t < 8 && i < n) y[i] = camel::from_float<T>(unary_apply(op, camel::to_float(x[i]), s));
}

template <typename T>
__device__ void binary_vec8(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, long long n,
                            int op) {
    const uint4* a8 = reinterpret_cast<const uint4*>(a);
    const uint4* b8 = reinterpret_cast<const uint4*>(b);
    uint4* o8 = reinterpret_cast<uint4*>(out);
    GRID_STRIDE_LOOP(i, n / 8) {
        camel::Half8 u, v;
        u.u = a8[i];
        v.u = b8[i];
#pragma unroll
        for (int j = 0; j < 8; ++j)
            u.h[j] = camel::float_to_bits<T>(
                binary_apply2(op, camel::bits_to_float<T>(u.h[j]), camel::bits_to_float<T>(v.h[j])));
        o8[i] = u.u;
    }
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, i = n / 8 * 8 + t;
    if (t < 8 && i < n)
        out[i] = camel::from_float<T>(binary_apply2(op, camel::to_float(a[i]), camel::to_float(b[i])));
}

#define HALF_VEC8(SUFFIX, T)                                                                                     \
    extern "C" __global__ void unary_vec8_##SUFFIX(const T* __restrict__ x, T* __restrict__ y, long long n,      \
                                                   int op, float s) {                                            \
        CAMEL_PDL_WAIT();                                                                                        \
        unary_vec8(x, y, n, op, s);                                                                              \
    }                                                                                                            \
    extern "C" __global__ void binary_vec8_##SUFFIX(const T* __restrict__ a, const T* __restrict__ b,            \
                                                    T* __restrict__ out, long long n, int op) {                  \
        CAMEL_PDL_WAIT();                                                                                        \
        binary_vec8(a, b, out, n, op);                                                                           \
    }
HALF_VEC8(f16, __half)
HALF_VEC8(bf16, __nv_bfloat16)
