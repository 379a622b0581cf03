// Step-17 epilogue and cluster lab: what keeps HGEMM step 17 (TMA + wgmma) under cuBLAS — the
// epilogue's 4-byte pair stores straight from the registers, or the L2 traffic of every block
// loading its own copy of B's slices? Not part of the library.
//
// Versions (bf16; the library's step 17 pipeline: 128×256 tiles, one producer and two consumer
// warpgroups, four stages):
//   library      kernels/matmul/17_wgmma_tma_sm90a.cu: bias/activation in registers, the rounded
//                tile staged through the idle pipeline buffers, C written in 16-byte row chunks
//   pairs        each thread stores its pairs of C from its registers (4-byte stores)
//   cluster      pairs, in clusters of two blocks (two tile rows of one tile column) that load
//                half of each B slice and multicast it into both; a stage goes back to both
//                producers through mbarrier arrives on the other block's barrier (mapa), with
//                the arrive's default .cta scope
//   cluster rel  the same with .release.cluster arrives
//   persistent   library, one block a multiprocessor looping over tiles, three stages and a
//                staging area of its own, so the next tile's loads overlap this one's stores
// Validation: every version's C against the library's, bit for bit (same sums, same rounding).
// Timing: CUDA events around each launch after warm-up, median of 30; TFLOP/s = 2·M·N·K / time.
// What it found, and a link to its raw output: docs/kernels/matmul.md (step 17).
//
// Build and run on the GPU host (sm_90a):  OUT=dir bash dev/labs/wgmma_sm90a_lab.sh
#include <cuda.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../kernels/matmul/17_wgmma_tma_sm90a.cu"
#include "lab_common.cuh"

