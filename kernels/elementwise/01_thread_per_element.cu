// Elementwise step 1: one thread per element in a grid-stride loop, so any grid covers any n.
// The plain form every later step is measured against: a warp issues one 4-byte load per lane
// and stream. Launchers: crates/camel-cuda/src/kernels/elementwise.rs.

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
