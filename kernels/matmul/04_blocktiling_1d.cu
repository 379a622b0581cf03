// SGEMM step 4 — 1-D block tiling: each thread now computes TM = 8 outputs of one column of C
// instead of one. A 64×64 tile of C is computed by 512 threads; per k the thread loads one
// value of B from shared memory into a register and reuses it for its 8 rows, so shared-memory
// loads per FMA drop from 2 to 1 + 1/8. The tiles of op(A) (64×8) and op(B) (8×64) are loaded
// with one scalar per thread, coalesced along whichever dimension is contiguous in memory.
// What it measures: docs/kernels/matmul.md.
#include "common_gemm.cuh"

#define BM 64
#define BN 64
#define BK 8
#define TM 8
#define NT (BM * BN / TM)  // 512 threads

extern "C" __global__ void __launch_bounds__(NT) sgemm_04_blocktiling_1d(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];
    GEMM_BATCH_OFFSETS();
    const int tid = threadIdx.x;
    const int tc = tid % BN, tr = tid / BN;  // column of C, and which group of TM rows
    const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
    float acc[TM] = {0.0f};
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile_a<BM, BK, NT>(As, A, M, K, transA, i0, k0, tid);
        load_tile_b<BK, BN, NT>(Bs, B, N, K, transB, k0, j0, tid);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float b = Bs[kk * BN + tc];
#pragma unroll
            for (int t = 0; t < TM; ++t) acc[t] += As[(tr * TM + t) * BK + kk] * b;
        }
        __syncthreads();
    }
    const int j = j0 + tc;
#pragma unroll
    for (int t = 0; t < TM; ++t) {
        int i = i0 + tr * TM + t;
        if (i < M && j < N) GEMM_STORE(i, j, acc[t]);
    }
}
