// SGEMM step 13 — an asynchronous-copy pipeline with 128×256 tiles, shaped after what ncu shows
// of cuBLAS's FP32 kernel (256×128×8 tiles, 3 stages, 254 registers, one block per SM).
//
// What it changes over step 11:
// - Global → shared memory through `cp.async` (LDGSTS), three stages deep. No staging registers
//   and no separate store pass: a slice is requested two slices ahead, and the only wait is
//   `cp.async.wait_group` + one barrier per slice. Operands stored with k contiguous (A, or a
//   transposed B) are transposed on the way in by 4-byte copies; the others are copied 16 bytes
//   at a time. Tiles that stick out of the matrix are zero-filled by the copy itself (src-size 0).
// - 128×256 block tile, 256 threads, each thread 8×16 outputs as 2×4 sub-tiles of 4×4 spread 64
//   apart, and 255 registers (one block per SM, 8 warps): the fragment reads are float4
//   broadcasts (A) and 128 contiguous bytes (B) per 8-lane phase.
// - The fragments of k+1 are read from shared memory while k is multiplied (register double
//   buffering), and the FMAs walk the 8×16 tile in a serpentine so consecutive FMAs share an
//   operand (fewer register-bank conflicts).
// What remains between it and cuBLAS is dispatch stalls and shared-memory latency
// (docs/kernels/matmul.md; the lab is dev/labs/sgemm_lab.cu).
//
// The re-layout (bottom of this file, and `sgemm_relayout` in matmul.rs): the 4-byte transposing
// copies of an operand stored with k contiguous are what hold A·B and A·Bᵀ back, so large
// whole-tile products transpose such operands into a workspace and run an interior Aᵀ·B kernel
// (16-byte copies only, no bounds code, BK = 32 with 2 stages).
#include "common/cp_async.cuh"
#include "gemm_tile.cuh"
#include "stage_fma.cuh"

// cp.async of 4 or 16 bytes; `ok` false copies nothing and zero-fills the destination (src-size
// 0), so the source address is not read (it is still a valid pointer: the matrix base).
__device__ __forceinline__ void cp_async4(float* s, const float* g, bool ok) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(sa), "l"(g),
                 "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp_async16(float* s, const float* g, bool ok) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(g),
                 "r"(ok ? 16 : 0));
}
// Unpredicated forms for the interior fast path.
__device__ __forceinline__ void cp_async4(float* s, const float* g) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sa), "l"(g));
}
__device__ __forceinline__ void cp_async16(float* s, const float* g) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(g));
}
using camel::cp_async_commit;
using camel::cp_async_wait;

// Requests one BK × BX slice of an operand into shared memory, k-major (S[k*SS + x] =
// X(k0+k, x0+x)), with the layouts of TileLoader (gemm_tile.cuh). `kcontig`: 4-byte copies, a
// warp covering 8 k × 4 x so that the transposed shared stores hit 32 distinct banks (SS = BX+4);
// otherwise 16-byte copies when `vec`, else 4-byte copies along x.
template <int BK, int BX>
__device__ __forceinline__ void async_slice(float* S, const float* X, bool kcontig, bool vec,
                                            int ld, int Kd, int Xd, int k0, int x0, int t) {
    constexpr int SS = BX + 4;
    if (kcontig) {
#pragma unroll
        for (int p = 0; p < BK * BX / 256; ++p) {
            const int e = t + p * 256, ln = e % 32, ch = e / 32;
            const int k = ln % 8 + 8 * (ch % (BK / 8)), x = ln / 8 + 4 * (ch / (BK / 8));
            const int gk = k0 + k, gx = x0 + x;
            const bool ok = gk < Kd && gx < Xd;
            cp_async4(&S[k * SS + x], ok ? X + (long long)gx * ld + gk : X, ok);
        }
    } else if (vec) {
#pragma unroll
        for (int p = 0; p < BK * BX / 1024; ++p) {
            const int e = t + p * 256, k = e / (BX / 4), x = (e % (BX / 4)) * 4;
            const int gk = k0 + k, gx = x0 + x;
            const bool ok = gk < Kd && gx < Xd;  // Xd % 4 == 0: the whole float4 is inside
            cp_async16(&S[k * SS + x], ok ? X + (long long)gk * ld + gx : X, ok);
        }
    } else {
#pragma unroll
        for (int p = 0; p < BK * BX / 256; ++p) {
            const int e = t + p * 256, k = e / BX, x = e % BX;
            const int gk = k0 + k, gx = x0 + x;
            const bool ok = gk < Kd && gx < Xd;
            cp_async4(&S[k * SS + x], ok ? X + (long long)gk * ld + gx : X, ok);
        }
    }
}

