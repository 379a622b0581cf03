// Hopper attention lab: how fast is the simplest attention forward on `wgmma` (the Hopper step the
// attention ladder lacks), against step 6's FlashAttention-2 split on `mma.sync` and against
// PyTorch's FlashAttention-2 and cuDNN kernels? It answers whether an attention step 7 on TMA and
// `wgmma` is worth building, and how far it gets before warp specialization. Not part of the
// library.
//
// The kernel (bf16, d = 128, no mask, T a multiple of 128; one (batch · head, 128-query tile) a
// block of two warpgroups, each owning 64 query rows):
//   - TMA copies the block's Q tile once and K/V tiles of 128 keys into two stages of 128-byte
//     swizzled shared memory (thread 0 issues the copies; an mbarrier a stage counts the bytes);
//   - S = Q·Kᵀ: eight m64n128k16 `wgmma` a warpgroup, both operands from shared memory (K-major);
//   - the online softmax on S's registers (each thread holds two rows' columns, reduced across
//     its quad), the probabilities rounded to bf16 straight into `wgmma`'s A-register layout,
//     which is the accumulator's (no shared memory);
//   - O += P·V: eight m64n128k16 `wgmma` with A from registers and V from shared memory (V is
//     stored keys × d, N-major: the transpose flag);
//   - a block barrier, then thread 0 refills the stage just read. The MMAs and the softmax do not
//     overlap (each waits for the other): that is what FlashAttention-3's warp specialization and
//     ping-pong scheduling add.
// Validation: sampled output rows against an f64 reference on the host (from the same bf16
// inputs). Timing: CUDA events around each launch after warm-up, median of 20;
// TFLOP/s = 4·B·H·T²·d / time, the convention of docs/kernels/attention.md.
// What it found, and a link to its raw output: docs/kernels/attention.md.
//
// Build and run on the GPU host (sm_90a):  OUT=dir bash dev/labs/attn_wgmma_sm90a_lab.sh
#include <cuda.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../kernels/attention/07_wgmma_sm90a.cu"  // attn7::PvMma, attn7::pack2 (and wgmma.cuh)
#include "lab_common.cuh"

namespace lab {
using namespace wg;

constexpr int D = 128, BQ = 128, BKV = 128, THREADS = 256;
constexpr unsigned CHUNK = 128 * 128;           // 128 rows of 64 bf16 (128 bytes): 16 KiB
constexpr unsigned Q_BYTES = 2 * CHUNK;         // d in two 64-wide chunks
constexpr unsigned K_BYTES = 2 * CHUNK;
constexpr unsigned V_BYTES = 4 * 64 * 128;      // [key half][d box] of 64 × 64: 32 KiB
constexpr unsigned STAGE = K_BYTES + V_BYTES;   // 64 KiB
constexpr unsigned SMEM = Q_BYTES + 2 * STAGE + 1024;

// q, k, v, o: [B·H·T, 128] bf16 row-major (the maps describe q, k and v).
__global__ void __launch_bounds__(THREADS, 1)
    attn_wgmma_fwd(const __grid_constant__ TmaMap mq, const __grid_constant__ TmaMap mk,
                   const __grid_constant__ TmaMap mv, __nv_bfloat16* __restrict__ o, int T,
                   float scale_log2) {
    extern __shared__ unsigned char raw[];
    __shared__ __align__(8) unsigned long long qbar, full[2];
    unsigned char* smem = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u);
    unsigned char* sq = smem;
    unsigned char* st = smem + Q_BYTES;  // two stages of K then V

