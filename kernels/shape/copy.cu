// Data movement for shape ops: a strided gather (permute, slice, broadcast-expand are all this
// copy with different strides), constant padding, and dtype casts. One thread per output element.
// The copies move elements of 2 (f16, bf16: `_b16`), 4 (f32) or 8 (i64) bytes; they never look
// inside them.
#include "common/common.cuh"
#include "common/half.cuh"

#define MAX_DIMS 8

struct StridedArgs {
    long long ndim;
    long long offset;
    long long shape[MAX_DIMS];
    long long strides[MAX_DIMS];
};

template <typename T>
__device__ void copy_strided(const T* __restrict__ src, T* __restrict__ dst, long long n, const StridedArgs& a) {
    GRID_STRIDE_LOOP(i, n) {
        long long rem = i, off = a.offset;
        for (int d = (int)a.ndim - 1; d >= 0; --d) {
            long long q = rem % a.shape[d];
            rem /= a.shape[d];
            off += q * a.strides[d];
        }
        dst[i] = src[off];
    }
}

extern "C" __global__ void copy_strided_f32(const float* src, float* dst, long long n, StridedArgs a) {
    CAMEL_PDL_WAIT();
    copy_strided(src, dst, n, a);
}
extern "C" __global__ void copy_strided_i64(const long long* src, long long* dst, long long n, StridedArgs a) {
    CAMEL_PDL_WAIT();
    copy_strided(src, dst, n, a);
}
extern "C" __global__ void copy_strided_b16(const unsigned short* src, unsigned short* dst, long long n,
                                            StridedArgs a) {
    CAMEL_PDL_WAIT();
    copy_strided(src, dst, n, a);
}

// The general strided copy: `dst[dst_offset + Σ i_d·dst_strides[d]] = src[offset + Σ i_d·strides[d]]`
// over the multi-indices of `shape`. `cat` writes each input into its slab of the output with it.
struct Strided2Args {
    long long ndim;
    long long offset;
    long long dst_offset;
    long long shape[MAX_DIMS];
    long long strides[MAX_DIMS];
    long long dst_strides[MAX_DIMS];
};

template <typename T>
__device__ void copy_strided2(const T* __restrict__ src, T* __restrict__ dst, long long n, const Strided2Args& a) {
    GRID_STRIDE_LOOP(i, n) {
        long long rem = i, off = a.offset, doff = a.dst_offset;
        for (int d = (int)a.ndim - 1; d >= 0; --d) {
            long long q = rem % a.shape[d];
            rem /= a.shape[d];
            off += q * a.strides[d];
            doff += q * a.dst_strides[d];
        }
        dst[doff] = src[off];
    }
}

extern "C" __global__ void copy_strided2_f32(const float* src, float* dst, long long n, Strided2Args a) {
    CAMEL_PDL_WAIT();
    copy_strided2(src, dst, n, a);
}
extern "C" __global__ void copy_strided2_i64(const long long* src, long long* dst, long long n, Strided2Args a) {
    CAMEL_PDL_WAIT();
    copy_strided2(src, dst, n, a);
}
extern "C" __global__ void copy_strided2_b16(const unsigned short* src, unsigned short* dst, long long n,
                                             Strided2Args a) {
    CAMEL_PDL_WAIT();
    copy_strided2(src, dst, n, a);
}

struct PadArgs {
    long long ndim;
    long long out_shape[MAX_DIMS];
    long long src_shape[MAX_DIMS];
    long long before[MAX_DIMS];
};

// dst = src padded with `value` (rounded once to T where T is 16-bit), one thread per output.
template <typename T>
__device__ __forceinline__ void pad(const T* __restrict__ src, T* __restrict__ dst, long long n, const PadArgs& a,
                                    T value) {
    GRID_STRIDE_LOOP(i, n) {
        long long rem = i, off = 0, stride = 1;
        bool inside = true;
        for (int d = (int)a.ndim - 1; d >= 0; --d) {
            long long q = rem % a.out_shape[d] - a.before[d];
            rem /= a.out_shape[d];
            if (q < 0 || q >= a.src_shape[d]) inside = false;
            off += q * stride;
            stride *= a.src_shape[d];
        }
        dst[i] = inside ? src[off] : value;
    }
}

