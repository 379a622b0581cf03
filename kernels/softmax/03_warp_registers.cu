// Softmax step 3: the row in registers, read from global memory once, several short rows per
// warp (softmax/softmax.cuh has the row code). This file instantiates step 3's forward and the
// backward of steps 3 and 4 for every shape softmax3_shape can pick (common/rows.cuh lists them).

#include "softmax/softmax.cuh"

#define SOFTMAX3(G, VEC, NV)                                                                              \
    SOFTMAX3_FWD(softmax3, G, VEC, NV, false, false)                                                      \
    SOFTMAX3_FWD(log_softmax3, G, VEC, NV, false, true)                                                   \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G)                                       \
        softmax3_bwd_g##G##_v##VEC##_n##NV##_f32(const float* __restrict__ y, const float* __restrict__ g,  \
                                                  float* __restrict__ dx, long long rows, long long cols,  \
                                                  int log_out) {                                          \
        softmax3_prefetch<G>(y, g, rows, cols);                                                           \
        CAMEL_PDL_WAIT();                                                                                 \
        CAMEL_PDL_TRIGGER();                                                                              \
        softmax3_bwd_row<G, VEC, NV>(y, g, dx, rows, cols, log_out);                                      \
    }

CAMEL_ROW3_SHAPES(SOFTMAX3)
