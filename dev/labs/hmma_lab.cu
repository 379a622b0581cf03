// HGEMM mma.sync lab: how far below the instruction's ceiling does an mma.sync GEMM run, and
// what closes the gap? The old schedule loads every fragment of a 16-deep step and then issues
// its mma, in that order (the `asm volatile` statements keep it), so each warp waits on its own
// ldmatrix latency, with STAGES - 1 slices in flight. Each variant adds one thing:
//   pipe    the multistage main loop of CUTLASS's mma.sync GEMMs: the fragments of step kk + 1 load
//           before the mma of step kk (two register sets), and the barrier of a slice sits in its
//           last step, so every stage of shared memory is in flight;
//   inside  a tile wholly inside the matrices is copied from pointers set once, without bounds;
//   xaddr   ldmatrix addresses as a per-lane constant XOR a step's chunk (as hmma.cuh's SwzRows);
// and the library's step 16, which has all three plus C staged through shared memory, 64-deep
// slices, and its two tile widths (128×256 of eight warps, 128×128 of four).
// Not part of the library.
//
// Kernels: bf16, A·B with both row-major (the library's step in all four layouts of the same
// buffers), f32 sums, bf16 C, at the shapes of the GEMM benchmark. Each variant's C
// (poisoned with NaN first) is compared with the old schedule's (the same sums in the same
// order: 0). Timing: lab_streamed (the median of back-to-back launches); the rate is 2·M·N·K
// over that time.
// What it found, and a link to its raw output: docs/kernels/matmul.md (step 16).
//
// Build and run on the GPU host:  OUT=dir bash dev/labs/hmma_lab.sh
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>

#include "../kernels/matmul/hmma.cuh"
#include "lab_common.cuh"

using namespace hgemm;

