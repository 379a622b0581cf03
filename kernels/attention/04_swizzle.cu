// Step 4: step 3 with `ldmatrix` and swizzled shared tiles (the kernels are in mma.cuh).
//
// What it adds: each fragment load is one `ldmatrix.x4` (four 8 × 8 matrices a warp
// instruction; `.trans` for V, whose B fragments pair two rows), and the tiles' 16-byte chunks
// are XOR-swizzled by row so that the eight rows of every ldmatrix phase land in distinct bank
// groups: no bank conflicts, a quarter of the load instructions.

#include "attention/mma.cuh"

ATTN_MMA_FWD_ALL(04, true, false)
ATTN_MMA_BWD_ALL(04, true)
