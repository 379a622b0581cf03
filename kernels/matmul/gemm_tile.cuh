// Building blocks of SGEMM steps 6–11: a vectorized tile loader that stores both operands
// k-major in shared memory (A transposed), a vectorized epilogue store, and the two templated
// kernel bodies — block tiling (steps 6–9) and warp tiling (steps 10–11) — whose tile sizes
// are template parameters so that the autotuner can instantiate any valid configuration.
//
// Any M, N, K and all four layouts work: a tile that sticks out of the matrix is zero-filled.
// Global loads are float4 when the operand's contiguous dimension is a multiple of 4 and its
// base is 16-byte aligned, and four guarded scalar loads otherwise (decided once per block).
#pragma once
#include "common_gemm.cuh"

__device__ __forceinline__ float4 ldg4(const float* p) {
    return __ldg(reinterpret_cast<const float4*>(p));
}

// Loads a BK × BX slice of one operand into shared memory, k-major: S[kk*SS + x] = X(k0+kk, x0+x),
// where X(k, x) is op(A)(x, k) or op(B)(k, x). `kcontig`: X is stored with k contiguous,
// X(k, x) = X[x*ld + k] (A not transposed, B transposed); otherwise X(k, x) = X[k*ld + x].
// The load goes through registers (fetch, then store) so that step 11 can fetch the next slice
// while the current one is being multiplied.
template <int BK, int BX, int NT>
struct TileLoader {
    static constexpr int VECS = BK * BX / 4;
    static constexpr int PER = VECS / NT;
    static_assert(VECS % NT == 0, "the tile's float4s must divide evenly among the threads");
    float4 r[PER];

    __device__ __forceinline__ void coords(int p, int tid, bool kcontig, int& k, int& x) const {
        int e = tid + p * NT;
        if (kcontig) {
            x = e / (BK / 4);
            k = (e % (BK / 4)) * 4;
        } else {
            k = e / (BX / 4);
            x = (e % (BX / 4)) * 4;
        }
    }

    __device__ __forceinline__ void fetch(const float* X, bool kcontig, bool vec, int ld, int Kd,
                                          int Xd, int k0, int x0, int tid) {
#pragma unroll
        for (int p = 0; p < PER; ++p) {
            int k, x;
            coords(p, tid, kcontig, k, x);
            int gk = k0 + k, gx = x0 + x;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (kcontig) {
                const float* q = X + (long long)gx * ld + gk;
                if (gx < Xd) {
                    if (vec) {
                        if (gk < Kd) v = ldg4(q);
                    } else {
                        if (gk < Kd) v.x = q[0];
                        if (gk + 1 < Kd) v.y = q[1];
                        if (gk + 2 < Kd) v.z = q[2];
                        if (gk + 3 < Kd) v.w = q[3];
                    }
                }
            } else {
                const float* q = X + (long long)gk * ld + gx;
                if (gk < Kd) {
                    if (vec) {
                        if (gx < Xd) v = ldg4(q);
                    } else {
                        if (gx < Xd) v.x = q[0];
                        if (gx + 1 < Xd) v.y = q[1];
                        if (gx + 2 < Xd) v.z = q[2];
                        if (gx + 3 < Xd) v.w = q[3];
                    }
                }
            }
            r[p] = v;
        }
    }

    template <int SS>
    __device__ __forceinline__ void store(float* S, bool kcontig, int tid) const {
#pragma unroll
        for (int p = 0; p < PER; ++p) {
            int k, x;
            coords(p, tid, kcontig, k, x);
            if (kcontig) {  // transpose on the way in
                S[(k + 0) * SS + x] = r[p].x;
                S[(k + 1) * SS + x] = r[p].y;
                S[(k + 2) * SS + x] = r[p].z;
                S[(k + 3) * SS + x] = r[p].w;
            } else {
                *reinterpret_cast<float4*>(&S[k * SS + x]) = r[p];
            }
        }
    }
};

// Whether an operand can be read with float4: its contiguous dimension is a multiple of 4 and
// this batch's base pointer is 16-byte aligned.
__device__ __forceinline__ bool can_vec(const float* X, int contiguous_len) {
    return (contiguous_len % 4 == 0) && ((reinterpret_cast<size_t>(X) & 15) == 0);
}

// Stores TN accumulators of one row of a thread's tile at row i, columns j.., through the
// epilogue; float4 stores when C's (and Z's) rows allow it.
template <int TN>
__device__ __forceinline__ void store_row(const float* acc, int i, int j, int M, int N, bool vec,
                                          float* C, const float* bias, int act, float* Z) {
    if (i >= M) return;
    if (vec) {
#pragma unroll
        for (int b = 0; b < TN; b += 4) {
            int jj = j + b;
            if (jj < N) {  // N % 4 == 0, so the whole float4 is inside
                long long idx = (long long)i * N + jj;
                float4 v;
                v.x = gemm_epilogue(acc[b + 0], jj + 0, idx + 0, bias, act, Z);
                v.y = gemm_epilogue(acc[b + 1], jj + 1, idx + 1, bias, act, Z);
                v.z = gemm_epilogue(acc[b + 2], jj + 2, idx + 2, bias, act, Z);
                v.w = gemm_epilogue(acc[b + 3], jj + 3, idx + 3, bias, act, Z);
                *reinterpret_cast<float4*>(&C[idx]) = v;
            }
        }
    } else {
#pragma unroll
        for (int b = 0; b < TN; ++b) {
            int jj = j + b;
            if (jj < N) {
                long long idx = (long long)i * N + jj;
                C[idx] = gemm_epilogue(acc[b], jj, idx, bias, act, Z);
            }
        }
    }
}