// The pipelined main loop for A·B (both row-major), BM×BN tiles, BK-deep slices, STAGES
// buffers, WM×WN warp tiles, blocks in groups of 8 tile rows. M, N, K: any (zero-filled tails).
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool PIPE, bool FAST, bool XADDR>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
    pipe_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                __nv_bfloat16* __restrict__ C, int M, int N, int K) {
    typedef __nv_bfloat16 T;
    constexpr int WARPS_N = BN / WN, NT = (BM / WM) * WARPS_N * 32;
    constexpr int MI = WM / 16, NI = WN / 8, KS = BK / 16;
    static_assert(KS % 2 == 0, "two fragment sets alternate over an even number of steps");
    typedef Tile<BM, BK, NT, true> TileA;
    typedef Tile<BK, BN, NT, true> TileB;
    static_assert(!XADDR || WN % 64 == 0, "XADDR: a warp tile starts on a whole swizzle line of B");
    extern __shared__ __align__(128) unsigned char smem[];
    u16* As = reinterpret_cast<u16*>(smem);
    u16* Bs = As + STAGES * BM * BK;

    const int gx = gridDim.x, gy = gridDim.y, id = blockIdx.y * gx + blockIdx.x;
    const int first = (id / (8 * gx)) * 8, rows = min(gy - first, 8);
    const int bm = first + (id % (8 * gx)) % rows, bn = (id % (8 * gx)) / rows;
    const int i0 = bm * BM, j0 = bn * BN;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
    const u16* a16 = reinterpret_cast<const u16*>(A);
    const u16* b16 = reinterpret_cast<const u16*>(B);

    // FAST: a slice wholly inside the matrices is copied from pointers set once, without bounds
    constexpr int RA = NT / (BK / 8), RB = NT / (BN / 8);  // rows each pass of the block covers
    static_assert(RA % 8 == 0 && RB % 8 == 0, "passes keep the swizzle phase");
    const u16* ga = a16 + (long long)(i0 + tid / (BK / 8)) * K + (tid % (BK / 8)) * 8;
    const u16* gb = b16 + (long long)(tid / (BN / 8)) * N + j0 + (tid % (BN / 8)) * 8;
    const int sa0 = tile_off<BK, true>(tid / (BK / 8), (tid % (BK / 8)) * 8);
    const int sb0 = tile_off<BN, true>(tid / (BN / 8), (tid % (BN / 8)) * 8);
    const bool inside = i0 + BM <= M && j0 + BN <= N && K % 8 == 0 && N % 8 == 0;
    auto issue = [&](int kt) {
        const int s = kt % STAGES, k0 = kt * BK;
        if (FAST && inside && k0 + BK <= K) {
#pragma unroll
            for (int p = 0; p < TileA::PER; ++p)
                cp_async16(As + s * BM * BK + sa0 + p * RA * BK, ga + k0 + (long long)p * RA * K, 16);
#pragma unroll
            for (int p = 0; p < TileB::PER; ++p)
                cp_async16(Bs + s * BK * BN + sb0 + p * RB * BN, gb + (long long)(k0 + p * RB) * N, 16);
            return;
        }
        TileA::copy_async(As + s * BM * BK, a16 + (long long)i0 * K + k0, a16, K, M - i0, K - k0, true, tid);
        TileB::copy_async(Bs + s * BK * BN, b16 + (long long)k0 * N + j0, b16, N, K - k0, N - j0, true, tid);
    };
    unsigned af[2][MI][4], bf[2][NI][2];
    // XADDR: the swizzled chunk of step kk is (2·kk) XOR a per-lane constant, so each address is
    // a per-lane base plus a shift of that XOR (instead of one precomputed offset per fragment)
    const unsigned as_u = smem_addr(As) + (wm + lane % 16) * BK * 2;
    const int ca = tile_off<BK, true>(wm + lane % 16, (lane / 16) * 8) / 8 % (BK / 8);
    const int rb = (lane % 8) + ((lane / 8) % 2) * 8;
    const unsigned bs_u = smem_addr(Bs) + rb * BN * 2 + (wn / 8) * 16;
    const int cb = (tile_off<BN, true>(rb, (lane / 16) * 8) / 8) % 8;
    auto load = [&](int kt, int kk, int f) {
        const int s = kt % STAGES;
        const u16* as = As + s * BM * BK;
        const u16* bs = Bs + s * BK * BN;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            if constexpr (XADDR)
                ldmatrix_x4<false>(af[f][mi], as_u + s * BM * BK * 2 + mi * 16 * BK * 2 + (((2 * kk) ^ ca) << 4));
            else
                ldmatrix_x4<false>(af[f][mi], as + tile_off<BK, true>(wm + mi * 16 + lane % 16, kk * 16 + (lane / 16) * 8));
        }
#pragma unroll
        for (int np = 0; np < NI / 2; ++np) {
            unsigned r[4];
            if constexpr (XADDR)
                ldmatrix_x4<true>(r, bs_u + s * BK * BN * 2 + kk * 16 * BN * 2 + (((2 * np) ^ cb) << 4));
            else
            ldmatrix_x4<true>(r, bs + tile_off<BN, true>(kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8,
                                                         wn + np * 16 + (lane / 16) * 8));
            bf[f][2 * np][0] = r[0];
            bf[f][2 * np][1] = r[1];
            bf[f][2 * np + 1][0] = r[2];
            bf[f][2 * np + 1][1] = r[3];
        }
    };
    float acc[MI][NI][4] = {};

    auto mma = [&](int f) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
                mma16816<T>(acc[mi][ni], af[f][mi], bf[f][ni][0], bf[f][ni][1]);
    };

    const int KT = (K + BK - 1) / BK;
    if constexpr (!PIPE) {  // the schedule step 16 had: STAGES - 1 slices ahead, load then mma
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < KT) issue(s);
            cp_async_commit();
        }
        for (int kt = 0; kt < KT; ++kt) {
            cp_async_wait<STAGES - 2>();
            __syncthreads();
            if (kt + STAGES - 1 < KT) issue(kt + STAGES - 1);
            cp_async_commit();
#pragma unroll
            for (int kk = 0; kk < KS; ++kk) {
                load(kt, kk, 0);
                mma(0);
            }
        }
    } else {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            if (s < KT) issue(s);
            cp_async_commit();
        }
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        load(0, 0, 0);
        for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
            for (int kk = 0; kk < KS; ++kk) {
                if (kk == KS - 1) {
                    // every warp holds its fragments of slice kt: after the barrier its buffer
                    // takes slice kt + STAGES, and slice kt + 1 has landed
                    cp_async_wait<STAGES - 2>();
                    __syncthreads();
                    if (kt + STAGES < KT) issue(kt + STAGES);
                    cp_async_commit();
                    if (kt + 1 < KT) load(kt + 1, 0, 0);
                } else {
                    load(kt, kk + 1, (kk + 1) % 2);
                }
                mma(kk % 2);
            }
        }
    }
    const int g = lane / 4, t2 = (lane % 4) * 2;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int i = i0 + wm + mi * 16 + g, j = j0 + wn + ni * 8 + t2;
            store_pair<T>(C, M, N, i, j, acc[mi][ni][0], acc[mi][ni][1], nullptr, 0, nullptr);
            store_pair<T>(C, M, N, i + 8, j, acc[mi][ni][2], acc[mi][ni][3], nullptr, 0, nullptr);
        }
}

