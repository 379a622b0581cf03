// SGEMM step 5 — 2-D block tiling: each thread computes a TM×TN = 8×8 block of C. Per k it
// loads 8 values of op(A) and 8 of op(B) from shared memory into registers and does 64 FMAs
// with them (an outer product), so shared-memory loads per FMA drop to 1/4. 256 threads
// compute a 128×128 tile of C; each loads 4 scalars of each operand's tile per K-slice.
// What it measures: docs/kernels/matmul.md.
#include "common_gemm.cuh"

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define NT (BM * BN / (TM * TN))  // 256 threads

extern "C" __global__ void __launch_bounds__(NT) sgemm_05_blocktiling_2d(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];
    GEMM_BATCH_OFFSETS();
    const int tid = threadIdx.x;
    const int tc = tid % (BN / TN), tr = tid / (BN / TN);
    const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
    float acc[TM][TN] = {{0.0f}};
    float rm[TM], rn[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile_a<BM, BK, NT>(As, A, M, K, transA, i0, k0, tid);
        load_tile_b<BK, BN, NT>(Bs, B, N, K, transB, k0, j0, tid);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
            for (int t = 0; t < TM; ++t) rm[t] = As[(tr * TM + t) * BK + kk];
#pragma unroll
            for (int t = 0; t < TN; ++t) rn[t] = Bs[kk * BN + tc * TN + t];
#pragma unroll
            for (int a = 0; a < TM; ++a)
#pragma unroll
                for (int b = 0; b < TN; ++b) acc[a][b] += rm[a] * rn[b];
        }
        __syncthreads();
    }
#pragma unroll
    for (int a = 0; a < TM; ++a) {
        int i = i0 + tr * TM + a;
#pragma unroll
        for (int b = 0; b < TN; ++b) {
            int j = j0 + tc * TN + b;
            if (i < M && j < N) GEMM_STORE(i, j, acc[a][b]);
        }
    }
}
