// SGEMM lab: which FP32 kernels could top the ladder, against the library's steps 11 and 13
// (kernels/matmul/) and cuBLAS (sgemm_lab.sh runs it beside this)? Kernels, validation and
// timing in one program, as llm.c keeps dev/cuda. Not part of the library.
//
// Versions:
//   lab_sgemm      256 threads as 16×16, 4×4 sub-tiles, shared memory and register fragments
//                  double-buffered, one barrier a slice
//   lab_async      the same layout fed by an ST-stage cp.async pipeline (cuBLAS's sm80 ffma
//                  shape); layouts A·B, A·Bᵀ, Aᵀ·B; serpentine order
//   x13            step 13's interior template at other K-slices, stages, layouts, B padding,
//                  static or dynamic shared memory
//   xtn            the Aᵀ·B kernel after a transpose of A
//   xs             (`shapes`, `shapes-flush`) step 13's template at other tiles and blocks an SM
//                  at the model shapes, A read in place or transposed first
//   lab_wholek     (LAB_SHAPES=small) small outputs with a long K: a block loads all of K for a
//                  thin tile, KG thread groups each multiply a K-range
// Layout: C = A·B, all row-major, M, N multiples of the block tile and K of BK (the lab's
// kernels have no bounds checks; the library's steps do).
//
// What it found and where it went: dev/labs/README.md.
//
// Build and run on the GPU host:  OUT=dir bash dev/labs/sgemm_lab.sh   (model shapes:
// dev/labs/sgemm_shapes.sh)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <string>
#include <cuda_runtime.h>

#include "../kernels/matmul/gemm_tile.cuh"
DB(128, 128, 8, 64, 32, 1, 8, 8, 256)  // the library's step 11 winner at 4096³
DB(256, 128, 8, 128, 32, 2, 8, 4, 256)  // … at 8192×128×512
DB(128, 128, 16, 64, 32, 2, 8, 4, 256)  // … at 16384×1536×384
#define cp_async4 lib_cp_async4
#define cp_async16 lib_cp_async16
#define cp_async_commit lib_cp_async_commit
#define cp_async_wait lib_cp_async_wait
#include "../kernels/matmul/13_async_pipeline.cu"  // the library's step 13
#undef cp_async4
#undef cp_async16
#undef cp_async_commit
#undef cp_async_wait
#include "lab_common.cuh"


