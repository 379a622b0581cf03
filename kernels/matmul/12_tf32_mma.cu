// SGEMM step 12 (opt-in) — TF32 tensor cores through `mma.sync.m16n8k8`. The data path is
// step 11's (float4 loads through registers into double-buffered, k-major shared tiles), but
// the inputs are rounded to TF32 (a 10-bit mantissa, cvt.rna) as they are stored, and each warp
// computes its 64×32 tile as 4×4 tensor-core products of 16×8 per 8-wide k step, accumulating
// in FP32. Each product's inputs lose up to 2⁻¹¹ relative, so
//   |C − C_exact| ≤ (2⁻¹⁰ + k·2⁻²⁴) · Σ_k |a_ik·b_kj|    (the bound the tests check).
// Opt-in (CAMEL_SGEMM=tf32) because it changes precision. 256 threads, 128×128 tile, BK = 16;
// shared rows padded by 8 floats so the fragment loads are free of bank conflicts.
// What it measures: docs/kernels/matmul.md.
#include "gemm_tile.cuh"

#define BM 128
#define BN 128
#define BK 16
#define NT 256
#define SA (BM + 8)
#define SB (BN + 8)

__device__ __forceinline__ float to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
}

template <int PER>
__device__ __forceinline__ void round_tf32(float4 (&r)[PER]) {
#pragma unroll
    for (int p = 0; p < PER; ++p) {
        r[p].x = to_tf32(r[p].x);
        r[p].y = to_tf32(r[p].y);
        r[p].z = to_tf32(r[p].z);
        r[p].w = to_tf32(r[p].w);
    }
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(NT) sgemm_12_tf32_mma(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    __shared__ __align__(16) float As[2][BK * SA];
    __shared__ __align__(16) float Bs[2][BK * SB];
    GEMM_BATCH_OFFSETS();
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane >> 2, tig = lane & 3;        // mma fragment coordinates
    const int wm0 = (warp / 4) * 64, wn0 = (warp % 4) * 32;  // 2×4 warps, 64×32 each
    const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
    const bool ka = !transA, kb = transB;
    const int lda = transA ? M : K, ldb = transB ? K : N;
    const bool va = can_vec(A, lda), vb = can_vec(B, ldb);
    TileLoader<BK, BM, NT> la;
    TileLoader<BK, BN, NT> lb;
    float acc[4][4][4] = {{{0.0f}}};

    la.fetch(A, ka, va, lda, K, M, 0, i0, tid);
    lb.fetch(B, kb, vb, ldb, K, N, 0, j0, tid);
    round_tf32(la.r);
    round_tf32(lb.r);
    la.template store<SA>(As[0], ka, tid);
    lb.template store<SB>(Bs[0], kb, tid);
    __syncthreads();
    int cur = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool next = k0 + BK < K;
        if (next) {
            la.fetch(A, ka, va, lda, K, M, k0 + BK, i0, tid);
            lb.fetch(B, kb, vb, ldb, K, N, k0 + BK, j0, tid);
        }
        const float* as = As[cur];
        const float* bs = Bs[cur];
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            unsigned a[4][4], b[4][2];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
                const int r = wm0 + mi * 16 + g;
                a[mi][0] = __float_as_uint(as[(kk + tig) * SA + r]);
                a[mi][1] = __float_as_uint(as[(kk + tig) * SA + r + 8]);
                a[mi][2] = __float_as_uint(as[(kk + tig + 4) * SA + r]);
                a[mi][3] = __float_as_uint(as[(kk + tig + 4) * SA + r + 8]);
            }
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                const int c = wn0 + ni * 8 + g;
                b[ni][0] = __float_as_uint(bs[(kk + tig) * SB + c]);
                b[ni][1] = __float_as_uint(bs[(kk + tig + 4) * SB + c]);
            }
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) mma_tf32(acc[mi][ni], a[mi], b[ni]);
        }
        if (next) {
            round_tf32(la.r);
            round_tf32(lb.r);
            la.template store<SA>(As[cur ^ 1], ka, tid);
            lb.template store<SB>(Bs[cur ^ 1], kb, tid);
        }
        __syncthreads();
        cur ^= 1;
    }
    // accumulator (mi, ni): c0,c1 at row g, columns 2·tig, 2·tig+1; c2,c3 at row g+8
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int i = i0 + wm0 + mi * 16 + g + h * 8;
                const int j = j0 + wn0 + ni * 8 + 2 * tig;
                if (i < M) {
                    if (j < N) GEMM_STORE(i, j, acc[mi][ni][2 * h]);
                    if (j + 1 < N) GEMM_STORE(i, j + 1, acc[mi][ni][2 * h + 1]);
                }
            }
}
