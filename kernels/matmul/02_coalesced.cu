// SGEMM step 2 — global-memory coalescing: the same arithmetic as step 1, but threadIdx.x now
// walks the COLUMNS of C. A warp reads one element of A (broadcast) and 32 consecutive
// elements of B, and writes 32 consecutive elements of C: one transaction instead of 32.
// What it measures: docs/kernels/matmul.md.
#include "common_gemm.cuh"

extern "C" __global__ void sgemm_02_coalesced(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    GEMM_BATCH_OFFSETS();
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += load_a(A, M, K, transA, i, k) * load_b(B, N, K, transB, k, j);
        GEMM_STORE(i, j, acc);
    }
}