namespace lab {
using namespace wg;
// the k depth of a slice in 16-bit elements (one 128-byte swizzle row)
constexpr int BK = BK_BYTES / 2;

__device__ __forceinline__ void tma_load_multicast(void* dst, const TmaMap& map, int c0, int c1,
                                                   int c2, unsigned long long* bar,
                                                   unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2),
        "r"(smem_u32(bar)), "h"(mask)
        : "memory");
}
template <bool REL>
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned cta) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(bar)), "r"(cta));
    if (REL)
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
    else
        asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void mbar_wait_hint(unsigned long long* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_u32(bar)), "r"(parity), "r"(0x989680)
            : "memory");
    } while (!done);
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Step 17's pipeline with pair stores; CL = 2: clusters sharing B (REL: .release.cluster arrives).
template <typename T, int BN, int CL, bool REL, bool TA, bool TB>
__device__ __forceinline__ void body(const TmaMap& ma, const TmaMap& mb, T* __restrict__ C, int M,
                                     int N, int K, long long strideC, const T* __restrict__ bias,
                                     int act, T* __restrict__ Z, float* __restrict__ P,
                                     int k_split, int a_batched, int b_batched) {
    constexpr int STAGES = stages<BN>();
    constexpr unsigned A_BYTES = BM * BK * 2, STAGE = (BM + BN) * BK * 2;
    constexpr unsigned RELEASES = 8 * CL;
    CAMEL_PDL_WAIT();
    extern __shared__ unsigned char wg_smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    unsigned char* smem = wg_smem_raw + ((1024u - (smem_u32(wg_smem_raw) & 1023u)) & 1023u);
    const int rank = CL > 1 ? blockIdx.y % CL : 0;
    int bm, bn;
    {
        const int gx = gridDim.x, gy = gridDim.y / CL, id = (blockIdx.y / CL) * gx + blockIdx.x;
        constexpr int G = GROUP / CL;
        const int first = (id / (G * gx)) * G, rows = min(gy - first, G);
        bm = (first + (id % (G * gx)) % rows) * CL + rank;
        bn = (id % (G * gx)) / rows;
    }
    const int i0 = bm * BM, j0 = bn * BN;
    const int splits = k_split > 0 ? (K + k_split - 1) / k_split : 1;
    const int batch = blockIdx.z / splits, split = blockIdx.z % splits;
    const int k_begin = k_split > 0 ? split * k_split : 0;
    const int k_end = k_split > 0 ? min(K, k_begin + k_split) : K;
    const int KT = k_end > k_begin ? (k_end - k_begin + BK - 1) / BK : 0;
    const int tid = threadIdx.x;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], RELEASES);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (CL > 1) cluster_sync(); else __syncthreads();
    float d[BN / 2];
    const int c = tid / 128 - 1;
    if (tid < 128) {
        if (tid == 0) {
            const int ab = a_batched ? batch : 0, bb = b_batched ? batch : 0;
            for (int kt = 0; kt < KT; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES) mbar_wait_hint(&empty[s], ((kt / STAGES) - 1) & 1);
                unsigned char* sa = smem + s * STAGE;
                unsigned char* sb = sa + A_BYTES;
                const int k0 = k_begin + kt * BK;
                mbar_expect_tx(&full[s], STAGE);
                if constexpr (TA) {
                    tma_load(sa, ma, i0, k0, ab, &full[s]);
                    tma_load(sa + BOX, ma, i0 + 64, k0, ab, &full[s]);
                } else {
                    tma_load(sa, ma, k0, i0, ab, &full[s]);
                }
                if constexpr (CL == 1 && TB) {
                    tma_load(sb, mb, k0, j0, bb, &full[s]);
                } else if constexpr (CL == 1) {
                    for (int q = 0; q < BN / 64; ++q) tma_load(sb + q * BOX, mb, j0 + 64 * q, k0, bb, &full[s]);
                } else if constexpr (TB) {  // this CTA's share of B, into both CTAs
                    constexpr int R = BN / CL;
                    tma_load_multicast(sb + rank * R * 128, mb, k0, j0 + rank * R, bb, &full[s], 3);
                } else {
                    constexpr int Q = BN / 64 / CL;
                    for (int q = rank * Q; q < (rank + 1) * Q; ++q)
                        tma_load_multicast(sb + q * BOX, mb, j0 + 64 * q, k0, bb, &full[s], 3);
                }
            }
        }
        __syncwarp();
    } else {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
        const int lane = tid % 32;
        for (int kt = 0; kt < KT; ++kt) {
            const int s = kt % STAGES;
            mbar_wait_hint(&full[s], (kt / STAGES) & 1);
            const unsigned sa = smem_u32(smem + s * STAGE) + c * BOX;
            const unsigned sb = smem_u32(smem + s * STAGE + A_BYTES);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                const unsigned long long da = TA ? desc(sa + kk * 2048, BOX, 1024) : desc(sa + kk * 32, 16, 1024);
                const unsigned long long db = TB ? desc(sb + kk * 32, 16, 1024) : desc(sb + kk * 2048, BOX, 1024);
                Mma<T, BN, TA, !TB>::run(d, da, db);
            }
            wgmma_commit();
            wgmma_wait<1>();
            if (kt > 0) {
                __syncwarp();
                if (lane == 0) {
                    if (CL == 1) mbar_arrive(&empty[(kt - 1) % STAGES]);
                    else for (int r = 0; r < CL; ++r) mbar_arrive_cluster<REL>(&empty[(kt - 1) % STAGES], r);
                }
            }
        }
        wgmma_wait<0>();
        const int warp = (tid % 128) / 32;
        const int i = i0 + c * 64 + warp * 16 + lane / 4, j = j0 + (lane % 4) * 2;
        if (k_split > 0) {
            float* p = P + ((long long)split * (gridDim.z / splits) + batch) * M * N;
            for (int n = 0; n < BN / 8; ++n)
                for (int h = 0; h < 2; ++h) {
                    const int r = i + 8 * h, col = j + 8 * n;
                    if (r >= M || col >= N) continue;
                    p[(long long)r * N + col] = d[4 * n + 2 * h];
                    if (col + 1 < N) p[(long long)r * N + col + 1] = d[4 * n + 2 * h + 1];
                }
        } else {
            C += batch * strideC;
            if (Z) Z += batch * strideC;
#pragma unroll
            for (int n = 0; n < BN / 8; ++n) {
                hgemm::store_pair(C, M, N, i, j + 8 * n, d[4 * n], d[4 * n + 1], bias, act, Z);
                hgemm::store_pair(C, M, N, i + 8, j + 8 * n, d[4 * n + 2], d[4 * n + 3], bias, act, Z);
            }
        }
    }
    if (CL > 1) cluster_sync();
}