#define PAD(SUF, T)                                                                                      \
    extern "C" __global__ void pad_##SUF(const T* __restrict__ src, T* __restrict__ dst, long long n,     \
                                         PadArgs a, float value) {                                        \
        CAMEL_PDL_WAIT();                                                                                 \
        pad(src, dst, n, a, camel::from_float<T>(value));                                                 \
    }
PAD(f32, float)
PAD(f16, __half)
PAD(bf16, __nv_bfloat16)

// dtype casts: every value goes through f32 (common/half.cuh). Widening to f32 is exact (f16,
// bf16); narrowing rounds to nearest, ties to even, as the `half` crate does on the CPU; to i64
// truncates toward zero (NaN gives 0); from i64 rounds to f32 first, on both devices.
template <typename S, typename D>
__device__ void cast(const S* __restrict__ x, D* __restrict__ y, long long n) {
    GRID_STRIDE_LOOP(i, n) y[i] = camel::from_float<D>(camel::to_float(x[i]));
}

#define CAST(SN, S, DN, D)                                                                      \
    extern "C" __global__ void cast_##SN##_##DN(const S* __restrict__ x, D* __restrict__ y, long long n) { \
        CAMEL_PDL_WAIT();                                                                       \
        cast(x, y, n);                                                                          \
    }
CAST(f32, float, i64, long long)
CAST(f32, float, f16, __half)
CAST(f32, float, bf16, __nv_bfloat16)
CAST(i64, long long, f32, float)
CAST(i64, long long, f16, __half)
CAST(i64, long long, bf16, __nv_bfloat16)
CAST(f16, __half, f32, float)
CAST(f16, __half, i64, long long)
CAST(f16, __half, bf16, __nv_bfloat16)
CAST(bf16, __nv_bfloat16, f32, float)
CAST(bf16, __nv_bfloat16, i64, long long)
CAST(bf16, __nv_bfloat16, f16, __half)

// The casts between f32 and the 16-bit floats, eight elements a thread: two float4 and one
// 16-byte word of 16-bit elements (or two such words), so both sides move 16 bytes per access.
// The launcher picks these when every pointer is 16-byte aligned. The first threads take the
// last n % 8.
__device__ __forceinline__ void load8(const float* p, long long i, float* v) {
    float4 a = reinterpret_cast<const float4*>(p)[2 * i], b = reinterpret_cast<const float4*>(p)[2 * i + 1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
template <typename T>
__device__ __forceinline__ void load8(const T* p, long long i, float* v) {
    camel::Half8 w;
    w.u = reinterpret_cast<const uint4*>(p)[i];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = camel::bits_to_float<T>(w.h[j]);
}
__device__ __forceinline__ void store8(float* p, long long i, const float* v) {
    reinterpret_cast<float4*>(p)[2 * i] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[2 * i + 1] = make_float4(v[4], v[5], v[6], v[7]);
}
template <typename T>
__device__ __forceinline__ void store8(T* p, long long i, const float* v) {
    camel::Half8 w;
#pragma unroll
    for (int j = 0; j < 8; ++j) w.h[j] = camel::float_to_bits<T>(v[j]);
    reinterpret_cast<uint4*>(p)[i] = w.u;
}

template <typename S, typename D>
__device__ void cast_vec8(const S* __restrict__ x, D* __restrict__ y, long long n) {
    GRID_STRIDE_LOOP(i, n / 8) {
        float v[8];
        load8(x, i, v);
        store8(y, i, v);
    }
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, i = n / 8 * 8 + t;
    if (t < 8 && i < n) y[i] = camel::from_float<D>(camel::to_float(x[i]));
}

#define CAST_VEC8(SN, S, DN, D)                                                                              \
    extern "C" __global__ void cast_vec8_##SN##_##DN(const S* __restrict__ x, D* __restrict__ y, long long n) { \
        CAMEL_PDL_WAIT();                                                                                    \
        cast_vec8(x, y, n);                                                                                  \
    }
CAST_VEC8(f32, float, f16, __half)
CAST_VEC8(f32, float, bf16, __nv_bfloat16)
CAST_VEC8(f16, __half, f32, float)
CAST_VEC8(bf16, __nv_bfloat16, f32, float)
CAST_VEC8(f16, __half, bf16, __nv_bfloat16)
CAST_VEC8(bf16, __nv_bfloat16, f16, __half)

// out[i] = value for 16-bit elements (the NaN poison of f16 and bf16 outputs).
extern "C" __global__ void fill_b16(unsigned short* __restrict__ out, long long n, unsigned short value) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) out[i] = value;
}