// The interior fast path: the same copies as async_slice for a slice wholly inside the matrix,
// without bounds tests or zero-fill, which are what the generic form pays on every interior
// slice (docs/kernels/matmul.md). `KC`: k contiguous (4-byte
// transposing copies), else 16-byte copies along x (the rows must be float4-aligned).
template <int BK, int BX, bool KC, int SS = BX + 4>
__device__ __forceinline__ void async_slice_in(float* S, const float* X, int ld, int k0, int x0,
                                               int t) {
    static_assert(KC ? (BK * BX) % 256 == 0 : (BK * BX) % 1024 == 0,
                  "a slice must be whole copies for each of the 256 threads");
    if (KC) {
#pragma unroll
        for (int p = 0; p < BK * BX / 256; ++p) {
            const int e = t + p * 256, ln = e % 32, ch = e / 32;
            const int k = ln % 8 + 8 * (ch % (BK / 8)), x = ln / 8 + 4 * (ch / (BK / 8));
            cp_async4(&S[k * SS + x], X + (long long)(x0 + x) * ld + k0 + k);
        }
    } else {
#pragma unroll
        for (int p = 0; p < BK * BX / 1024; ++p) {
            const int e = t + p * 256, k = e / (BX / 4), x = (e % (BX / 4)) * 4;
            cp_async16(&S[k * SS + x], X + (long long)(k0 + k) * ld + x0 + x);
        }
    }
}

