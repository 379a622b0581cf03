// Step 3: tensor cores, f16 and bf16, forward and backward (the kernels are in mma.cuh).
//
// What it adds over step 2: the products run on the tensor cores (`mma.sync.m16n8k16`, 16-bit
// inputs, f32 sums) a warp at a time, 16 query rows a warp, and the probabilities P go from the
// score accumulators straight back into the P·V product without leaving the registers. What it
// leaves: fragments read from plain row-major shared tiles with 32-bit (and for V, 16-bit) loads
// that conflict 8-way on the banks; step 4 fixes that.

#include "attention/mma.cuh"

ATTN_MMA_FWD_ALL(03, false, false)
ATTN_MMA_BWD_ALL(03, false)
