// SGEMM step 18 — TF32 on Hopper: HGEMM step 17's kernel (TMA loads into swizzled shared tiles,
// `wgmma` warpgroup MMAs reading both operands from shared memory, one producer and two consumer
// warpgroups a block, a 128×BN tile) on f32 operands that the tensor cores read as TF32. wgmma
// takes TF32 operands K-major only, so the kernel is the `_nt` one (A stored M×K, B stored N×K)
// and the launcher transposes other layouts into a workspace first. Needs sm_90a.
// The template and its conventions: wgmma.cuh; measurements: docs/kernels/matmul.md.
#include "wgmma.cuh"

WGMMA_KERNEL(sgemm_18_tf32_w256_nt, float, 256, false, true)
WGMMA_KERNEL(sgemm_18_tf32_w128_nt, float, 128, false, true)
WGMMA_KERNEL(sgemm_18_tf32_w64_nt, float, 64, false, true)
// Persistent blocks, C leaving through TMA stores (wg::persistent_body).
WGMMA_PERSISTENT_KERNEL(sgemm_18p_tf32_w256_nt, float, 256, false, true)
WGMMA_PERSISTENT_KERNEL(sgemm_18p_tf32_w128_nt, float, 128, false, true)