// IL (interior layout) ≥ 0 compiles only the interior fast path for one layout (bit 0: A
// transposed, bit 1: B transposed). The host launches such a kernel only when every tile is
// interior — M % BM == N % BN == 0, K and the split length % BK == 0, operands copied 16 bytes at
// a time and C float4-aligned (`relayout_fits` in matmul.rs) — so neither the generic copies,
// the layout branches nor the bounds tests are in its code. IL = -1: any shape and layout,
// with the interior path taken at run time for row-major A·B.
// `smem` holds ST stages of A (BK × (BM+4)) then ST of B (BK × (BN+PADB)): async_smem_floats.
// PADB = 4 keeps B's transposing copies free of bank conflicts; a row-major B needs none.
template <int BM, int BN, int BK, int ST, int PADB = 4>
__host__ __device__ constexpr int async_smem_floats() {
    return ST * BK * ((BM + 4) + (BN + PADB));
}
template <int BM, int BN, int BK, int ST, int IL = -1, int PADB = 4>
__device__ __forceinline__ void async_tile_gemm(float* smem, GEMM_ARGS) {
    constexpr int TMR = BM / 64, TNR = BN / 64;  // 4×4 sub-tiles per thread
    constexpr int SA = BM + 4, SB = BN + PADB;
    static_assert(PADB == 4 || (IL >= 0 && !(IL & 2)), "unpadded B only for a row-major B");
    static_assert(BM % 64 == 0 && BN % 64 == 0 && BK % 8 == 0, "tile shape");
    float(*As)[BK * SA] = reinterpret_cast<float(*)[BK * SA]>(smem);
    float(*Bs)[BK * SB] = reinterpret_cast<float(*)[BK * SB]>(smem + ST * BK * SA);
    GEMM_SPLIT_K(kBegin, kEnd, zb);
    const int t = threadIdx.x;
    int ty, tx;
    stage_thread(t, ty, tx);
    const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
    const bool ka = !transA, kb = transB;
    const int lda = transA ? M : K, ldb = transB ? K : N;
    const bool va = can_vec(A, lda), vb = can_vec(B, ldb);
    const int nk = (kEnd - kBegin + BK - 1) / BK;
    const bool fast =
        IL < 0 && ka && !kb && vb && i0 + BM <= M && j0 + BN <= N && (kEnd - kBegin) % BK == 0;
    auto issue = [&](int ks) {
        if (ks < nk) {
            const int k0 = kBegin + ks * BK;
            if (IL >= 0) {
                async_slice_in<BK, BM, !(IL & 1)>(As[ks % ST], A, (IL & 1) ? M : K, k0, i0, t);
                async_slice_in<BK, BN, (IL & 2) != 0, SB>(Bs[ks % ST], B, (IL & 2) ? K : N, k0, j0,
                                                          t);
            } else if (fast) {
                async_slice_in<BK, BM, true>(As[ks % ST], A, lda, k0, i0, t);
                async_slice_in<BK, BN, false>(Bs[ks % ST], B, ldb, k0, j0, t);
            } else {
                async_slice<BK, BM>(As[ks % ST], A, ka, va, lda, kEnd, M, k0, i0, t);
                async_slice<BK, BN>(Bs[ks % ST], B, kb, vb, ldb, kEnd, N, k0, j0, t);
            }
        }
        cp_async_commit();  // an empty group past the end keeps the wait counts uniform
    };
    float acc[TMR * 4][TNR * 4];
#pragma unroll
    for (int a = 0; a < TMR * 4; ++a)
#pragma unroll
        for (int b = 0; b < TNR * 4; ++b) acc[a][b] = 0.0f;
#pragma unroll
    for (int s = 0; s < ST - 1; ++s) issue(s);
    for (int ks = 0; ks < nk; ++ks) {
        cp_async_wait<ST - 2>();  // slice ks has landed (this thread's copies) …
        __syncthreads();          // … everyone's, and slice ks-1's stage is free again
        issue(ks + ST - 1);
        stage_fma<BM, BN, BK, SA, SB>(As[ks % ST], Bs[ks % ST], acc, ty, tx);
    }
    cp_async_wait<0>();
    if (IL >= 0) {  // every row and column inside C, rows float4-aligned
#pragma unroll
        for (int i = 0; i < TMR; ++i)
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
                for (int j = 0; j < TNR; ++j) {
                    const int row = i0 + i * 64 + ty * 4 + r, col = j0 + j * 64 + tx * 4;
                    const long long idx = (long long)row * N + col;
                    const float* a = &acc[i * 4 + r][j * 4];
                    *reinterpret_cast<float4*>(&C[idx]) =
                        make_float4(gemm_epilogue(a[0], col + 0, idx + 0, bias, act, Z),
                                    gemm_epilogue(a[1], col + 1, idx + 1, bias, act, Z),
                                    gemm_epilogue(a[2], col + 2, idx + 2, bias, act, Z),
                                    gemm_epilogue(a[3], col + 3, idx + 3, bias, act, Z));
                }
        return;
    }
    const bool vc = (N % 4 == 0) && ((reinterpret_cast<size_t>(C) & 15) == 0) &&
                    (!Z || (reinterpret_cast<size_t>(Z) & 15) == 0);
#pragma unroll
    for (int i = 0; i < TMR; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int j = 0; j < TNR; ++j)
                store_row<4>(&acc[i * 4 + r][j * 4], i0 + i * 64 + ty * 4 + r,
                             j0 + j * 64 + tx * 4, M, N, vc, C, bias, act, Z);
}

// A kernel whose stages fit in static shared memory.
#define ASYNC_STATIC(BM, BN, BK, ST)                                                 \
    __shared__ __align__(16) float smem[async_smem_floats<BM, BN, BK, ST>()];         \
    async_tile_gemm<BM, BN, BK, ST>(smem, GEMM_CALL_ARGS)

// 128×256×8, 3 stages: 37 KB of static shared memory, one block of 256 threads per SM.
extern "C" __global__ void __launch_bounds__(256, 1) sgemm_13_async_128x256x8(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    ASYNC_STATIC(128, 256, 8, 3);
}