// 256 threads as a 16×16 grid; thread (ty, tx) owns the rows {i·64 + ty·4 + r} and columns
// {j·64 + tx·4 + c} of the block tile (TMR × TNR sub-tiles of 4×4). A warp is 4 thread-rows ×
// 8 thread-columns, so a fragment read is a broadcast for A and 128 contiguous bytes for B.
// Shared memory and the register fragments are both double-buffered: the fragments of k+1 are
// read while k is multiplied, and the next slice is fetched from global memory while the
// current one is used, with one barrier per slice.
template <int BM, int BN, int BK, int MINB>
__global__ void __launch_bounds__(256, MINB)
    lab_sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M,
              int N, int K) {
    constexpr int TMR = BM / 64, TNR = BN / 64;
    constexpr int SA = BM + 4, SB = BN;
    constexpr int LA = BM * BK / 4 / 256, LB = BN * BK / 4 / 256;
    static_assert(LA >= 1 && LB >= 1, "at least one float4 per thread per operand");
    __shared__ __align__(16) float As[2][BK * SA];
    __shared__ __align__(16) float Bs[2][BK * SB];
    const int t = threadIdx.x, w = t / 32, l = t % 32;
    const int ty = (w / 2) * 4 + l / 8, tx = (w % 2) * 8 + l % 8;
    A += (size_t)blockIdx.y * BM * K;
    B += (size_t)blockIdx.x * BN;
    C += (size_t)blockIdx.y * BM * N + (size_t)blockIdx.x * BN;
    float4 ra[LA], rb[LB];
    float acc[TMR * 4][TNR * 4];
#pragma unroll
    for (int a = 0; a < TMR * 4; ++a)
#pragma unroll
        for (int b = 0; b < TNR * 4; ++b) acc[a][b] = 0.0f;
    float fa[2][TMR * 4], fb[2][TNR * 4];

    auto gload = [&](int k0) {
#pragma unroll
        for (int p = 0; p < LA; ++p) {
            int e = t + p * 256, r = e / (BK / 4), c = (e % (BK / 4)) * 4;
            ra[p] = __ldg(reinterpret_cast<const float4*>(A + (size_t)r * K + k0 + c));
        }
#pragma unroll
        for (int p = 0; p < LB; ++p) {
            int e = t + p * 256, k = e / (BN / 4), c = (e % (BN / 4)) * 4;
            rb[p] = __ldg(reinterpret_cast<const float4*>(B + (size_t)(k0 + k) * N + c));
        }
    };
    auto sstore = [&](int buf) {
#pragma unroll
        for (int p = 0; p < LA; ++p) {
            int e = t + p * 256, r = e / (BK / 4), c = (e % (BK / 4)) * 4;
            As[buf][(c + 0) * SA + r] = ra[p].x;
            As[buf][(c + 1) * SA + r] = ra[p].y;
            As[buf][(c + 2) * SA + r] = ra[p].z;
            As[buf][(c + 3) * SA + r] = ra[p].w;
        }
#pragma unroll
        for (int p = 0; p < LB; ++p) {
            int e = t + p * 256, k = e / (BN / 4), c = (e % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[buf][k * SB + c]) = rb[p];
        }
    };
    auto fload = [&](int buf, int kk, int f) {
#pragma unroll
        for (int i = 0; i < TMR; ++i)
            *reinterpret_cast<float4*>(&fa[f][i * 4]) =
                *reinterpret_cast<const float4*>(&As[buf][kk * SA + i * 64 + ty * 4]);
#pragma unroll
        for (int j = 0; j < TNR; ++j)
            *reinterpret_cast<float4*>(&fb[f][j * 4]) =
                *reinterpret_cast<const float4*>(&Bs[buf][kk * SB + j * 64 + tx * 4]);
    };

    gload(0);
    sstore(0);
    __syncthreads();
    fload(0, 0, 0);
    int cur = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool nxt = k0 + BK < K;
        if (nxt) gload(k0 + BK);
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            if (kk < BK - 1) {
                fload(cur, kk + 1, (kk + 1) & 1);
            } else if (nxt) {
                sstore(cur ^ 1);
                __syncthreads();
                fload(cur ^ 1, 0, (kk + 1) & 1);
            }
#pragma unroll
            for (int a = 0; a < TMR * 4; ++a)
#pragma unroll
                for (int b = 0; b < TNR * 4; ++b)
                    acc[a][b] = fmaf(fa[kk & 1][a], fb[kk & 1][b], acc[a][b]);
        }
        cur ^= 1;
    }
#pragma unroll
    for (int i = 0; i < TMR; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int row = i * 64 + ty * 4 + r;
#pragma unroll
            for (int j = 0; j < TNR; ++j)
                *reinterpret_cast<float4*>(&C[(size_t)row * N + j * 64 + tx * 4]) =
                    make_float4(acc[i * 4 + r][j * 4 + 0], acc[i * 4 + r][j * 4 + 1],
                                acc[i * 4 + r][j * 4 + 2], acc[i * 4 + r][j * 4 + 3]);
        }
}

