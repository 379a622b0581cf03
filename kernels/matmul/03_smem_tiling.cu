// SGEMM step 3 — shared-memory cache blocking: a 32×32 block of threads computes a 32×32 tile
// of C. For each 32-wide slice of K it loads one tile of op(A) and one of op(B) into shared
// memory (each global element read once per block instead of 32 times), then every thread
// runs its 32-long dot product out of shared memory. Edges are zero-filled, so any M, N, K works.
// What it measures: docs/kernels/matmul.md.
#include "common_gemm.cuh"

#define TILE 32

extern "C" __global__ void sgemm_03_smem_tiling(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];
    GEMM_BATCH_OFFSETS();
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * TILE + ty;
    int j = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (i < M && ka < K) ? load_a(A, M, K, transA, i, ka) : 0.0f;
        Bs[ty][tx] = (kb < K && j < N) ? load_b(B, N, K, transB, kb, j) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (i < M && j < N) GEMM_STORE(i, j, acc);
}