// Step 16 exactly as the library instantiates it (16_hmma_async.cu), under lab names: the
// 256-wide tile in four layouts, the 128-wide one in one.
HGEMM_STEP(lab_step16, __nv_bfloat16, 256, 128, 256, 64, 64, 64, 3, true, true, 8)
HGEMM_KERNEL(lab_step16n, __nv_bfloat16, 128, false, false, 128, 128, 64, 64, 64, 3, true, true, 8)
// The same template at other slice depths, stage counts and block orders (A·B only).
HGEMM_KERNEL(lab_bk32_3st, __nv_bfloat16, 256, false, false, 128, 256, 32, 64, 64, 3, true, true, 8)
HGEMM_KERNEL(lab_bk32_4st, __nv_bfloat16, 256, false, false, 128, 256, 32, 64, 64, 4, true, true, 8)
HGEMM_KERNEL(lab_bk64_4st, __nv_bfloat16, 256, false, false, 128, 256, 64, 64, 64, 4, true, true, 8)
HGEMM_KERNEL(lab_group16, __nv_bfloat16, 256, false, false, 128, 256, 64, 64, 64, 3, true, true, 16)
// 128-wide block tiles: eight 64×32 warp tiles, or four 64×64 ones (two blocks a
// multiprocessor) in 32-deep slices.
HGEMM_KERNEL(lab_w128_8w, __nv_bfloat16, 256, false, false, 128, 128, 32, 64, 32, 3, true, true, 8)
HGEMM_KERNEL(lab_w128_8w_bk64, __nv_bfloat16, 256, false, false, 128, 128, 64, 64, 32, 3, true, true, 8)
HGEMM_KERNEL(lab_w128_4w, __nv_bfloat16, 128, false, false, 128, 128, 32, 64, 64, 3, true, true, 8)

struct Shape {
    int m, k, n;
};

