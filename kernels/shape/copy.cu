// Data movement for shape ops: a strided gather (permute, slice, broadcast-expand are all this
// copy with different strides), constant padding, and dtype casts. One thread per output element.
#include "common/common.cuh"

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

struct PadArgs {
    long long ndim;
    long long out_shape[MAX_DIMS];
    long long src_shape[MAX_DIMS];
    long long before[MAX_DIMS];
};

extern "C" __global__ void pad_f32(const float* __restrict__ src, float* __restrict__ dst, long long n, PadArgs a,
                                   float value) {
    CAMEL_PDL_WAIT();
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

extern "C" __global__ void cast_f32_i64(const float* __restrict__ x, long long* __restrict__ y, long long n) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) y[i] = (long long)x[i];
}
extern "C" __global__ void cast_i64_f32(const long long* __restrict__ x, float* __restrict__ y, long long n) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) y[i] = (float)x[i];
}
