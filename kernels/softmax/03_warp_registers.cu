// Softmax step 3: the row in registers, read from global memory once, several short rows per
// warp (softmax/softmax.cuh has the row code). This file instantiates step 3's forward and the
// backward of steps 3 and 4 for every shape softmax3_shape can pick (common/rows.cuh lists them),
// in f32 and in the two 16-bit types, which widen to f32 as they load and round once as they
// store.

#include "softmax/softmax.cuh"

#define SOFTMAX3_T(G, VEC, NV, T, SUF)                                                                    \
    SOFTMAX3_FWD(softmax3, G, VEC, NV, false, false, T, SUF)                                              \
    SOFTMAX3_FWD(log_softmax3, G, VEC, NV, false, true, T, SUF)                                           \
    SOFTMAX3_BWD(G, VEC, NV, T, SUF)

#define SOFTMAX3(G, VEC, NV)                                                                              \
    SOFTMAX3_T(G, VEC, NV, float, f32)                                                                    \
    SOFTMAX3_T(G, VEC, NV, __half, f16)                                                                   \
    SOFTMAX3_T(G, VEC, NV, __nv_bfloat16, bf16)

CAMEL_ROW3_SHAPES(SOFTMAX3)
