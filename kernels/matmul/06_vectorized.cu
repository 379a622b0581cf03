// SGEMM step 6 — vectorized loads, A transposed in shared memory: the tile shapes of step 5
// (128×128 per block, 8×8 per thread, BK = 8), but global memory is read with float4 (one
// 16-byte load instead of four) and both operands are stored k-major in shared memory, so a
// thread's 8 values of op(A) for one k are contiguous and come in two float4 loads (step 5
// needed eight scalar loads with a stride). The results are stored as float4 too.
// What it measures: docs/kernels/matmul.md.
#include "gemm_tile.cuh"

DEFINE_BLOCK_TILE(sgemm_06_vectorized, 128, 128, 8, 8, 8)
