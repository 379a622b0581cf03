// HGEMM step 15 — step 14 with XOR-swizzled shared tiles: the 16-byte chunk c of shared row r
// is stored at chunk c ^ f(r), so the eight row addresses of every ldmatrix phase (and the
// eight 16-byte stores of every quarter-warp) fall in eight distinct bank groups. Unlike
// padding, the tile stays dense and 128-byte aligned (the layout TMA writes on Hopper).
// The template and its conventions: hmma.cuh; measurements: docs/kernels/matmul.md.
#include "hmma.cuh"

// BM, BN, BK, WM, WN, STAGES, SWZ, ASYNC, GROUP
HGEMM_STEP(hgemm_15_f16, __half, 256, 128, 128, 32, 64, 32, 2, true, false, 1)
HGEMM_STEP(hgemm_15_bf16, __nv_bfloat16, 256, 128, 128, 32, 64, 32, 2, true, false, 1)