// Steps 6–9: a block of NT threads computes a BM × BN tile of C; each thread a TM × TN block
// (rows tr*TM.., columns tc*TN..), reading its operands from shared memory as float4.
template <int BM, int BN, int BK, int TM, int TN, int NT>
__device__ __forceinline__ void block_tile_gemm(GEMM_ARGS) {
    static_assert((BM / TM) * (BN / TN) == NT, "one thread per TM×TN block");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 fragments");
    constexpr int SA = BM + 4, SB = BN + 4;  // padding: the transposing stores avoid bank conflicts
    __shared__ __align__(16) float As[BK * SA];
    __shared__ __align__(16) float Bs[BK * SB];
    GEMM_SPLIT_K(kBegin, kEnd, zb);
    const int tid = threadIdx.x;
    const int tc = tid % (BN / TN), tr = tid / (BN / TN);
    const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
    const bool ka = !transA, kb = transB;
    const int lda = transA ? M : K, ldb = transB ? K : N;
    const bool va = can_vec(A, lda), vb = can_vec(B, ldb);
    TileLoader<BK, BM, NT> la;
    TileLoader<BK, BN, NT> lb;
    float acc[TM][TN] = {{0.0f}};
    float rm[TM], rn[TN];
    for (int k0 = kBegin; k0 < kEnd; k0 += BK) {
        la.fetch(A, ka, va, lda, kEnd, M, k0, i0, tid);
        lb.fetch(B, kb, vb, ldb, kEnd, N, k0, j0, tid);
        la.template store<SA>(As, ka, tid);
        lb.template store<SB>(Bs, kb, tid);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
            for (int t = 0; t < TM; t += 4)
                *reinterpret_cast<float4*>(&rm[t]) =
                    *reinterpret_cast<const float4*>(&As[kk * SA + tr * TM + t]);
#pragma unroll
            for (int t = 0; t < TN; t += 4)
                *reinterpret_cast<float4*>(&rn[t]) =
                    *reinterpret_cast<const float4*>(&Bs[kk * SB + tc * TN + t]);
#pragma unroll
            for (int a = 0; a < TM; ++a)
#pragma unroll
                for (int b = 0; b < TN; ++b) acc[a][b] += rm[a] * rn[b];
        }
        __syncthreads();
    }
    const bool vc = (N % 4 == 0) && ((reinterpret_cast<size_t>(C) & 15) == 0) &&
                    (!Z || (reinterpret_cast<size_t>(Z) & 15) == 0);
#pragma unroll
    for (int a = 0; a < TM; ++a)
        store_row<TN>(acc[a], i0 + tr * TM + a, j0 + tc * TN, M, N, vc, C, bias, act, Z);
}

// Steps 10–11: warp tiling. The block's BM × BN tile is split into WM × WN warp tiles; a warp
// covers its tile in WMITER × WNITER sub-tiles, each lane a TM × TN block of every sub-tile. A
// warp's shared-memory reads then touch few distinct rows (broadcasts) and its accumulators map
// onto the register file the way the hardware schedules warps. With DB (step 11) two shared
// buffers alternate: the next K-slice is fetched from global memory into registers while the
// current one is multiplied, leaving one barrier per slice.
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, bool DB>
__device__ __forceinline__ void warp_tile_gemm(GEMM_ARGS) {
    constexpr int NWARPS = NT / 32;
    static_assert((BM / WM) * (BN / WN) == NWARPS, "one warp per warp tile");
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    static_assert(WMITER >= 1 && WMITER * 32 * TM * TN * WNITER == WM * WN, "warp tile split");
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    static_assert((WSUBN / TN) * (WSUBM / TM) == 32, "32 lanes per sub-tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 fragments");
    constexpr int SA = BM + 4, SB = BN + 4;
    constexpr int NBUF = DB ? 2 : 1;
    __shared__ __align__(16) float As[NBUF][BK * SA];
    __shared__ __align__(16) float Bs[NBUF][BK * SB];
    GEMM_SPLIT_K(kBegin, kEnd, zb);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wr = warp / (BN / WN), wc = warp % (BN / WN);
    const int tcw = lane % (WSUBN / TN), trw = lane / (WSUBN / TN);
    const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
    const bool ka = !transA, kb = transB;
    const int lda = transA ? M : K, ldb = transB ? K : N;
    const bool va = can_vec(A, lda), vb = can_vec(B, ldb);
    TileLoader<BK, BM, NT> la;
    TileLoader<BK, BN, NT> lb;
    float acc[WMITER * TM][WNITER * TN] = {{0.0f}};
    float rm[WMITER * TM], rn[WNITER * TN];
    const int arow = wr * WM + trw * TM, bcol = wc * WN + tcw * TN;

    auto multiply = [&](const float* as, const float* bs) {
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int t = 0; t < TM; t += 4)
                    *reinterpret_cast<float4*>(&rm[wm * TM + t]) =
                        *reinterpret_cast<const float4*>(&as[kk * SA + arow + wm * WSUBM + t]);
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int t = 0; t < TN; t += 4)
                    *reinterpret_cast<float4*>(&rn[wn * TN + t]) =
                        *reinterpret_cast<const float4*>(&bs[kk * SB + bcol + wn * WSUBN + t]);