__device__ __forceinline__ void cp_async4(float* smem, const float* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async16(float* smem, const float* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The same thread layout, but global → shared through an ST-stage cp.async pipeline (no staging
// registers; A is transposed on the way in by 4-byte copies, B copied 16 bytes at a time), the
// shape of cuBLAS's sm80_xmma ffma kernel (256×128×8, 3 stages) that ncu shows cuBLAS running for FP32.
template <int BM, int BN, int BK, int ST, int MINB, int LAY = 0, bool SERP = false>
__global__ void __launch_bounds__(256, MINB)
    lab_async(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M,
              int N, int K) {
    constexpr int TMR = BM / 64, TNR = BN / 64;
    constexpr int SA = BM + 4, SB = BN;
    constexpr int PA = BM * BK / 256, PB = BK * BN / 1024;
    static_assert(BK % 8 == 0 && PB >= 1, "tile");
    extern __shared__ __align__(16) float smem[];
    float* As = smem;
    float* Bs = smem + ST * BK * SA;
    const int t = threadIdx.x, w = t / 32, l = t % 32;
    const int ty = LAY == 0 ? (w / 2) * 4 + l / 8 : (w / 4) * 8 + l / 4;
    const int tx = LAY == 0 ? (w % 2) * 8 + l % 8 : (w % 4) * 4 + l % 4;
    const float* Ab = A + (size_t)blockIdx.y * BM * K;
    const float* Bb = B + (size_t)blockIdx.x * BN;
    C += (size_t)blockIdx.y * BM * N + (size_t)blockIdx.x * BN;
    const int nk = K / BK;
    auto issue = [&](int ks) {
        if (ks < nk) {
            const int st = ks % ST, k0 = ks * BK;
#pragma unroll
            for (int p = 0; p < PA; ++p) {
                int e = t + p * 256, ln = e % 32, ch = e / 32;
                int k = ln % 8 + 8 * (ch % (BK / 8)), m = ln / 8 + 4 * (ch / (BK / 8));
                cp_async4(&As[st * BK * SA + k * SA + m], Ab + (size_t)m * K + k0 + k);
            }
#pragma unroll
            for (int p = 0; p < PB; ++p) {
                int e = t + p * 256, k = e / (BN / 4), n = (e % (BN / 4)) * 4;
                cp_async16(&Bs[st * BK * SB + k * SB + n], Bb + (size_t)(k0 + k) * N + n);
            }
        }
        cp_async_commit();
    };
    float acc[TMR * 4][TNR * 4];
#pragma unroll
    for (int a = 0; a < TMR * 4; ++a)
#pragma unroll
        for (int b = 0; b < TNR * 4; ++b) acc[a][b] = 0.0f;
    float fa[2][TMR * 4], fb[2][TNR * 4];
#pragma unroll
    for (int s = 0; s < ST - 1; ++s) issue(s);
    for (int ks = 0; ks < nk; ++ks) {
        cp_async_wait<ST - 2>();
        __syncthreads();
        issue(ks + ST - 1);
        const float* as = As + (ks % ST) * BK * SA;
        const float* bs = Bs + (ks % ST) * BK * SB;
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            if (kk == 0) {
#pragma unroll
                for (int i = 0; i < TMR; ++i)
                    *reinterpret_cast<float4*>(&fa[0][i * 4]) =
                        *reinterpret_cast<const float4*>(&as[i * 64 + ty * 4]);
#pragma unroll
                for (int j = 0; j < TNR; ++j)
                    *reinterpret_cast<float4*>(&fb[0][j * 4]) =
                        *reinterpret_cast<const float4*>(&bs[j * 64 + tx * 4]);
            }
            if (kk + 1 < BK) {
                const int f = (kk + 1) & 1;
#pragma unroll
                for (int i = 0; i < TMR; ++i)
                    *reinterpret_cast<float4*>(&fa[f][i * 4]) =
                        *reinterpret_cast<const float4*>(&as[(kk + 1) * SA + i * 64 + ty * 4]);
#pragma unroll
                for (int j = 0; j < TNR; ++j)
                    *reinterpret_cast<float4*>(&fb[f][j * 4]) =
                        *reinterpret_cast<const float4*>(&bs[(kk + 1) * SB + j * 64 + tx * 4]);
            }
#pragma unroll
            for (int a = 0; a < TMR * 4; ++a)
#pragma unroll
                for (int b0 = 0; b0 < TNR * 4; ++b0) {
                    const int b = (SERP && (a & 1)) ? TNR * 4 - 1 - b0 : b0;
                    acc[a][b] = fmaf(fa[kk & 1][a], fb[kk & 1][b], acc[a][b]);
                }
        }
    }
    cp_async_wait<0>();
#pragma unroll
    for (int i = 0; i < TMR; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int row = i * 64 + ty * 4 + r;
#pragma unroll
            for (int j = 0; j < TNR; ++j)
                *reinterpret_cast<float4*>(&C[(size_t)row * N + j * 64 + tx * 4]) =
                    make_float4(acc[i * 4 + r][j * 4 + 0], acc[i * 4 + r][j * 4 + 1],
                                acc[i * 4 + r][j * 4 + 2], acc[i * 4 + r][j * 4 + 3]);
        }
}

struct Variant {
    const char* name;
    int bm, bn;
    void (*fn)(const float*, const float*, float*, int, int, int);
    int ta = 0, tb = 0;  // layout (the reference is step 11 with the same flags)
};

template <int BM, int BN, int BK, int MINB>
void launch_lab(const float* A, const float* B, float* C, int M, int N, int K) {
    dim3 grid(N / BN, M / BM);
    lab_sgemm<BM, BN, BK, MINB><<<grid, 256>>>(A, B, C, M, N, K);
}
template <int BM, int BN, int BK, int ST, int MINB, int LAY = 0, bool SERP = false>
void launch_async(const float* A, const float* B, float* C, int M, int N, int K) {
    constexpr int bytes = ST * BK * ((BM + 4) + BN) * 4;
    static bool init = false;
    if (!init) {
        CK(cudaFuncSetAttribute(lab_async<BM, BN, BK, ST, MINB, LAY, SERP>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        init = true;
    }
    dim3 grid(N / BN, M / BM);
    lab_async<BM, BN, BK, ST, MINB, LAY, SERP><<<grid, 256, bytes>>>(A, B, C, M, N, K);
}
typedef void (*GemmKernel)(GEMM_ARGS);
// a library kernel with 256 threads and BM×BN tiles, layout (ta, tb), `smem` dynamic bytes
template <int BM, int BN, int TA, int TB>
void launch_lib_kernel(GemmKernel k, int smem, const float* A, const float* B, float* C, int M,
                       int N, int K) {
    if (smem > 0) CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    k<<<grid, 256, smem>>>(A, B, C, M, N, K, TA, TB, 0, 0, 0, nullptr, 0, nullptr, 0);
}
// Variants of step 13's interior kernels (library template, lab-only combinations): K-slice
// BK, stages ST, layout IL, B's row padding PADB, dynamic or static shared memory.
template <int BK, int ST, int IL, int PADB, bool DYN>
__global__ void __launch_bounds__(256, 1) x13(GEMM_ARGS) {
    constexpr int F = async_smem_floats<128, 256, BK, ST, PADB>();
    if constexpr (DYN) {
        extern __shared__ __align__(16) float dyn_smem[];
        async_tile_gemm<128, 256, BK, ST, IL, PADB>(dyn_smem, GEMM_CALL_ARGS);
    } else {
        __shared__ __align__(16) float st_smem[F];
        async_tile_gemm<128, 256, BK, ST, IL, PADB>(st_smem, GEMM_CALL_ARGS);
    }
}
template <int BK, int ST, int IL, int PADB, bool DYN>
void launch_x13(const float* A, const float* B, float* C, int M, int N, int K) {
    constexpr int bytes = DYN ? async_smem_floats<128, 256, BK, ST, PADB>() * 4 : 0;
    launch_lib_kernel<128, 256, IL & 1, IL / 2>(x13<BK, ST, IL, PADB, DYN>, bytes, A, B, C, M, N,
                                                K);
}
// A·B and A·Bᵀ as explicit transposes (the library's sgemm_13_transpose) into a workspace,
// then an Aᵀ·B kernel.
float* lab_workspace(size_t floats) {  // one buffer, grown on demand, kept for the run
    static float* W = nullptr;
    static size_t cap = 0;
    if (cap < floats) {
        if (W) cudaFree(W);
        CK(cudaMalloc(&W, floats * 4));
        cap = floats;
    }
    return W;
}
void lab_transpose(const float* X, float* Y, int R, int C) {  // Y (C×R) = Xᵀ
    sgemm_13_transpose<<<dim3((C + 31) / 32, (R + 31) / 32), dim3(32, 8)>>>(X, Y, R, C, 0);
}
// Other block shapes, K-slices and stage counts of the Aᵀ·B interior kernel (dynamic memory).
template <int BM, int BN, int BK, int ST>
__global__ void __launch_bounds__(256, 1) xtn(GEMM_ARGS) {
    extern __shared__ __align__(16) float dyn_smem[];
    async_tile_gemm<BM, BN, BK, ST, 1, 0>(dyn_smem, GEMM_CALL_ARGS);
}
template <int BM, int BN, int BK, int ST>
void launch_xtn(const float* A, const float* B, float* C, int M, int N, int K) {
    launch_lib_kernel<BM, BN, 1, 0>(xtn<BM, BN, BK, ST>, async_smem_floats<BM, BN, BK, ST, 0>() * 4,
                                    A, B, C, M, N, K);
}
// A·Bᵀ as transposes of both A and B, then the library's Aᵀ·B kernel.
void launch_tnt(const float* A, const float* B, float* C, int M, int N, int K) {
    float* W = lab_workspace((size_t)(M + N) * K);
    float* WB = W + (size_t)M * K;
    lab_transpose(A, W, M, K);
    lab_transpose(B, WB, N, K);
    launch_lib_kernel<128, 256, 1, 0>(sgemm_13_async_128x256x16_tn, ASYNC_TN16_SMEM_BYTES, W, WB, C, M,
                                      N, K);
}
template <void (*TN)(const float*, const float*, float*, int, int, int)>
void launch_tnn(const float* A, const float* B, float* C, int M, int N, int K) {
    float* W = lab_workspace((size_t)M * K);
    lab_transpose(A, W, M, K);
    TN(W, B, C, M, N, K);
}
void launch_lib13(const float* A, const float* B, float* C, int M, int N, int K) {
    launch_lib_kernel<128, 256, 0, 0>(sgemm_13_async_128x256x8, 0, A, B, C, M, N, K);
}
void launch_lib13_nt(const float* A, const float* B, float* C, int M, int N, int K) {
    launch_lib_kernel<128, 256, 0, 1>(sgemm_13_async_128x256x8, 0, A, B, C, M, N, K);
}
void launch_lib13_tn(const float* A, const float* B, float* C, int M, int N, int K) {
    launch_lib_kernel<128, 256, 1, 0>(sgemm_13_async_128x256x8, 0, A, B, C, M, N, K);
}
void launch_lib13_tn16(const float* A, const float* B, float* C, int M, int N, int K) {
    launch_lib_kernel<128, 256, 1, 0>(sgemm_13_async_128x256x16_tn, ASYNC_TN16_SMEM_BYTES, A, B, C, M,
                                      N, K);
}
void launch_lib(const float* A, const float* B, float* C, int M, int N, int K) {
    launch_lib_kernel<128, 128, 0, 0>(sgemm_db_128x128x8_64x32x1_8x8_256, 0, A, B, C, M, N, K);
}
void launch_ref(int ta, int tb, const float* A, const float* B, float* C, int n) {
    dim3 grid((n + 127) / 128, (n + 127) / 128);
    sgemm_db_128x128x8_64x32x1_8x8_256<<<grid, 256>>>(A, B, C, n, n, n, ta, tb, 0, 0, 0, nullptr,
                                                      0, nullptr, 0);
}

// ---- The model shapes (`./lab shapes`, `shapes-flush`; dev/labs/sgemm_shapes.sh runs both beside
// cuBLAS): M×K×N products where camel trailed cuBLAS, A·B row-major. Step 13's interior template
// at other tiles, K-slices and blocks per SM, A read with k contiguous (IL 0: 4-byte transposing
// copies) or transposed first (IL 1). `tn_only` times the Aᵀ·B kernel on a pre-transposed A.
template <int BM, int BN, int BK, int ST, int IL, int MINB>
__global__ void __launch_bounds__(256, MINB) xs(GEMM_ARGS) {
    extern __shared__ __align__(16) float dyn_smem[];
    async_tile_gemm<BM, BN, BK, ST, IL, 0>(dyn_smem, GEMM_CALL_ARGS);
}
template <int BM, int BN, int BK, int ST, int IL, int MINB>
void launch_xs(const float* A, const float* B, float* C, int M, int N, int K) {
    launch_lib_kernel<BM, BN, IL & 1, 0>(xs<BM, BN, BK, ST, IL, MINB>,
                                         async_smem_floats<BM, BN, BK, ST, 0>() * 4, A, B, C, M, N,
                                         K);
}
void launch_s11_256x128(const float* A, const float* B, float* C, int M, int N, int K) {
    launch_lib_kernel<256, 128, 0, 0>(sgemm_db_256x128x8_128x32x2_8x4_256, 0, A, B, C, M, N, K);
}
void launch_s11_128x128x16(const float* A, const float* B, float* C, int M, int N, int K) {
    launch_lib_kernel<128, 128, 0, 0>(sgemm_db_128x128x16_64x32x2_8x4_256, 0, A, B, C, M, N, K);
}
// Small outputs with a long K (the MLP's 64×784×256 and 256×784×256), where step 13 splits K
// over 64×64 tiles and sums the splits in the same launch, as cuBLAS does (level with it):
// here instead each block loads all of K for a thin BM×BN tile at once (every copy in flight
// together: one memory latency, not one per pipeline stage), KG groups of threads each multiply
// a K-range, and the groups' sums are added in shared memory. No split workspace, no counters.
// The library's template (kernels/matmul/13_async_pipeline.cu) at other tiles.
template <int BM, int BN, int TM, int TN, int KG>
__global__ void __launch_bounds__(256) lab_wholek(GEMM_ARGS) {
    wholek_gemm<BM, BN, TM, TN, KG>(GEMM_CALL_ARGS);
}
template <int BM, int BN, int TM, int TN, int KG>
void launch_wholek(const float* A, const float* B, float* C, int M, int N, int K) {
    const int bytes = (BM * (K + 4) + K * BN) * 4;
    launch_lib_kernel<BM, BN, 0, 0>(lab_wholek<BM, BN, TM, TN, KG>, bytes, A, B, C, M, N, K);
}
__global__ void lab_empty(float*) {}
void launch_floor(const float*, const float*, float* C, int, int, int) {  // timing floor
    lab_empty<<<128, 256>>>(C);
}

int run_shapes(bool flush) {
    Variant vs[] = {
        {"floor_empty_kernel", 1, 1, launch_floor},
        {"wholek_8x16_2x2_kg8", 8, 16, launch_wholek<8, 16, 2, 2, 8>},
        {"wholek_16x16_2x2_kg4", 16, 16, launch_wholek<16, 16, 2, 2, 4>},
        {"wholek_8x32_2x4_kg8", 8, 32, launch_wholek<8, 32, 2, 4, 8>},
        {"wholek_4x16_1x2_kg8", 4, 16, launch_wholek<4, 16, 1, 2, 8>},
        {"wholek_16x32_2x4_kg4", 16, 32, launch_wholek<16, 32, 2, 4, 4>},
        {"wholek_32x32_4x4_kg4", 32, 32, launch_wholek<32, 32, 4, 4, 4>},
        {"s11_256x128x8", 256, 128, launch_s11_256x128},
        {"s11_128x128x16", 128, 128, launch_s11_128x128x16},
        {"lib13_generic_128x256x8", 128, 256, launch_lib13},
        {"transposeA_xtn_32_s2", 128, 256, launch_tnn<launch_xtn<128, 256, 32, 2>>},
        {"transposeA_xtn_16_s3", 128, 256, launch_tnn<launch_lib13_tn16>},
        {"xs_128x256x16_s3_b1", 128, 256, launch_xs<128, 256, 16, 3, 0, 1>},
        {"xs_128x192x16_s3_b1", 128, 192, launch_xs<128, 192, 16, 3, 0, 1>},
        {"xs_128x192x16_s4_b1", 128, 192, launch_xs<128, 192, 16, 4, 0, 1>},
        {"xs_128x128x16_s3_b1", 128, 128, launch_xs<128, 128, 16, 3, 0, 1>},
        {"xs_64x256x16_s3_b2", 64, 256, launch_xs<64, 256, 16, 3, 0, 2>},
        {"xs_64x256x16_s4_b2", 64, 256, launch_xs<64, 256, 16, 4, 0, 2>},
        {"xs_64x192x16_s3_b2", 64, 192, launch_xs<64, 192, 16, 3, 0, 2>},
        {"xs_64x192x16_s4_b3", 64, 192, launch_xs<64, 192, 16, 4, 0, 3>},
        {"xs_64x128x16_s4_b3", 64, 128, launch_xs<64, 128, 16, 4, 0, 3>},
        {"xs_128x128x16_s4_b1", 128, 128, launch_xs<128, 128, 16, 4, 0, 1>},
        {"transposeA_xs_128x192x16_s3_b1", 128, 192, launch_tnn<launch_xs<128, 192, 16, 3, 1, 1>>},
        {"transposeA_xs_128x128x16_s3_b2", 128, 128, launch_tnn<launch_xs<128, 128, 16, 3, 1, 2>>},
        {"transposeA_xs_128x128x16_s4_b2", 128, 128, launch_tnn<launch_xs<128, 128, 16, 4, 1, 2>>},
        {"transposeA_xs_128x128x16_s2_b2", 128, 128, launch_tnn<launch_xs<128, 128, 16, 2, 1, 2>>},
        {"transposeA_xs_128x128x8_s4_b2", 128, 128, launch_tnn<launch_xs<128, 128, 8, 4, 1, 2>>},
        {"transposeA_xs_64x128x16_s3_b3", 64, 128, launch_tnn<launch_xs<64, 128, 16, 3, 1, 3>>},
        {"transposeA_xs_64x256x16_s3_b2", 64, 256, launch_tnn<launch_xs<64, 256, 16, 3, 1, 2>>},
        {"tn_only_xs_128x128x16_s3_b2", 128, 128, launch_xs<128, 128, 16, 3, 1, 2>, 1, 0},
    };
    // M, K, N; LAB_SHAPES=nn: shapes whose A·B is not worth a transpose of A (N < 1024)
    const int all[][3] = {{8192, 128, 512},   {16384, 1536, 384}, {16384, 384, 1536},
                          {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192}};
    const int nn[][3] = {{8192, 128, 512}, {16384, 1536, 384}, {8192, 768, 768},
                         {4096, 2048, 512}, {16384, 128, 384}, {2048, 4096, 768}};
    const int small[][3] = {{64, 784, 256}, {256, 784, 256}};
    const std::string sel = getenv("LAB_SHAPES") ? getenv("LAB_SHAPES") : "";
    const int(*shapes)[3] = sel == "nn" ? nn : sel == "small" ? small : all;
    const int nshapes = sel == "small" ? 2 : 6;
    float* F = nullptr;  // 256 MiB, zeroed before each timed run when `flush`
    if (flush) CK(cudaMalloc(&F, 256 << 20));
    for (int si = 0; si < nshapes; ++si) {
        const int M = shapes[si][0], K = shapes[si][1], N = shapes[si][2];
        std::vector<float> ha((size_t)M * K), hb((size_t)K * N);
        srand(1);
        for (auto& x : ha) x = (rand() / (float)RAND_MAX) * 2.0f - 1.0f;
        for (auto& x : hb) x = (rand() / (float)RAND_MAX) * 2.0f - 1.0f;
        float *A, *B, *C, *R;
        const size_t cb = (size_t)M * N * 4;
        CK(cudaMalloc(&A, ha.size() * 4));
        CK(cudaMalloc(&B, hb.size() * 4));
        CK(cudaMalloc(&C, cb));
        CK(cudaMalloc(&R, cb));
        CK(cudaMemcpy(A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(B, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
        // reference: step 11 on the same layout (A·B, or Aᵀ·B from a transposed copy of A)
        float* At = lab_workspace((size_t)M * K + (size_t)K * N);
        lab_transpose(A, At, M, K);  // Aᵀ for the tn_only variants, kept out of the workspace
        float* AT;
        CK(cudaMalloc(&AT, ha.size() * 4));
        CK(cudaMemcpy(AT, At, ha.size() * 4, cudaMemcpyDeviceToDevice));
        launch_lib(A, B, R, M, N, K);
        std::vector<float> ref((size_t)M * N), got(ref.size());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(ref.data(), R, cb, cudaMemcpyDeviceToHost));
        const int per = flush ? 1 : ((double)M * N * K < 1e10 ? 20 : 1);  // launches per sample
        const int reps = (double)M * N * K > 1e11 ? 7 : 15;
        std::vector<cudaEvent_t> ev(2 * reps);
        for (auto& e : ev) cudaEventCreate(&e);
        for (auto& v : vs) {
            if (M % v.bm || N % v.bn) continue;
            const bool wholek = std::string(v.name).rfind("wholek", 0) == 0;
            if (wholek != (sel == "small") && std::string(v.name) != "floor_empty_kernel") continue;
            const float* a = v.ta ? AT : A;
            CK(cudaMemset(C, 0xff, cb));  // poison: NaN where nothing is written
            v.fn(a, B, C, M, N, K);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(got.data(), C, cb, cudaMemcpyDeviceToHost));
            double maxd = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                double d = fabs((double)got[i] - ref[i]);
                if (!(d <= maxd)) maxd = d;  // NaN propagates
            }
            for (int w = 0; w < 3 * per; ++w) v.fn(a, B, C, M, N, K);
            for (int r = 0; r < reps; ++r) {  // enqueued back to back
                if (flush) CK(cudaMemsetAsync(F, r, 256 << 20));
                cudaEventRecord(ev[2 * r]);
                for (int q = 0; q < per; ++q) v.fn(a, B, C, M, N, K);
                cudaEventRecord(ev[2 * r + 1]);
            }
            CK(cudaDeviceSynchronize());
            std::vector<float> ms;
            for (int r = 0; r < reps; ++r) {
                float t;
                cudaEventElapsedTime(&t, ev[2 * r], ev[2 * r + 1]);
                ms.push_back(t / per);
            }
            std::sort(ms.begin(), ms.end());
            const double med = ms[ms.size() / 2];
            printf("%-32s %5dx%dx%d  %8.1f us  %8.0f GFLOP/s  maxdiff-vs-step11 %.2e%s\n", v.name,
                   M, K, N, med * 1e3, 2.0 * M * (double)N * K / (med * 1e-3) / 1e9, maxd,
                   flush ? "  (L2 flushed)" : "");
        }
        for (auto& e : ev) cudaEventDestroy(e);
        cudaFree(A);
        cudaFree(AT);
        cudaFree(B);
        cudaFree(C);
        cudaFree(R);
    }
    if (F) cudaFree(F);
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "shapes") return run_shapes(false);
    if (argc > 1 && std::string(argv[1]) == "shapes-flush") return run_shapes(true);
    bool once = argc > 1;  // under ncu: each kernel once at 4096³
    Variant vs[] = {
        {"lib_step11_128x128x8", 128, 128, launch_lib},
        {"lib_step13_128x256x8", 128, 256, launch_lib13},
        {"transposeA_lib13_tn16", 128, 256, launch_tnn<launch_lib13_tn16>},
        {"transposeA_xtn_32_s2", 128, 256, launch_tnn<launch_xtn<128, 256, 32, 2>>},
        {"async_128x256x16_s3", 128, 256, launch_async<128, 256, 16, 3, 1>},
        {"lib_step13_nt", 128, 256, launch_lib13_nt, 0, 1},
        {"transposeAB_lib13_tn16", 128, 256, launch_tnt, 0, 1},
        {"lib13_tn16", 128, 256, launch_lib13_tn16, 1, 0},
        {"xtn_128x256x32_s2", 128, 256, launch_xtn<128, 256, 32, 2>, 1, 0},
        {"xtn_128x256x16_s2", 128, 256, launch_xtn<128, 256, 16, 2>, 1, 0},
        {"xtn_128x256x64_s2", 128, 256, launch_xtn<128, 256, 64, 2>, 1, 0},
        {"xtn_128x256x32_s3", 128, 256, launch_xtn<128, 256, 32, 3>, 1, 0},
        {"xtn_256x128x32_s2", 256, 128, launch_xtn<256, 128, 32, 2>, 1, 0},
    };
    std::vector<int> sizes = once ? std::vector<int>{4096} : std::vector<int>{2048, 4096, 8192};
    for (int n : sizes) {
        size_t bytes = (size_t)n * n * sizeof(float);
        std::vector<float> h(n * (size_t)n);
        float *A, *B, *C, *R;
        CK(cudaMalloc(&A, bytes));
        CK(cudaMalloc(&B, bytes));
        CK(cudaMalloc(&C, bytes));
        CK(cudaMalloc(&R, bytes));
        srand(1);
        for (auto& x : h) x = (rand() / (float)RAND_MAX) * 2.0f - 1.0f;
        CK(cudaMemcpy(A, h.data(), bytes, cudaMemcpyHostToDevice));
        for (auto& x : h) x = (rand() / (float)RAND_MAX) * 2.0f - 1.0f;
        CK(cudaMemcpy(B, h.data(), bytes, cudaMemcpyHostToDevice));
        std::vector<float> ref(h.size()), got(h.size());
        int ref_layout = -1;
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        for (auto& v : vs) {
            CK(cudaMemset(C, 0xff, bytes));  // poison: NaN where nothing is written
            v.fn(A, B, C, n, n, n);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            if (once) continue;
            if (ref_layout != v.ta + 2 * v.tb) {
                ref_layout = v.ta + 2 * v.tb;
                launch_ref(v.ta, v.tb, A, B, R, n);
                CK(cudaDeviceSynchronize());
                CK(cudaMemcpy(ref.data(), R, bytes, cudaMemcpyDeviceToHost));
            }
            CK(cudaMemcpy(got.data(), C, bytes, cudaMemcpyDeviceToHost));
            double maxd = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                double d = fabs((double)got[i] - ref[i]);
                if (!(d <= maxd)) maxd = d;  // NaN propagates
            }
            for (int w = 0; w < 3; ++w) v.fn(A, B, C, n, n, n);
            std::vector<float> ms;
            for (int r = 0; r < 15; ++r) {
                cudaEventRecord(e0);
                v.fn(A, B, C, n, n, n);
                cudaEventRecord(e1);
                cudaEventSynchronize(e1);
                float t;
                cudaEventElapsedTime(&t, e0, e1);
                ms.push_back(t);
            }
            std::sort(ms.begin(), ms.end());
            double med = ms[ms.size() / 2];
            printf("%-24s %5d  %8.3f ms  %8.0f GFLOP/s  maxdiff-vs-lib %.2e\n", v.name, n, med,
                   2.0 * n * (double)n * n / (med * 1e-3) / 1e9, maxd);
        }
        cudaFree(A);
        cudaFree(B);
        cudaFree(C);
        cudaFree(R);
    }
    return 0;
}