    const int tid = threadIdx.x, c = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
    const int bh = blockIdx.y, q0 = blockIdx.x * BQ, row0 = bh * T;
    const int tiles = T / BKV;
    auto load_kv = [&](int j) {
        unsigned char* s = st + (j % 2) * STAGE;
        const int r = row0 + j * BKV;
        mbar_expect_tx(&full[j % 2], STAGE);
        tma_load(s, mk, 0, r, 0, &full[j % 2]);
        tma_load(s + CHUNK, mk, 64, r, 0, &full[j % 2]);
        for (int h = 0; h < 2; ++h)
            for (int nb = 0; nb < 2; ++nb)
                tma_load(s + K_BYTES + (h * 2 + nb) * 64 * 128, mv, 64 * nb, r + 64 * h, 0,
                         &full[j % 2]);
    };
    if (tid == 0) {
        mbar_init(&qbar, 1);
        mbar_init(&full[0], 1);
        mbar_init(&full[1], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        mbar_expect_tx(&qbar, Q_BYTES);
        tma_load(sq, mq, 0, row0 + q0, 0, &qbar);
        tma_load(sq + CHUNK, mq, 64, row0 + q0, 0, &qbar);
        load_kv(0);
        if (tiles > 1) load_kv(1);
    }
    __syncthreads();

    float acc[64], s[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    mbar_wait(&qbar, 0);
    // this warpgroup's 64 query rows start 8 KiB into each Q chunk
    const unsigned qa = smem_u32(sq) + c * 64 * 128;

    for (int j = 0; j < tiles; ++j) {
        mbar_wait(&full[j % 2], (j / 2) & 1);
        const unsigned sk = smem_u32(st + (j % 2) * STAGE), sv = sk + K_BYTES;
#pragma unroll
        for (int i = 0; i < 64; ++i) s[i] = 0.0f;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const unsigned off = (kk / 4) * CHUNK + (kk % 4) * 32;
            Mma<__nv_bfloat16, 128, 0, 0>::run(s, desc(qa + off, 16, 1024), desc(sk + off, 16, 1024));
        }
        wgmma_commit();
        wgmma_wait<0>();

        // online softmax: s[4n + 2h + e] is row (lane / 4 + 8h), column 8n + 2(lane % 4) + e
        unsigned pa[8][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = -INFINITY;
#pragma unroll
            for (int n = 0; n < 16; ++n) mx = fmaxf(mx, fmaxf(s[4 * n + 2 * h], s[4 * n + 2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float mnew = fmaxf(m[h], mx * scale_log2);
            const float alpha = exp2f(m[h] - mnew);
            m[h] = mnew;
            l[h] *= alpha;
#pragma unroll
            for (int n = 0; n < 16; ++n) {
                acc[4 * n + 2 * h] *= alpha;
                acc[4 * n + 2 * h + 1] *= alpha;
                const float p0 = exp2f(s[4 * n + 2 * h] * scale_log2 - mnew);
                const float p1 = exp2f(s[4 * n + 2 * h + 1] * scale_log2 - mnew);
                l[h] += p0 + p1;
                // A fragment of key step n / 2: regs 0/1 rows g/g+8 columns 0–7, regs 2/3 8–15
                pa[n / 2][(n % 2) * 2 + h] = attn7::pack2<__nv_bfloat16>(p0, p1);
            }
        }
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BKV / 16; ++kk) {
            const unsigned b = sv + (kk / 4) * 2 * 64 * 128 + (kk % 4) * 2048;
            attn7::PvMma<__nv_bfloat16, D>::run(acc, pa[kk], desc(b, 64 * 128, 1024));
        }
        wgmma_commit();
        wgmma_wait<0>();
        __syncthreads();  // both warpgroups are done with this stage
        if (tid == 0 && j + 2 < tiles) load_kv(j + 2);
    }

#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const float inv = 1.0f / l[h];
        const int r = row0 + q0 + c * 64 + warp * 16 + lane / 4 + 8 * h;
#pragma unroll
        for (int n = 0; n < 16; ++n) {
            const int col = 8 * n + 2 * (lane % 4);
            *reinterpret_cast<unsigned*>(o + (size_t)r * D + col) =
                attn7::pack2<__nv_bfloat16>(acc[4 * n + 2 * h] * inv, acc[4 * n + 2 * h + 1] * inv);
        }
    }
}

}  // namespace lab

static wg::TmaMap make_map(const void* base, unsigned long long rows, unsigned box_rows) {
    CUtensorMap m;
    cuuint64_t dims[3] = {128, rows, 1}, str[2] = {256, rows * 256};
    cuuint32_t box[3] = {64, box_rows, 1}, es[3] = {1, 1, 1};
    CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims,
                                        str, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        printf("cuTensorMapEncodeTiled failed (%d)\n", (int)r);
        exit(1);
    }
    wg::TmaMap t;
    memcpy(&t, &m, sizeof t);
    return t;
}

