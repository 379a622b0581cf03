// Shared conventions of the SGEMM ladder. Every step computes, for each batch b = blockIdx.z,
//   C[b] = act(op(A[b]) · op(B[b]) + bias),  C[b] is M×N row-major,
// where op(A) is M×K (A stored K×M when transA) and op(B) is K×N (B stored N×K when transB).
// Batch strides of 0 broadcast one matrix over the batch.
//
// Split-K (steps 7–11 only; `kSplit` = 0 elsewhere): when kSplit > 0 each block sums only
// k in [s·kSplit, (s+1)·kSplit) for its split s, with blockIdx.z = batch·splits + s, and
// writes raw partial sums to C laid out [split][batch][M][N] (a workspace); the epilogue
// arguments are then unused and splitk_reduce.cu adds the partials and applies the epilogue.
// It gives small-output, long-K products (a 64×256 layer with K = 784) enough blocks.
//
// The epilogue (applied where each C element is stored): `bias` (length N, broadcast over rows
// and batches; null = none), then, if `Z` is not null, the pre-activation value is stored in
// Z (same layout as C, for the backward pass of GELU), then `act` (0 none, 1 ReLU, 2 GELU with
// the tanh approximation) gives the value stored in C.
#pragma once

#include "common/pdl.cuh"  // CAMEL_PDL_WAIT(): the first statement of every kernel

#define GEMM_ARGS                                                                                    \
    const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, \
        int K, int transA, int transB, long long strideA, long long strideB, long long strideC,    \
        const float *__restrict__ bias, int act, float *__restrict__ Z, int kSplit

// Split-K bookkeeping for the templated steps: this block's K range and batch index, and C
// moved to its split's slice of the workspace.
#define GEMM_SPLIT_K(kBegin, kEnd, zb)                                        \
    int kBegin = 0, kEnd = K, zb = blockIdx.z;                                \
    if (kSplit > 0) {                                                         \
        const int ns_ = (K + kSplit - 1) / kSplit;                            \
        const int sp_ = blockIdx.z % ns_;                                     \
        zb = blockIdx.z / ns_;                                                \
        kBegin = sp_ * kSplit;                                                \
        kEnd = min(K, kBegin + kSplit);                                       \
        C += (long long)sp_ * (gridDim.z / ns_) * strideC;                    \
    }                                                                         \
    A += zb * strideA;                                                        \
    B += zb * strideB;                                                        \
    C += zb * strideC;                                                        \
    if (Z) Z += zb * strideC

// Moves A, B, C and Z to this block's batch.
#define GEMM_BATCH_OFFSETS()      \
    A += blockIdx.z * strideA;    \
    B += blockIdx.z * strideB;    \
    C += blockIdx.z * strideC;    \
    if (Z) Z += blockIdx.z * strideC

__device__ __forceinline__ float load_a(const float* A, int M, int K, int transA, int i, int k) {
    return transA ? A[(long long)k * M + i] : A[(long long)i * K + k];
}
__device__ __forceinline__ float load_b(const float* B, int N, int K, int transB, int k, int j) {
    return transB ? B[(long long)j * K + k] : B[(long long)k * N + j];
}

__device__ __forceinline__ float gelu_tanh(float x) {
    const float c = 0.7978845608028654f;  // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

// The epilogue for element (i, j) of C at offset `idx`: bias, save pre-activation, activation.
// Out of line: inlined at every store of an unrolled register tile, GELU's tanhf made the PTX
// of the big kernels megabytes long. The common case (no epilogue) stays a plain store.
__device__ __noinline__ float gemm_epilogue_full(float v, int j, long long idx, const float* bias,
                                                 int act, float* Z) {
    if (bias) v += bias[j];
    if (Z) Z[idx] = v;
    if (act == 1) v = v > 0.0f ? v : (v != v ? v : 0.0f);  // ReLU; NaN stays NaN
    else if (act == 2) v = gelu_tanh(v);
    return v;
}
__device__ __forceinline__ float gemm_epilogue(float v, int j, long long idx, const float* bias,
                                               int act, float* Z) {
    if (!bias && !Z && act == 0) return v;
    return gemm_epilogue_full(v, j, idx, bias, act, Z);
}

// Store one element of C through the epilogue.
#define GEMM_STORE(i, j, v)                                                        \
    do {                                                                           \
        long long idx_ = (long long)(i) * N + (j);                                 \
        C[idx_] = gemm_epilogue((v), (j), idx_, bias, act, Z);                     \
    } while (0)

#define GEMM_CALL_ARGS \
    A, B, C, M, N, K, transA, transB, strideA, strideB, strideC, bias, act, Z, kSplit

// Scalar tile loaders of steps 3–5 (row-major tiles, zero outside the matrix). Threads walk the
// dimension that is contiguous in memory — k for a row-major A, i for a transposed A — so a
// warp's loads coalesce in every layout.
// S[r*CC + c] = op(A)(i0 + r, k0 + c)
template <int R, int CC, int NT>
__device__ __forceinline__ void load_tile_a(float* S, const float* A, int M, int K, int transA,
                                            int i0, int k0, int tid) {
#pragma unroll
    for (int e = tid; e < R * CC; e += NT) {
        int r = transA ? e % R : e / CC, c = transA ? e / R : e % CC;
        int i = i0 + r, k = k0 + c;
        S[r * CC + c] = (i < M && k < K) ? load_a(A, M, K, transA, i, k) : 0.0f;
    }
}
// S[r*CC + c] = op(B)(k0 + r, j0 + c)
template <int R, int CC, int NT>
__device__ __forceinline__ void load_tile_b(float* S, const float* B, int N, int K, int transB,
                                            int k0, int j0, int tid) {
#pragma unroll
    for (int e = tid; e < R * CC; e += NT) {
        int r = transB ? e % R : e / CC, c = transB ? e / R : e % CC;
        int k = k0 + r, j = j0 + c;
        S[r * CC + c] = (k < K && j < N) ? load_b(B, N, K, transB, k, j) : 0.0f;
    }
}