// The interior kernels of the one layout whose operands both copy 16 bytes at a time: Aᵀ·B (A
// stored K×M, B K×N), with B unpadded. The host runs every large product through them
// (matmul.rs, `sgemm_relayout`): an operand stored with k contiguous (A of A·B, B of A·Bᵀ) is
// first transposed by sgemm_13_transpose into a workspace. Their stages exceed the 48 KB of
// static shared memory, so the launch passes them as dynamic memory (ASYNC_TN*_SMEM_BYTES).
// Two kernels: BK 32 with 2 stages (99 KB), the most FMAs per barrier, for products of two waves
// and more; BK 16 with 3 stages (74 KB) for a single wave (docs/kernels/matmul.md has both).
#define ASYNC_TN16_SMEM_BYTES (async_smem_floats<128, 256, 16, 3, 0>() * 4)
#define ASYNC_TN32_SMEM_BYTES (async_smem_floats<128, 256, 32, 2, 0>() * 4)
extern "C" __global__ void __launch_bounds__(256, 1) sgemm_13_async_128x256x16_tn(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    extern __shared__ __align__(16) float dsmem[];
    async_tile_gemm<128, 256, 16, 3, 1, 0>(dsmem, GEMM_CALL_ARGS);
}
extern "C" __global__ void __launch_bounds__(256, 1) sgemm_13_async_128x256x32_tn(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    extern __shared__ __align__(16) float dsmem[];
    async_tile_gemm<128, 256, 32, 2, 1, 0>(dsmem, GEMM_CALL_ARGS);
}

// Then smaller tiles, two blocks per SM: 128×128×16, 3 stages, ≤ 128 registers, after the
// transpose of A. Two blocks of 8 warps hide each other's barriers and the epilogue's stores,
// which one block of 255 registers cannot; the thread tile is 8×8 (64 accumulators) instead of
// 8×16 (docs/kernels/matmul.md).
#define ASYNC_TN128_SMEM_BYTES (async_smem_floats<128, 128, 16, 3, 0>() * 4)
extern "C" __global__ void __launch_bounds__(256, 2) sgemm_13_async_128x128x16_tn(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    extern __shared__ __align__(16) float dsmem[];
    async_tile_gemm<128, 128, 16, 3, 1, 0>(dsmem, GEMM_CALL_ARGS);
}

// Interior A·B kernels with A read in place (4-byte transposing copies, no workspace), for the
// products whose A is not worth transposing (N < 1024: the transpose moves 8 bytes per element
// of A, which the product reuses only N times): 128×192×16 with 4 stages, one block per SM, and
// 64×256×16 with 3 stages, two blocks per SM (the shapes each wins: docs/kernels/matmul.md).
#define ASYNC_NN192_SMEM_BYTES (async_smem_floats<128, 192, 16, 4, 0>() * 4)
#define ASYNC_NN64_SMEM_BYTES (async_smem_floats<64, 256, 16, 3, 0>() * 4)
extern "C" __global__ void __launch_bounds__(256, 1) sgemm_13_async_128x192x16_nn(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    extern __shared__ __align__(16) float dsmem[];
    async_tile_gemm<128, 192, 16, 4, 0, 0>(dsmem, GEMM_CALL_ARGS);
}
extern "C" __global__ void __launch_bounds__(256, 2) sgemm_13_async_64x256x16_nn(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    extern __shared__ __align__(16) float dsmem[];
    async_tile_gemm<64, 256, 16, 3, 0, 0>(dsmem, GEMM_CALL_ARGS);
}

// Y[b] = X[b]ᵀ: X[b] is R×C row-major at X + b·strideX, Y[b] is C×R at Y + b·R·C. 32×32 tiles
// through shared memory (padded: conflict-free), 32×8 threads; grid (⌈C/32⌉, ⌈R/32⌉, batch).
extern "C" __global__ void __launch_bounds__(256) sgemm_13_transpose(const float* __restrict__ X,
                                                                     float* __restrict__ Y, int R,
                                                                     int C, long long strideX) {
    CAMEL_PDL_WAIT();
    __shared__ float tile[32][33];
    X += blockIdx.z * strideX;
    Y += (long long)blockIdx.z * R * C;
    const int c = blockIdx.x * 32 + threadIdx.x, r0 = blockIdx.y * 32;
#pragma unroll
    for (int i = threadIdx.y; i < 32; i += 8)
        if (r0 + i < R && c < C) tile[i][threadIdx.x] = X[(long long)(r0 + i) * C + c];
    __syncthreads();
    const int r = r0 + threadIdx.x, c0 = blockIdx.x * 32;
#pragma unroll
    for (int i = threadIdx.y; i < 32; i += 8)
        if (c0 + i < C && r < R) Y[(long long)(c0 + i) * R + r] = tile[threadIdx.x][i];
}