// Step 17 made persistent: one block a multiprocessor loops over tiles (GROUP-ordered, stride
// gridDim.x). Three stages instead of four leave room for a staging area of its own, so the
// producer loads the next tile's first slices while the consumers store this one's C; the
// stage ring and its phases run on across tiles. Batch 1, whole K, no saved pre-activation.
template <bool TB>
__device__ __forceinline__ void persistent(const TmaMap& ma, const TmaMap& mb, __nv_bfloat16* __restrict__ C,
                                           int M, int N, int K) {
    typedef __nv_bfloat16 T;
    constexpr int BN = 256, STAGES = 3, LD = BN + 8;
    constexpr unsigned A_BYTES = BM * BK * 2, STAGE = (BM + BN) * BK * 2;
    CAMEL_PDL_WAIT();
    extern __shared__ unsigned char wg_smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    unsigned char* smem = wg_smem_raw + ((1024u - (smem_u32(wg_smem_raw) & 1023u)) & 1023u);
    T* staging = reinterpret_cast<T*>(smem + STAGES * STAGE);
    const int gx = (N + BN - 1) / BN, gy = (M + BM - 1) / BM, tiles = gx * gy;
    const int KT = (K + BK - 1) / BK;
    auto tile_at = [&](int id, int& i0, int& j0) {
        const int first = (id / (GROUP * gx)) * GROUP, rows = min(gy - first, GROUP);
        i0 = (first + (id % (GROUP * gx)) % rows) * BM;
        j0 = ((id % (GROUP * gx)) / rows) * BN;
    };
    const int tid = threadIdx.x;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (tid < 128) {
        if (tid == 0) {
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int i0, j0;
                tile_at(t, i0, j0);
                for (int kt = 0; kt < KT; ++kt, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(&empty[s], ((it / STAGES) - 1) & 1);
                    unsigned char* sa = smem + s * STAGE;
                    unsigned char* sb = sa + A_BYTES;
                    const int k0 = kt * BK;
                    mbar_expect_tx(&full[s], STAGE);
                    tma_load(sa, ma, k0, i0, 0, &full[s]);
                    if constexpr (TB)
                        tma_load(sb, mb, k0, j0, 0, &full[s]);
                    else
                        for (int q = 0; q < BN / 64; ++q) tma_load(sb + q * BOX, mb, j0 + 64 * q, k0, 0, &full[s]);
                }
            }
        }
        return;
    }
    const int c = tid / 128 - 1, lane = tid % 32, warp = (tid % 128) / 32;
    T* st = staging + c * 64 * LD;
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int i0, j0;
        tile_at(t, i0, j0);
        float d[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
        for (int kt = 0; kt < KT; ++kt, ++it) {
            const int s = it % STAGES;
            mbar_wait(&full[s], (it / STAGES) & 1);
            const unsigned sa = smem_u32(smem + s * STAGE) + c * BOX;
            const unsigned sb = smem_u32(smem + s * STAGE + A_BYTES);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                const unsigned long long da = desc(sa + kk * 32, 16, 1024);
                const unsigned long long db = TB ? desc(sb + kk * 32, 16, 1024) : desc(sb + kk * 2048, BOX, 1024);
                Mma<T, BN, 0, !TB>::run(d, da, db);
            }
            wgmma_commit();
            wgmma_wait<1>();
            if (kt > 0) {
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[(it - 1) % STAGES]);
            }
        }
        wgmma_wait<0>();
        __syncwarp();
        if (lane == 0 && KT > 0) mbar_arrive(&empty[(it - 1) % STAGES]);  // the tile's last slice
        // the staging area is this warpgroup's own: wait until its last tile's reads are done
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + c) : "memory");
        const int r0 = warp * 16 + lane / 4, c0 = (lane % 4) * 2;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const unsigned lo = camel::float_to_bits<T>(d[4 * n + 2 * h]), hi = camel::float_to_bits<T>(d[4 * n + 2 * h + 1]);
                *reinterpret_cast<unsigned*>(st + (r0 + 8 * h) * LD + c0 + 8 * n) = lo | (hi << 16);
            }
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + c) : "memory");
        for (int e = tid % 128; e < 64 * (BN / 8); e += 128) {
            const int r = e / (BN / 8), q = (e % (BN / 8)) * 8;
            const int gi = i0 + c * 64 + r, gj = j0 + q;
            if (gi < M && gj < N)  // the lab's shapes: N a multiple of 8, C 16-byte aligned
                *reinterpret_cast<uint4*>(C + (long long)gi * N + gj) = *reinterpret_cast<const uint4*>(st + r * LD + q);
        }
    }
}
}  // namespace lab