#pragma unroll
            for (int a = 0; a < WMITER * TM; ++a)
#pragma unroll
                for (int b = 0; b < WNITER * TN; ++b) acc[a][b] += rm[a] * rn[b];
        }
    };

    if (DB) {
        la.fetch(A, ka, va, lda, kEnd, M, kBegin, i0, tid);
        lb.fetch(B, kb, vb, ldb, kEnd, N, kBegin, j0, tid);
        la.template store<SA>(As[0], ka, tid);
        lb.template store<SB>(Bs[0], kb, tid);
        __syncthreads();
        int cur = 0;
        for (int k0 = kBegin; k0 < kEnd; k0 += BK) {
            const bool next = k0 + BK < kEnd;
            if (next) {  // global loads in flight while this slice is multiplied
                la.fetch(A, ka, va, lda, kEnd, M, k0 + BK, i0, tid);
                lb.fetch(B, kb, vb, ldb, kEnd, N, k0 + BK, j0, tid);
            }
            multiply(As[cur], Bs[cur]);
            if (next) {  // the other buffer was last read before the previous barrier
                la.template store<SA>(As[cur ^ 1], ka, tid);
                lb.template store<SB>(Bs[cur ^ 1], kb, tid);
            }
            __syncthreads();
            cur ^= 1;
        }
    } else {
        for (int k0 = kBegin; k0 < kEnd; k0 += BK) {
            la.fetch(A, ka, va, lda, kEnd, M, k0, i0, tid);
            lb.fetch(B, kb, vb, ldb, kEnd, N, k0, j0, tid);
            la.template store<SA>(As[0], ka, tid);
            lb.template store<SB>(Bs[0], kb, tid);
            __syncthreads();
            multiply(As[0], Bs[0]);
            __syncthreads();
        }
    }
    const bool vc = (N % 4 == 0) && ((reinterpret_cast<size_t>(C) & 15) == 0) &&
                    (!Z || (reinterpret_cast<size_t>(Z) & 15) == 0);
#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int a = 0; a < TM; ++a)
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
                store_row<TN>(&acc[wm * TM + a][wn * TN], i0 + arow + wm * WSUBM + a,
                              j0 + bcol + wn * WSUBN, M, N, vc, C, bias, act, Z);
}

// Defines an extern "C" kernel for one configuration of either template.
#define DEFINE_BLOCK_TILE(name, BM, BN, BK, TM, TN)                                        \
    extern "C" __global__ void __launch_bounds__((BM / TM) * (BN / TN)) name(GEMM_ARGS) {  \
        CAMEL_PDL_WAIT();                                                                  \
        block_tile_gemm<BM, BN, BK, TM, TN, (BM / TM) * (BN / TN)>(GEMM_CALL_ARGS);        \
    }
#define DEFINE_WARP_TILE(name, BM, BN, BK, WM, WN, WNITER, TM, TN, NT, DB)              \
    extern "C" __global__ void __launch_bounds__(NT) name(GEMM_ARGS) {                  \
        CAMEL_PDL_WAIT();                                                               \
        warp_tile_gemm<BM, BN, BK, WM, WN, WNITER, TM, TN, NT, DB>(GEMM_CALL_ARGS);     \
    }

// Kernels named after their tile shape (the names the autotuner records and the Rust launcher
// parses): BT = block tiling, WT = warp tiling, DB = warp tiling with double buffering.
#define BT(BM, BN, BK, TM, TN) \
    DEFINE_BLOCK_TILE(sgemm_bt_##BM##x##BN##x##BK##_##TM##x##TN, BM, BN, BK, TM, TN)
#define WT(BM, BN, BK, WM, WN, WNI, TM, TN, NT)                                                 \
    DEFINE_WARP_TILE(sgemm_wt_##BM##x##BN##x##BK##_##WM##x##WN##x##WNI##_##TM##x##TN##_##NT, BM, \
                     BN, BK, WM, WN, WNI, TM, TN, NT, false)
#define DB(BM, BN, BK, WM, WN, WNI, TM, TN, NT)                                                 \
    DEFINE_WARP_TILE(sgemm_db_##BM##x##BN##x##BK##_##WM##x##WN##x##WNI##_##TM##x##TN##_##NT, BM, \
                     BN, BK, WM, WN, WNI, TM, TN, NT, true)
