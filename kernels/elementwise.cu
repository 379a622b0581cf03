// elementwise.cu — one thread per element, grid-stride. Launchers:
// crates/camel-cuda/src/kernels/elementwise.rs.
#include "common.cuh"

// out[i] = value
extern "C" __global__ void fill_f32(float* __restrict__ out, long long n, float value) {
    GRID_STRIDE_LOOP(i, n) { out[i] = value; }
}