// Small tiles for small outputs (split-K shapes such as 64×784×256): 4×4 per thread, and with
// BK = 16 and 4 stages a 64-long K-split has all of its copies in flight at once.
extern "C" __global__ void __launch_bounds__(256) sgemm_13_async_64x64x16(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    ASYNC_STATIC(64, 64, 16, 4);
}

// The 64×64×16 kernel with the split-K reduction in the same launch ("fused K-reduction"): no
// second kernel, so the launch gap and ramp of `sgemm_splitk_reduce` go away, which matter at
// the small shapes split-K is for. Each block writes its partial tile to the workspace `C`
// exactly as the split kernel does, then waits until every split of its tile has arrived (a
// counter per tile), and then reduces 1/S of the tile: the S blocks of a tile share the
// reduction rather than leaving it to the last block to arrive (docs/kernels/matmul.md). The
// sums run in split order from 0, as in sgemm_splitk_reduce, so C is bit-identical to the
// two-launch path.
// The wait needs every block of the grid resident at once: the host launches it only when the
// grid fits the GPU by the kernel's registers and shared memory (`fused_reduce_fits`).
// `counters` (2 ints per tile) must be zero at launch and are left zero: the last block of a
// tile to finish resets them.
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
extern "C" __global__ void __launch_bounds__(256)
    sgemm_13_async_64x64x16_fk(GEMM_ARGS, float* __restrict__ Cout, const float* __restrict__ biasOut,
                               int actOut, float* __restrict__ Zout, int* counters) {
    CAMEL_PDL_WAIT();
    {
        ASYNC_STATIC(64, 64, 16, 4);  // the partial tile into the workspace C
    }
    const int S = (K + kSplit - 1) / kSplit, sp = blockIdx.z % S, zb = blockIdx.z / S;
    const long long MN = (long long)M * N, total = (long long)(gridDim.z / S) * MN;
    int* arrived = counters + 2 * ((zb * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);
    __threadfence();  // this block's partial is visible before it counts itself in
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(arrived, 1);
        while (ld_acquire_gpu(arrived) < S) __nanosleep(32);
    }
    __syncthreads();
    const int i0 = blockIdx.y * 64, j0 = blockIdx.x * 64;
    const int cols = min(64, N - j0), n = min(64, M - i0) * cols;
    for (int e = n * sp / S + threadIdx.x; e < n * (sp + 1) / S; e += 256) {
        const long long idx = zb * MN + (long long)(i0 + e / cols) * N + j0 + e % cols;
        float sum = 0.0f;
#pragma unroll 4
        for (int q = 0; q < S; ++q) sum += __ldcg(&C[q * total + idx]);
        Cout[idx] = gemm_epilogue(sum, j0 + e % cols, idx, biasOut, actOut, Zout);
    }
    __syncthreads();  // every thread of this block is past the wait
    if (threadIdx.x == 0 && atomicAdd(arrived + 1, 1) == S - 1) {
        arrived[0] = 0;  // all S blocks are past the wait: ready for the next launch
        arrived[1] = 0;
    }
}
extern "C" __global__ void __launch_bounds__(256) sgemm_13_async_64x128x16(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    ASYNC_STATIC(64, 128, 16, 3);
}

