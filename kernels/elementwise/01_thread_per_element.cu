// Elementwise step 1: one thread per element in a grid-stride loop, so any grid covers any n.
// The plain form every later step is measured against: a warp issues one 4-byte load per lane
// and stream. Launchers: crates/camel-cuda/src/kernels/elementwise.rs.
// The masking kernels (`where_*`, `triangle_*`, `clamp_*`, `arange_i64`) live only in this
// step: like `binary_bcast_f32` they index through shapes (broadcast strides, row/column of a
// matrix) or produce integers, where float4 loads of step 2 do not apply; every step's table
// runs them from here.

#include "elementwise/elementwise.cuh"

// out[i] = value
extern "C" __global__ void fill_f32(float* __restrict__ out, long long n, float value) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) { out[i] = value; }
}

extern "C" __global__ void unary_f32(const float* __restrict__ x, float* __restrict__ y, long long n, int op, float s) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) y[i] = unary_apply(op, x[i], s);
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

// out[i] = a[i] op b[i] with the ops of step 1 plus 5 (gelu backward), scalar.
extern "C" __global__ void binary2_f32(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ out, long long n, int op) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) out[i] = binary_apply2(op, a[i], b[i]);
}

struct WhereArgs {
    long long ndim;
    long long shape[BCAST_MAX_DIMS];  // output shape
    long long sm[BCAST_MAX_DIMS];     // the mask's strides against the output (0 where broadcast)
    long long sa[BCAST_MAX_DIMS];     // on_true's
    long long sb[BCAST_MAX_DIMS];     // on_false's
};

// out[i] = mask[i] != 0 ? a[i] : b[i], each operand broadcast through its strides. A select, not
// arithmetic, so an inf or NaN in the branch not taken never reaches the output. M: the mask's
// element type, T: the values' (a select copies a value, so it never rounds).
template <typename M, typename T>
__device__ __forceinline__ void where_elems(const M* __restrict__ m, const T* __restrict__ a,
                                             const T* __restrict__ b, T* __restrict__ out, long long n,
                                             const WhereArgs& p) {
    GRID_STRIDE_LOOP(i, n) {
        long long rem = i, im = 0, ia = 0, ib = 0;
        for (int d = (int)p.ndim - 1; d >= 0; --d) {
            long long q = rem % p.shape[d];
            rem /= p.shape[d];
            im += q * p.sm[d];
            ia += q * p.sa[d];
            ib += q * p.sb[d];
        }
        out[i] = camel::to_float(m[im]) != 0.0f ? a[ia] : b[ib];
    }
}

// triu / tril over the last two dims of x viewed as [batch, rows, cols]: element (r, c) is kept
// when c - r >= k (upper) or c - r <= k (lower), else written as 0.
template <typename T>
__device__ __forceinline__ void triangle_elems(const T* __restrict__ x, T* __restrict__ y, long long n, long long rows,
                                         long long cols, long long k, int upper) {
    GRID_STRIDE_LOOP(i, n) {
        long long c = i % cols, r = (i / cols) % rows;
        bool keep = upper ? (c - r >= k) : (c - r <= k);
        y[i] = keep ? x[i] : camel::from_float<T>(0.0f);
    }
}

// y[i] = clamp(x[i], lo, hi) (mode 0) or its derivative mask (mode 1); see clamp_apply. In f32,
// rounded once: a 16-bit x comes back unchanged or as the bound, rounded.
template <typename T>
__device__ __forceinline__ void clamp_elems(const T* __restrict__ x, T* __restrict__ y, long long n, float lo, float hi,
                                      int mode) {
    GRID_STRIDE_LOOP(i, n) y[i] = camel::from_float<T>(clamp_apply(camel::to_float(x[i]), lo, hi, mode));
}

// Kernel names: where_{mask}_{values} for every pair of float types; triangle_{T}, clamp_{T}.
#define WHERE(MS, M, TS, T)                                                                                 \
    extern "C" __global__ void where_##MS##_##TS(const M* __restrict__ m, const T* __restrict__ a,          \
                                                 const T* __restrict__ b, T* __restrict__ out, long long n,  \
                                                 WhereArgs p) {                                              \
        CAMEL_PDL_WAIT();                                                                                    \
        where_elems(m, a, b, out, n, p);                                                                    \
    }
