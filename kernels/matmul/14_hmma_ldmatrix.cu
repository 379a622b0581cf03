// HGEMM step 14 — 16-bit tensor cores: `mma.sync.m16n8k16` fed by `ldmatrix`, f32 accumulation.
// The data path is step 11's (global loads through registers into two shared buffers), with
// 16-byte chunks of eight elements and row-major shared tiles (no padding, no swizzle). A
// 128×128 block tile, BK = 32, eight warps of 64×32 (4×4 mma tiles each).
// What it teaches: the fragment layouts, and that ldmatrix on a plain tile is bank-conflicted
// (eight 16-byte rows of one 8×8 matrix share banks); step 15 removes the conflicts.
// The template and its conventions: hmma.cuh; measurements: docs/kernels/matmul.md.
#include "hmma.cuh"

// BM, BN, BK, WM, WN, STAGES, SWZ, ASYNC, GROUP
HGEMM_STEP(hgemm_14_f16, __half, 256, 128, 128, 32, 64, 32, 2, false, false, 1)
HGEMM_STEP(hgemm_14_bf16, __nv_bfloat16, 256, 128, 128, 32, 64, 32, 2, false, false, 1)
