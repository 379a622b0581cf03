// Tensor-core ceiling lab: how many TFLOP/s can `mma.sync.m16n8k16` (the instruction of HGEMM
// steps 14–16 and of attention steps 3–6) deliver on this GPU when nothing else limits it, and
// how does that compare with Hopper's `wgmma` (HGEMM step 17)? It answers whether a target for
// the `mma.sync` steps, stated as a fraction of cuBLAS (which runs on `wgmma`), fits under the
// instruction's own ceiling. Not part of the library.
//
// Kernels (bf16 operands, f32 accumulators; the operand values do not matter to the timing):
//   mma_sync  each warp issues ILP independent mma.sync per iteration from registers (no loads,
//             no shared memory), ITERS iterations; blocks of WARPS warps, BLOCKS_PER_SM a
//             multiprocessor
//   wgmma     each warpgroup issues four m64n256k16 wgmma per iteration, both operands from
//             shared memory through descriptors (the library's wgmma.cuh helpers), one commit
//             and wait a iteration; two warpgroups a block, one block a multiprocessor
// Timing: CUDA events around each launch after warm-up, median of 10;
// TFLOP/s = 2·16·8·16 flops an mma.sync (2·64·256·16 a wgmma) × count / time.
// What it found, and a link to its raw output: docs/kernels/matmul.md (the tensor-core ladder).
//
// Build and run on the GPU host (sm_90a):  OUT=dir bash dev/labs/mma_peak_sm90a_lab.sh
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "../kernels/matmul/wgmma.cuh"
#include "lab_common.cuh"

constexpr int ITERS = 4096;

template <int ILP>
__global__ void mma_sync_peak(float* out, int iters) {
    unsigned a[4], b[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = 0x3f803f80u ^ (threadIdx.x * (i + 1));  // bf16 pairs ~1.0
    b[0] = 0x3f803f80u;
    b[1] = 0x3f803f80u ^ threadIdx.x;
    float c[ILP][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int k = 0; k < ILP; ++k) hgemm::mma16816<__nv_bfloat16>(c[k], a, b[0], b[1]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < ILP; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    if (s == 12345.0f) out[threadIdx.x] = s;  // keeps the loop alive
}

// Two consumer-shaped warpgroups a block; 64 KiB of shared memory holds A (64×64) and B
// (256×64) slices in the 128-byte swizzle the descriptors describe.
__global__ void __launch_bounds__(256, 1) wgmma_peak(float* out, int iters) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const unsigned base = wg::smem_u32(smem);
    const unsigned sa = base, sb = base + 64 * 128;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int it = 0; it < iters; ++it) {
        wg::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wg::Mma<__nv_bfloat16, 256, 0, 0>::run(d, wg::desc(sa + kk * 32, 16, 1024),
                                                   wg::desc(sb + kk * 32, 16, 1024));
        wg::wgmma_commit();
        wg::wgmma_wait<0>();
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 128; ++i) s += d[i];
    if (s == 12345.0f) out[threadIdx.x] = s;
}

template <int ILP>
static void run_mma(int sms, float* out) {
    for (int warps : {4, 8, 16}) {
        for (int per_sm : {1, 2, 4}) {
            if (warps * per_sm > 32) continue;
            const int blocks = sms * per_sm;
            const double ms = lab_median_ms([&] {
                mma_sync_peak<ILP><<<blocks, 32 * warps>>>(out, ITERS);
            }, 10, 1);
            const double flops = 2.0 * 16 * 8 * 16 * ILP * (double)ITERS * blocks * warps;
            printf("mma_sync  ILP %d  %2d warps a block  %d blocks an SM  %8.3f ms  %6.1f TFLOP/s\n",
                   ILP, warps, per_sm, ms, flops / ms / 1e9);
        }
    }
}

int main() {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, %d SMs\n", p.name, p.multiProcessorCount);
    const int sms = p.multiProcessorCount;
    float* out;
    CK(cudaMalloc(&out, 4096 * sizeof(float)));
    run_mma<4>(sms, out);
    run_mma<8>(sms, out);
    const int smem = 64 * 128 + 256 * 128 + 1024;
    CK(cudaFuncSetAttribute(wgmma_peak, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const int iters = ITERS / 4;
    const double ms = lab_median_ms([&] { wgmma_peak<<<sms, 256, smem>>>(out, iters); }, 10, 1);
    const double flops = 2.0 * 64 * 256 * 16 * 4 * (double)iters * sms * 2;
    printf("wgmma     m64n256k16, 2 warpgroups a block, 1 block an SM  %8.3f ms  %6.1f TFLOP/s\n",
           ms, flops / ms / 1e9);
    CK(cudaFree(out));
    return 0;
}