// Whole-K kernels for small outputs with a long K (the MLP's 64×784×256 and 256×784×256),
// where split-K over 64×64 tiles (the kernels above, and cuBLAS's plan there) pays a memory
// latency per pipeline stage plus the wait for every split. Each block takes a thin BM×BN tile
// and copies all of its K into shared memory at once (every copy in flight together: one
// memory latency), KG groups of threads each multiply a K-range with TM×TN outputs per thread
// (float4 reads along k), and the groups' sums are added in shared memory, in group order, then
// stored through the epilogue. No split workspace, no counters, no bounds tests: the host
// launches it only on whole tiles with K % 4 = 0 and 16-byte aligned operands
// (`wholek_fits` in matmul.rs); A is row-major (k contiguous), B either layout.
// The tiles each shape runs are the fastest measured there (docs/kernels/matmul.md; the lab is
// dev/labs/sgemm_lab.cu).
template <int BM, int BN, int TM, int TN, int KG>
__device__ __forceinline__ void wholek_gemm(GEMM_ARGS) {
    constexpr int GT = (BM / TM) * (BN / TN), NT = KG * GT;
    static_assert(NT == 256 && TN % 2 == 0, "256 threads; B fragments of 2 or 4");
    extern __shared__ __align__(16) float wk_smem[];
    GEMM_BATCH_OFFSETS();
    const int KP = K + 4;  // padded rows of K (K % 4 == 0): conflict-free float4 reads
    float* As = wk_smem;             // BM rows of K
    float* Bs = wk_smem + BM * KP;   // transB: BN rows of K; else K rows of BN
    const int t = threadIdx.x, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    for (int e = t; e < BM * (K / 4); e += NT) {
        const int r = e / (K / 4), c = (e % (K / 4)) * 4;
        cp_async16(&As[r * KP + c], A + (long long)(m0 + r) * K + c);
    }
    if (transB) {
        for (int e = t; e < BN * (K / 4); e += NT) {
            const int r = e / (K / 4), c = (e % (K / 4)) * 4;
            cp_async16(&Bs[r * KP + c], B + (long long)(n0 + r) * K + c);
        }
    } else {
        for (int e = t; e < K * (BN / 4); e += NT) {
            const int k = e / (BN / 4), c = (e % (BN / 4)) * 4;
            cp_async16(&Bs[k * BN + c], B + (long long)k * N + n0 + c);
        }
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    const int g = t / GT, l = t % GT, ti = l / (BN / TN), tj = l % (BN / TN);
    const int kb = (K / 4) * g / KG * 4, ke = (K / 4) * (g + 1) / KG * 4;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    for (int k = kb; k < ke; k += 4) {
        float4 a[TM], b[TN];  // b[j]: B(k..k+3, col j) when transposed
#pragma unroll
        for (int i = 0; i < TM; ++i)
            a[i] = *reinterpret_cast<const float4*>(&As[(ti * TM + i) * KP + k]);
        if (transB) {
#pragma unroll
            for (int j = 0; j < TN; ++j)
                b[j] = *reinterpret_cast<const float4*>(&Bs[(tj * TN + j) * KP + k]);
        } else {
            // rows k..k+3 of B's TN columns, regrouped by column
            float r[4][TN];
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int j = 0; j < TN; j += 2)
                    *reinterpret_cast<float2*>(&r[q][j]) =
                        *reinterpret_cast<const float2*>(&Bs[(k + q) * BN + tj * TN + j]);
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = make_float4(r[0][j], r[1][j], r[2][j], r[3][j]);
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                acc[i][j] = fmaf(a[i].x, b[j].x, acc[i][j]);
                acc[i][j] = fmaf(a[i].y, b[j].y, acc[i][j]);
                acc[i][j] = fmaf(a[i].z, b[j].z, acc[i][j]);
                acc[i][j] = fmaf(a[i].w, b[j].w, acc[i][j]);
            }
    }
    __syncthreads();  // everyone is done with As and Bs: they hold the groups' sums now
    float* red = wk_smem;  // [KG][BM·BN]
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            red[g * BM * BN + (ti * TM + i) * BN + tj * TN + j] = acc[i][j];
    __syncthreads();
    for (int e = t; e < BM * BN; e += NT) {
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < KG; ++q) s += red[q * BM * BN + e];
        const int row = m0 + e / BN, col = n0 + e % BN;
        GEMM_STORE(row, col, s);
    }
}
extern "C" __global__ void __launch_bounds__(256) sgemm_13_wholek_8x16(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    wholek_gemm<8, 16, 2, 2, 8>(GEMM_CALL_ARGS);
}
extern "C" __global__ void __launch_bounds__(256) sgemm_13_wholek_16x32(GEMM_ARGS) {
    CAMEL_PDL_WAIT();
    wholek_gemm<16, 32, 2, 4, 4>(GEMM_CALL_ARGS);
}