#define LAB_KERNEL(NAME, CLD, CL, REL, TB)                                                            \
    extern "C" __global__ void CLD __launch_bounds__(wg::THREADS, 1) NAME(WGMMA_ARGS(__nv_bfloat16)) { \
        lab::body<__nv_bfloat16, 256, CL, REL, false, TB>(WGMMA_CALL_ARGS);                        \
    }
LAB_KERNEL(pairs_nn, , 1, false, false)
LAB_KERNEL(pairs_nt, , 1, false, true)
LAB_KERNEL(cluster_nn, __cluster_dims__(1, 2, 1), 2, false, false)
LAB_KERNEL(cluster_nt, __cluster_dims__(1, 2, 1), 2, false, true)
LAB_KERNEL(cluster_rel_nn, __cluster_dims__(1, 2, 1), 2, true, false)
LAB_KERNEL(cluster_rel_nt, __cluster_dims__(1, 2, 1), 2, true, true)
#define LAB_PERSISTENT(NAME, TB)                                                                     \
    extern "C" __global__ void __launch_bounds__(wg::THREADS, 1) NAME(WGMMA_ARGS(__nv_bfloat16)) { \
        lab::persistent<TB>(ma, mb, C, M, N, K);                                                    \
    }
LAB_PERSISTENT(persistent_nn, false)
LAB_PERSISTENT(persistent_nt, true)

typedef void (*Kern)(wg::TmaMap, wg::TmaMap, __nv_bfloat16*, int, int, int, long long, const __nv_bfloat16*, int,
                     __nv_bfloat16*, float*, int, int, int);

// A bf16 tensor map of rows × inner (inner contiguous), boxes box_inner × box_rows, 128-byte swizzle.
static wg::TmaMap make_map(const void* base, unsigned long long inner, unsigned long long rows, unsigned box_inner,
                           unsigned box_rows) {
    CUtensorMap m;
    cuuint64_t dims[3] = {inner, rows, 1}, str[2] = {inner * 2, ((inner * rows * 2 + 15) / 16) * 16};
    cuuint32_t box[3] = {box_inner, box_rows, 1}, es[3] = {1, 1, 1};
    CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, str,
                                        box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { printf("cuTensorMapEncodeTiled failed (%d)\n", (int)r); exit(1); }
    wg::TmaMap t;
    memcpy(&t, &m, sizeof t);
    return t;
}

__global__ void fill_bf16(__nv_bfloat16* x, size_t n, unsigned seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    x[i] = __float2bfloat16((h & 0xFFFF) / 32768.0f - 1.0f);
}

struct Version { const char* name; Kern nn, nt; int cl; bool persistent; };