int main() {
    cudaStream_t stream;
    lab_open(&stream);
    const Shape shapes[] = {{4096, 4096, 4096}, {8192, 8192, 8192}, {2048, 2048, 2048}, {1024, 1024, 1024},
                            {16384, 384, 1536}, {16384, 1536, 384}, {8192, 128, 512}, {256, 784, 256},
                            {64, 784, 256}};
    size_t most = 0;
    for (auto s : shapes) most = std::max(most, (size_t)std::max(s.m * (size_t)s.k, std::max((size_t)s.k * s.n, (size_t)s.m * s.n)));
    __nv_bfloat16 *A = dalloc<__nv_bfloat16>(most), *B = dalloc<__nv_bfloat16>(most);
    __nv_bfloat16 *C0 = dalloc<__nv_bfloat16>(most), *C1 = dalloc<__nv_bfloat16>(most);
    {
        std::vector<__nv_bfloat16> h(most);
        unsigned seed = 7;
        for (auto& v : h) v = __float2bfloat16(((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f);
        CK(cudaMemcpy(A, h.data(), most * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(B, h.data(), most * 2, cudaMemcpyHostToDevice));
    }
    auto diff = [&](size_t n) {
        std::vector<__nv_bfloat16> x(n), y(n);
        CK(cudaMemcpy(x.data(), C0, n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(y.data(), C1, n * 2, cudaMemcpyDeviceToHost));
        double m = 0;
        for (size_t i = 0; i < n; ++i) {
            const double a = __bfloat162float(x[i]), b = __bfloat162float(y[i]);
            const double d = std::fabs(a - b) / std::max(1.0, std::fabs(a));
            if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
        }
        return m;
    };

    for (auto s : shapes) {
        const double flop = 2.0 * s.m * s.n * s.k;
        printf("%d×%d×%d\n", s.m, s.k, s.n);
        auto pipe = [&](auto kern, int bm, int bn, int bk, int stages, int threads, const char* name) {
            const int smem = stages * (bm * bk + bk * bn) * 2;
            CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            dim3 grid((s.n + bn - 1) / bn, (s.m + bm - 1) / bm);
            CK(cudaMemset(C1, 0xff, (size_t)s.m * s.n * 2));  // poison: NaN
            kern<<<grid, threads, smem, stream>>>(A, B, C1, s.m, s.n, s.k);
            CK(cudaStreamSynchronize(stream));
            const double err = diff((size_t)s.m * s.n);
            auto run = [&](int) { kern<<<grid, threads, smem, stream>>>(A, B, C1, s.m, s.n, s.k); };
            const double us = lab_streamed(run, 1, 10, [&] { blocker<<<1, 1, 0, stream>>>(2000000); }, stream);
            printf("  %-30s %9.1f us  %6.1f TFLOP/s  (max rel diff to the first %.2g)\n", name, us, flop / us / 1e6, err);
        };
        // the reference output C0: the old schedule
        {
            auto k0 = pipe_kernel<128, 256, 32, 64, 64, 4, false, false, false>;
            const int smem = 4 * (128 * 32 + 32 * 256) * 2;
            CK(cudaFuncSetAttribute(k0, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            k0<<<dim3((s.n + 255) / 256, (s.m + 127) / 128), 256, smem, stream>>>(A, B, C0, s.m, s.n, s.k);
            CK(cudaStreamSynchronize(stream));
        }
        pipe(pipe_kernel<128, 256, 32, 64, 64, 4, false, false, false>, 128, 256, 32, 4, 256, "old schedule bk32 4st");
        pipe(pipe_kernel<128, 256, 32, 64, 64, 4, true, false, false>, 128, 256, 32, 4, 256, "pipe bk32 4st");
        pipe(pipe_kernel<128, 256, 32, 64, 64, 4, true, true, false>, 128, 256, 32, 4, 256, "pipe bk32 4st inside");
        pipe(pipe_kernel<128, 256, 32, 64, 64, 4, true, true, true>, 128, 256, 32, 4, 256, "pipe bk32 4st inside xaddr");
        pipe(pipe_kernel<128, 256, 32, 64, 64, 3, true, true, true>, 128, 256, 32, 3, 256, "pipe bk32 3st inside xaddr");
        pipe(pipe_kernel<128, 256, 64, 64, 64, 4, true, true, true>, 128, 256, 64, 4, 256, "pipe bk64 4st inside xaddr");
        pipe(pipe_kernel<128, 128, 32, 64, 32, 4, true, true, false>, 128, 128, 32, 4, 256, "pipe 128x128 8w inside");
        // the library's step 16 in its four layouts (the same data read as stored)
        auto lib = [&](auto kern, const char* name, int smem = 3 * (128 * 64 + 64 * 256) * 2, int bn = 256,
                       int threads = 256) {
            CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            dim3 grid((s.n + bn - 1) / bn, (s.m + 127) / 128);
            CK(cudaMemset(C1, 0xff, (size_t)s.m * s.n * 2));
            kern<<<grid, threads, smem, stream>>>(A, B, C1, s.m, s.n, s.k, 0, 0, 0, nullptr, 0, nullptr, nullptr, 0);
            CK(cudaStreamSynchronize(stream));
            const double err = diff((size_t)s.m * s.n);
            auto run = [&](int) {
                kern<<<grid, threads, smem, stream>>>(A, B, C1, s.m, s.n, s.k, 0, 0, 0, nullptr, 0, nullptr, nullptr, 0);
            };
            const double us = lab_streamed(run, 1, 10, [&] { blocker<<<1, 1, 0, stream>>>(2000000); }, stream);
            printf("  %-30s %9.1f us  %6.1f TFLOP/s  (diff to the first %s)\n", name, us, flop / us / 1e6,
                   err == 0 ? "0" : "- (other layout)");
        };
        lib(lab_step16_nn, "library step 16 nn");
        lib(lab_step16_nt, "library step 16 nt");
        lib(lab_step16_tn, "library step 16 tn");
        lib(lab_step16_tt, "library step 16 tt");
        lib(lab_step16n, "library step 16 128-wide", 3 * (128 * 64 + 64 * 128) * 2, 128, 128);
        lib(lab_bk32_3st, "template bk32 3 stages", 3 * (128 * 32 + 32 * 256) * 2);
        lib(lab_bk32_4st, "template bk32 4 stages", 4 * (128 * 32 + 32 * 256) * 2);
        lib(lab_bk64_4st, "template bk64 4 stages", 4 * (128 * 64 + 64 * 256) * 2);
        lib(lab_group16, "template groups of 16 rows");
        lib(lab_w128_8w, "template 128x128 8 warps", 3 * (128 * 32 + 32 * 128) * 2, 128);
        lib(lab_w128_8w_bk64, "template 128x128 8 warps bk64", 3 * (128 * 64 + 64 * 128) * 2, 128);
        lib(lab_w128_4w, "template 128x128 4 warps", 3 * (128 * 32 + 32 * 128) * 2, 128, 128);
    }
    return 0;
}
