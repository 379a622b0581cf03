// half.cuh — f16 and bf16 elements for kernels that compute in f32: `to_float` widens (exact),
// `from_float<T>` narrows with round-to-nearest-even (the `half` crate's rounding on the CPU), so
// every op on a 16-bit tensor computes in f32 and rounds once, as PyTorch's elementwise kernels do.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace camel {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(long long x) { return (float)x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
// to i64: truncation toward zero, saturating at the ends of i64, NaN giving 0: Rust's `as`, so
// the CPU and the GPU agree (a plain conversion gives i64::MIN for a NaN on the GPU)
template <>
__device__ __forceinline__ long long from_float<long long>(float x) {
    if (x != x) return 0;
    if (x >= 9223372036854775808.0f) return 9223372036854775807LL;
    if (x < -9223372036854775808.0f) return (-9223372036854775807LL - 1);
    return (long long)x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// The same conversions on raw 16-bit patterns, for kernels that move eight elements at a time as
// one 16-byte word (a union of uint4 and unsigned short[8]).
template <typename T>
__device__ __forceinline__ float bits_to_float(unsigned short b);
template <>
__device__ __forceinline__ float bits_to_float<__half>(unsigned short b) { return __half2float(__ushort_as_half(b)); }
template <>
__device__ __forceinline__ float bits_to_float<__nv_bfloat16>(unsigned short b) {
    return __bfloat162float(__ushort_as_bfloat16(b));
}
template <typename T>
__device__ __forceinline__ unsigned short float_to_bits(float x);
template <>
__device__ __forceinline__ unsigned short float_to_bits<__half>(float x) { return __half_as_ushort(__float2half_rn(x)); }
template <>
__device__ __forceinline__ unsigned short float_to_bits<__nv_bfloat16>(float x) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// Eight 16-bit elements in one 16-byte word.
union Half8 {
    uint4 u;
    unsigned short h[8];
};

}  // namespace camel
