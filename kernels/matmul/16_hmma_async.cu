// HGEMM step 16 — step 15's swizzled tiles filled by `cp.async` (global → shared without
// registers), four slices in flight: a slice is requested three iterations before it is
// multiplied, and the only wait is `cp.async.wait_group` and one barrier a slice. A 128×256
// block tile with 64×64 warp tiles (4×8 mma tiles a warp: more math per ldmatrix), and blocks
// launched in groups of eight tile rows so that a wave reuses the same columns of B from L2.
// The template and its conventions: hmma.cuh; measurements: docs/kernels/matmul.md.
#include "hmma.cuh"

// BM, BN, BK, WM, WN, STAGES, SWZ, ASYNC, GROUP
HGEMM_STEP(hgemm_16_f16, __half, 256, 128, 256, 32, 64, 64, 4, true, true, 8)
HGEMM_STEP(hgemm_16_bf16, __nv_bfloat16, 256, 128, 256, 32, 64, 64, 4, true, true, 8)
