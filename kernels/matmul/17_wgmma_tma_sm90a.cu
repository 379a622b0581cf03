// HGEMM step 17 — Hopper: TMA loads into swizzled shared tiles, `wgmma` warpgroup MMAs reading
// both operands from shared memory, one producer and two consumer warpgroups a block, a
// 128×BN tile (BN = 256, or 128 or 64 for narrow outputs and small grids). Needs sm_90a;
// camel-cuda builds the tensor maps and picks this step only on devices that run sm_90a code.
// The template and its conventions: wgmma.cuh; measurements: docs/kernels/matmul.md.
#include "wgmma.cuh"

WGMMA_STEP(hgemm_17_w256_f16, __half, 256)
WGMMA_STEP(hgemm_17_w256_bf16, __nv_bfloat16, 256)
WGMMA_STEP(hgemm_17_w128_f16, __half, 128)
WGMMA_STEP(hgemm_17_w128_bf16, __nv_bfloat16, 128)
WGMMA_STEP(hgemm_17_w64_f16, __half, 64)
WGMMA_STEP(hgemm_17_w64_bf16, __nv_bfloat16, 64)
// Persistent blocks, C leaving through TMA stores (wg::persistent_body).
WGMMA_PERSISTENT_STEP(hgemm_17p_w256_f16, __half, 256)
WGMMA_PERSISTENT_STEP(hgemm_17p_w256_bf16, __nv_bfloat16, 256)
WGMMA_PERSISTENT_STEP(hgemm_17p_w128_f16, __half, 128)
WGMMA_PERSISTENT_STEP(hgemm_17p_w128_bf16, __nv_bfloat16, 128)