__global__ void fill(__nv_bfloat16* x, size_t n, unsigned seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995;
    h ^= h >> 15;
    x[i] = __float2bfloat16((h & 0xFFFF) / 65536.0f - 0.5f);  // uniform in [−0.5, 0.5)
}

static float bf(const __nv_bfloat16& x) { return __bfloat162float(x); }

int main() {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, %d SMs\n", p.name, p.multiProcessorCount);
    CK(cudaFuncSetAttribute(lab::attn_wgmma_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            lab::SMEM));
    // the shapes of attention_bench: B = 16384 / T, H = 2048 / d = 16
    for (int T : {1024, 2048, 4096, 8192, 16384}) {
        const int BH = (16384 / T) * 16;
        const size_t n = (size_t)BH * T * lab::D;
        __nv_bfloat16 *q, *k, *v, *o;
        CK(cudaMalloc(&q, n * 2));
        CK(cudaMalloc(&k, n * 2));
        CK(cudaMalloc(&v, n * 2));
        CK(cudaMalloc(&o, n * 2));
        fill<<<(n + 255) / 256, 256>>>(q, n, 1);
        fill<<<(n + 255) / 256, 256>>>(k, n, 2);
        fill<<<(n + 255) / 256, 256>>>(v, n, 3);
        CK(cudaMemset(o, 0xff, n * 2));  // NaN: a row the kernel does not write shows
        const unsigned long long rows = (unsigned long long)BH * T;
        const wg::TmaMap mq = make_map(q, rows, 128), mk = make_map(k, rows, 128),
                         mv = make_map(v, rows, 64);
        const float scale_log2 = 1.4426950408889634f / sqrtf((float)lab::D);
        auto launch = [&] {
            lab::attn_wgmma_fwd<<<dim3(T / lab::BQ, BH), lab::THREADS, lab::SMEM>>>(mq, mk, mv, o, T,
                                                                                   scale_log2);
        };
        launch();
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        // validation: 3 batch·heads × 24 rows each against f64 on the host
        std::vector<__nv_bfloat16> hq(n), hk(n), hv(n), ho(n);
        CK(cudaMemcpy(hq.data(), q, n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hk.data(), k, n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hv.data(), v, n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(ho.data(), o, n * 2, cudaMemcpyDeviceToHost));
        double worst = 0.0;
        for (int b : {0, BH / 2, BH - 1})
            for (int r = 0; r < 24; ++r) {
                const int i = (r * 977 + b * 31) % T;
                const size_t qi = ((size_t)b * T + i) * lab::D;
                std::vector<double> sc(T), out(lab::D, 0.0);
                double mx = -1e300, sum = 0.0;
                for (int jj = 0; jj < T; ++jj) {
                    double d = 0.0;
                    const size_t kj = ((size_t)b * T + jj) * lab::D;
                    for (int x = 0; x < lab::D; ++x) d += (double)bf(hq[qi + x]) * bf(hk[kj + x]);
                    sc[jj] = d / std::sqrt((double)lab::D);
                    mx = std::max(mx, sc[jj]);
                }
                for (int jj = 0; jj < T; ++jj) {
                    sc[jj] = std::exp(sc[jj] - mx);
                    sum += sc[jj];
                    const size_t vj = ((size_t)b * T + jj) * lab::D;
                    for (int x = 0; x < lab::D; ++x) out[x] += sc[jj] * bf(hv[vj + x]);
                }
                for (int x = 0; x < lab::D; ++x) {
                    const double e = std::fabs(out[x] / sum - bf(ho[qi + x]));
                    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
                }
            }
        const double med = lab_median_ms(launch, 20, 3);
        const double flops = 4.0 * BH * (double)T * T * lab::D;
        printf("d128 T%-6d full forward  B·H %4d  %8.4f ms  %6.1f TFLOP/s  max |Δ| vs f64 %.2e%s\n", T, BH,
               med, flops / med / 1e9, worst, worst < 1e-2 ? "" : "  WRONG");
        CK(cudaFree(q));
        CK(cudaFree(k));
        CK(cudaFree(v));
        CK(cudaFree(o));
    }
    return 0;
}
