// stage_fma.cuh — the inner product of one shared-memory stage for the FP32 tile kernels that
// keep both operands k-major (SGEMM step 13, conv2d step 4): 256 threads as a TY × (256/TY) grid,
// each thread (BM/4TY) × (BN/4TX) sub-tiles of 4 × 4 outputs spread 4·TY rows and 4·TX columns
// apart (TY = 16: 16 × 16 threads, sub-tiles 64 apart).
#pragma once

// The thread's row and column in the TY × (256/TY) thread grid. TY = 16: a warp is 4
// thread-rows × 8 thread-columns, so its fragment reads are float4 broadcasts (A) and 128
// contiguous bytes (B) per 8-lane phase. TY = 4: a warp is one thread-row of 32 columns (one
// broadcast, 512 contiguous bytes).
template <int TY = 16>
__device__ __forceinline__ void stage_thread(int t, int& ty, int& tx) {
    static_assert(TY == 16 || TY == 4, "thread grids of 16 × 16 or 4 × 64");
    const int w = t / 32, l = t % 32;
    if (TY == 16) {
        ty = (w / 2) * 4 + l / 8;
        tx = (w % 2) * 8 + l % 8;
    } else {
        ty = w / 2;
        tx = (w % 2) * 32 + l;
    }
}

// acc[a][b] += Σ_kk as[kk·SA + row(a)] · bs[kk·SB + col(b)] over the BK rows of one stage, with
// row(i·4 + r) = i·4TY + ty·4 + r and col(j·4 + c) = j·4TX + tx·4 + c. The fragments of kk+1 are
// read while kk is multiplied (register double buffering), and the FMAs walk the tile in a
// serpentine so that consecutive FMAs share an operand (fewer register-bank conflicts).
template <int BM, int BN, int BK, int SA, int SB, int TY = 16>
__device__ __forceinline__ void stage_fma(const float* as, const float* bs, float (&acc)[BM / TY][BN * TY / 256],
                                          int ty, int tx) {
    constexpr int TX = 256 / TY, TMR = BM / (4 * TY), TNR = BN / (4 * TX);
    static_assert(TMR * 4 * TY == BM && TNR * 4 * TX == BN, "whole sub-tiles");
    float fa[2][TMR * 4], fb[2][TNR * 4];
    auto frag = [&](const float* as, const float* bs, int kk, int f) {
#pragma unroll
        for (int i = 0; i < TMR; ++i)
            *reinterpret_cast<float4*>(&fa[f][i * 4]) =
                *reinterpret_cast<const float4*>(&as[kk * SA + i * 4 * TY + ty * 4]);
#pragma unroll
        for (int j = 0; j < TNR; ++j)
            *reinterpret_cast<float4*>(&fb[f][j * 4]) =
                *reinterpret_cast<const float4*>(&bs[kk * SB + j * 4 * TX + tx * 4]);
    };
    frag(as, bs, 0, 0);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
        if (kk + 1 < BK) frag(as, bs, kk + 1, (kk + 1) & 1);
#pragma unroll
        for (int a = 0; a < TMR * 4; ++a)
#pragma unroll
            for (int b0 = 0; b0 < TNR * 4; ++b0) {
                const int b = (a & 1) ? TNR * 4 - 1 - b0 : b0;  // serpentine
                acc[a][b] = fmaf(fa[kk & 1][a], fb[kk & 1][b], acc[a][b]);
            }
    }
}
