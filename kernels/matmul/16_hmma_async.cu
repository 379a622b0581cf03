// HGEMM step 16 — step 15's swizzled tiles filled by `cp.async` (global → shared without
// registers), every one of three stages in flight, and a main loop that never waits on its own
// loads: the fragments of the next 16-deep step are loaded before the mma of this one (two
// register sets), and a slice's one barrier sits in its last step, after which the next slice's
// first fragments load before the last mma. 64×64 warp tiles (4×8 mma tiles a warp: more math
// per ldmatrix) in 64-deep slices, blocks launched in groups of eight tile rows so that a wave
// reuses the same columns of B from L2, and C staged through the idle pipeline buffers so that
// it leaves in 16-byte row chunks.
// Two block tiles: 128×256 of eight warps, one block a multiprocessor; and 128×128 of four
// warps, two blocks a multiprocessor, for outputs whose last 256-wide tile column would be half
// empty and for grids too small to fill a wave of 256-wide tiles (`hmma_width` in hgemm.rs).
// The template and its conventions: hmma.cuh; measurements: docs/kernels/matmul.md.
#include "hmma.cuh"

// BM, BN, BK, WM, WN, STAGES, SWZ, ASYNC, GROUP
HGEMM_STEP(hgemm_16_f16, __half, 256, 128, 256, 64, 64, 64, 3, true, true, 8)
HGEMM_STEP(hgemm_16_bf16, __nv_bfloat16, 256, 128, 256, 64, 64, 64, 3, true, true, 8)
HGEMM_STEP(hgemm_16n_f16, __half, 128, 128, 128, 64, 64, 64, 3, true, true, 8)
HGEMM_STEP(hgemm_16n_bf16, __nv_bfloat16, 128, 128, 128, 64, 64, 64, 3, true, true, 8)