#define MASKING(TS, T)                                                                                      \
    WHERE(f32, float, TS, T)                                                                                \
    WHERE(f16, __half, TS, T)                                                                               \
    WHERE(bf16, __nv_bfloat16, TS, T)                                                                       \
    extern "C" __global__ void triangle_##TS(const T* __restrict__ x, T* __restrict__ y, long long n,        \
                                             long long rows, long long cols, long long k, int upper) {       \
        CAMEL_PDL_WAIT();                                                                                    \
        triangle_elems(x, y, n, rows, cols, k, upper);                                                             \
    }                                                                                                        \
    extern "C" __global__ void clamp_##TS(const T* __restrict__ x, T* __restrict__ y, long long n, float lo,  \
                                          float hi, int mode) {                                              \
        CAMEL_PDL_WAIT();                                                                                    \
        clamp_elems(x, y, n, lo, hi, mode);                                                                        \
    }
MASKING(f32, float)
MASKING(f16, __half)
MASKING(bf16, __nv_bfloat16)

// out[i] = start + i * step (the host checks that the last value fits in i64). `i * step` alone
// may not fit when start and end have opposite signs, so the sum is taken in unsigned (wrapping)
// arithmetic, which gives the exact in-range result without signed overflow.
extern "C" __global__ void arange_i64(long long* __restrict__ out, long long n, long long start, long long step) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) {
        out[i] = (long long)((unsigned long long)start + (unsigned long long)i * (unsigned long long)step);
    }
}

// ---------------------------------------------------------------- f16 and bf16
// The same ops on 16-bit elements: each widens to f32 (common/half.cuh), applies the f32
// function above and rounds the result once. One thread per element, as the f32 kernels of this
// step; every step's table runs them from here.

template <typename T>
__device__ void unary_h(const T* __restrict__ x, T* __restrict__ y, long long n, int op, float s) {
    GRID_STRIDE_LOOP(i, n) y[i] = camel::from_float<T>(unary_apply(op, camel::to_float(x[i]), s));
}

// Same shapes, the binary ops plus 5 (gelu backward).
template <typename T>
__device__ void binary_h(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, long long n, int op) {
    GRID_STRIDE_LOOP(i, n) out[i] = camel::from_float<T>(binary_apply2(op, camel::to_float(a[i]), camel::to_float(b[i])));
}

template <typename T>
__device__ void binary_bcast_h(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, long long n,
                               int op, const BcastArgs& p) {
    GRID_STRIDE_LOOP(i, n) {
        long long rem = i, ia = 0, ib = 0;
        for (int d = (int)p.ndim - 1; d >= 0; --d) {
            long long q = rem % p.shape[d];
            rem /= p.shape[d];
            ia += q * p.sa[d];
            ib += q * p.sb[d];
        }
        out[i] = camel::from_float<T>(binary_apply(op, camel::to_float(a[ia]), camel::to_float(b[ib])));
    }
}

#define HALF_ELEMENTWISE(SUFFIX, T)                                                                              \
    extern "C" __global__ void unary_##SUFFIX(const T* __restrict__ x, T* __restrict__ y, long long n, int op,   \
                                              float s) {                                                         \
        CAMEL_PDL_WAIT();                                                                                        \
        unary_h(x, y, n, op, s);                                                                                 \
    }                                                                                                            \
    extern "C" __global__ void binary2_##SUFFIX(const T* __restrict__ a, const T* __restrict__ b,                \
                                                T* __restrict__ out, long long n, int op) {                      \
        CAMEL_PDL_WAIT();                                                                                        \
        binary_h(a, b, out, n, op);                                                                              \
    }                                                                                                            \
    extern "C" __global__ void binary_bcast_##SUFFIX(const T* __restrict__ a, const T* __restrict__ b,           \
                                                     T* __restrict__ out, long long n, int op, BcastArgs p) {    \
        CAMEL_PDL_WAIT();                                                                                        \
        binary_bcast_h(a, b, out, n, op, p);                                                                     \
    }
HALF_ELEMENTWISE(f16, __half)
HALF_ELEMENTWISE(bf16, __nv_bfloat16)
