// Step 5: step 4's forward with double-buffered K/V tiles filled by cp.async (the kernels are in
// mma.cuh); the backward is step 4's.
//
// What it adds: in steps 3–4 every warp waits at a barrier while the block loads the next K and
// V tiles through registers, so the tensor cores idle for a global-memory round trip per tile.
// Here the copies of tile j + 1 (cp.async: global to shared memory without registers) are
// issued before the warps compute on tile j, into a second pair of buffers, and waited for only
// at the next iteration.

#include "attention/mma.cuh"

ATTN_MMA_FWD_ALL(05, true, true)
