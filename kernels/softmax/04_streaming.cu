// Softmax step 4, forward only: step 3 with cache-streaming hints on the row's load and store
// (ld.global.cs / st.global.cs: evict first). Each element of x is read once and each of y written
// once, so neither needs to stay in L2; marking them evict-first leaves L2 to the lines still
// being filled and drained. Same arithmetic and shapes as step 3 (the same results bit for bit);
// kept selectable as the experiment that shows whether the hint pays here (docs/kernels/softmax.md).
// The backward stays step 3's.

#include "softmax/softmax.cuh"

#define SOFTMAX4(G, VEC, NV)                                                                              \
    SOFTMAX3_FWD(softmax4, G, VEC, NV, true, false, float, f32)                                           \
    SOFTMAX3_FWD(log_softmax4, G, VEC, NV, true, true, float, f32)

CAMEL_ROW3_SHAPES(SOFTMAX4)