int main() {
    cudaStream_t stream;
    const int sms = lab_open(&stream).multiProcessorCount;
    const unsigned SMEM = 192 * 1024 + 1024;
    Version vs[] = {{"library", (Kern)hgemm_17_w256_bf16_nn, (Kern)hgemm_17_w256_bf16_nt, 1, false},
                    {"pairs", (Kern)pairs_nn, (Kern)pairs_nt, 1, false},
                    {"cluster", (Kern)cluster_nn, (Kern)cluster_nt, 2, false},
                    {"cluster rel", (Kern)cluster_rel_nn, (Kern)cluster_rel_nt, 2, false},
                    {"persistent", (Kern)persistent_nn, (Kern)persistent_nt, 1, true}};
    const unsigned PSMEM = 3 * 48 * 1024 + 64 * 264 * 2 * 2 + 1024;  // three stages, staging
    for (auto& v : vs)
        for (Kern k : {v.nn, v.nt})
            CK(cudaFuncSetAttribute((const void*)k, cudaFuncAttributeMaxDynamicSharedMemorySize, v.persistent ? PSMEM : SMEM));
    int shapes[][3] = {{4096, 4096, 4096}, {8192, 8192, 8192}, {2048, 2048, 2048}, {16384, 1536, 1536}, {16384, 384, 384}};
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    printf("%-20s %-3s %-12s %10s %8s\n", "M×K×N", "AB", "version", "TFLOP/s", "vs lib");
    for (auto& s : shapes) {
        const int M = s[0], K = s[1], N = s[2];
        __nv_bfloat16 *A = dalloc<__nv_bfloat16>((size_t)M * K), *B = dalloc<__nv_bfloat16>((size_t)K * N),
                      *C = dalloc<__nv_bfloat16>((size_t)M * N), *R = dalloc<__nv_bfloat16>((size_t)M * N);
        fill_bf16<<<((size_t)M * K + 255) / 256, 256, 0, stream>>>(A, (size_t)M * K, 1);
        fill_bf16<<<((size_t)K * N + 255) / 256, 256, 0, stream>>>(B, (size_t)K * N, 2);
        for (int tb = 0; tb < 2; ++tb) {
            double lib = 0;
            for (auto& v : vs) {
                wg::TmaMap ma = make_map(A, K, M, 64, 128);
                // B stored K×N (nn): 64×64 boxes; N×K (nt): rows of the block's (or its half's) columns
                wg::TmaMap mb = tb ? make_map(B, K, N, 64, 256 / v.cl) : make_map(B, N, K, 64, 64);
                Kern k = tb ? v.nt : v.nn;
                dim3 grid((N + 255) / 256, ((M + 127) / 128 + v.cl - 1) / v.cl * v.cl, 1);
                const int tiles = ((N + 255) / 256) * ((M + 127) / 128);
                if (v.persistent) grid = dim3(std::min(tiles, sms), 1, 1);
                const unsigned smem = v.persistent ? PSMEM : SMEM;
                __nv_bfloat16* out = v.cl == 1 && !strcmp(v.name, "library") ? R : C;
                auto launch = [&]() {
                    k<<<grid, wg::THREADS, smem, stream>>>(ma, mb, out, M, N, K, (long long)M * N, nullptr, 0, nullptr,
                                                           nullptr, 0, 0, 0);
                };
                CK(cudaMemsetAsync(out, 0xFF, (size_t)M * N * 2, stream));  // poisoned
                launch();
                CK(cudaStreamSynchronize(stream));
                CK(cudaGetLastError());
                if (out == C) {  // bit for bit against the library's C
                    std::vector<unsigned short> a((size_t)M * N), b((size_t)M * N);
                    CK(cudaMemcpy(a.data(), R, a.size() * 2, cudaMemcpyDeviceToHost));
                    CK(cudaMemcpy(b.data(), C, b.size() * 2, cudaMemcpyDeviceToHost));
                    size_t bad = 0;
                    for (size_t i = 0; i < a.size(); ++i) bad += a[i] != b[i];
                    if (bad) { printf("%s: %zu elements differ from the library's\n", v.name, bad); return 1; }
                }
                for (int i = 0; i < 5; ++i) launch();
                std::vector<float> t;
                for (int i = 0; i < 30; ++i) {
                    cudaEventRecord(e0, stream);
                    launch();
                    cudaEventRecord(e1, stream);
                    cudaEventSynchronize(e1);
                    float ms;
                    cudaEventElapsedTime(&ms, e0, e1);
                    t.push_back(ms);
                }
                std::sort(t.begin(), t.end());
                const double tf = 2.0 * M * N * K / (t[t.size() / 2] * 1e-3) / 1e12;
                if (out == R) lib = tf;
                char shape[32];
                snprintf(shape, sizeof shape, "%d×%d×%d", M, K, N);
                printf("%-20s %-3s %-12s %10.1f %7.2f×\n", shape, tb ? "nt" : "nn", v.name, tf, tf / lib);
            }
        }
        cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(R);
    }
    return 0;
}
