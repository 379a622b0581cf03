// Shared conventions of the SGEMM ladder. Every step computes, for each batch b = blockIdx.z,
//   C[b] = op(A[b]) · op(B[b]),  C[b] is M×N row-major,
// where op(A) is M×K (A stored K×M when transA) and op(B) is K×N (B stored N×K when transB).
// Batch strides of 0 broadcast one matrix over the batch.
#pragma once

#define GEMM_ARGS                                                                                    \
    const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, \
        int K, int transA, int transB, long long strideA, long long strideB, long long strideC

__device__ __forceinline__ float load_a(const float* A, int M, int K, int transA, int i, int k) {
    return transA ? A[(long long)k * M + i] : A[(long long)i * K + k];
}
__device__ __forceinline__ float load_b(const float* B, int N, int K, int transB, int k, int j) {
    return transB ? B[(long long)j * K + k] : B[(long long)k * N + j];
}
