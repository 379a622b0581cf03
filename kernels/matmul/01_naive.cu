// SGEMM step 1 — naive: one thread per output element, threadIdx.x walks the ROWS of C.
// Adjacent threads of a warp read different rows of A and write different rows of C, so
// neither access coalesces. It is here as the baseline every later step is measured against.
// What it measures: docs/kernels/matmul.md.
#include "common_gemm.cuh"

extern "C" __global__ void sgemm_01_naive(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    GEMM_BATCH_OFFSETS();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += load_a(A, M, K, transA, i, k) * load_b(B, N, K, transB, k, j);
        GEMM_STORE(i, j, acc);
    }
}
