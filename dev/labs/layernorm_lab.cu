// LayerNorm lab: which forward and backward kernels for 16384×768 move their bytes closest to a
// copy? Candidates beside the library's steps (kernels/layernorm/) in one program, as llm.c
// keeps dev/cuda: kernels, validation against the library, timing. Not part of the library.
//
// Versions, forward:
//   step 3 / 4   the library's (step 4: streaming hints)
//   fR           a warp loads R rows before reducing any (R = 2, 4)
//   persistent   a persistent grid, the next row prefetched in registers (with and without hints)
//   const cols   the row width a compile-time constant, blocks of 256 or 128 threads
// Versions, backward (column sums of dγ, dβ included):
//   step 3       the library's: per-warp dγ/dβ slices, a separate column-sum kernel
//   hints        step 3 with streaming hints
//   B2 / B5      the column sum fused in the kernel: a warp a column / a block per 8 columns
//   smem         dγ/dβ accumulated in shared memory
//   dx only      no dγ/dβ at all (the bound for a kernel moving these bytes)
//   bP / B4      a pair of warps a row at 2, 3, 4 blocks an SM; B4 keeps γ in registers across
//                rows (the library's step 4)
//
// Timing: lab_common.cuh's streamed method, LAB_PER launches a batch (default 20), LAB_SETS
// buffer sets rotated (default 2), a same-size cudaMemcpy timed the same way; where it and
// bench_memory disagree, bench_memory decides. What it found and where it went:
// dev/labs/README.md.
//
// Build and run on the GPU host:  OUT=dir bash dev/labs/layernorm_lab.sh
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#include "../kernels/layernorm/02_warp_welford.cu"  // the library's kernels (steps 2–4)
#include "../kernels/layernorm/03_row_registers.cu"
#include "../kernels/layernorm/04_streaming.cu"
#include "lab_common.cuh"


constexpr int COLS = 768, VEC = 4, NV = 6, PER_LANE = NV * VEC;  // 24 floats of a row per lane
constexpr int LIB_SMEM = 8 * 2 * COLS * 4;  // the library's backward: each warp's dγ/dβ slice

template <bool CS>
__device__ __forceinline__ float4 lab_ld(const float* p) {
    return CS ? __ldcs(reinterpret_cast<const float4*>(p)) : *reinterpret_cast<const float4*>(p);
}

// ---------------------------------------------------------------------------------------------
// Forward candidates.
// fR: a warp owns R consecutive rows, loads all of them (R × 6 float4 per lane, independent)
// before reducing any: R times the bytes in flight per warp. R = 1 is the library's step 3.
template <int R, int MINB, bool CS = false>
__global__ void __launch_bounds__(256, MINB) lab_fwd_rows(const float* __restrict__ x, const float* __restrict__ gamma,
                                                           const float* __restrict__ beta, float* __restrict__ y,
                                                           float* __restrict__ mean, float* __restrict__ rstd,
                                                           long long rows) {
    const int lane = threadIdx.x % 32;
    const long long r0 = ((long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * R;
    float v[R][PER_LANE];
#pragma unroll
    for (int q = 0; q < R; ++q) {
        if (r0 + q < rows) {
            const float* xr = x + (r0 + q) * COLS;
#pragma unroll
            for (int i = 0; i < NV; ++i) {
                float4 a = lab_ld<CS>(xr + (i * 32 + lane) * 4);
                v[q][4 * i] = a.x, v[q][4 * i + 1] = a.y, v[q][4 * i + 2] = a.z, v[q][4 * i + 3] = a.w;
            }
        }
    }
#pragma unroll
    for (int q = 0; q < R; ++q) {
        if (r0 + q >= rows) break;
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) s += v[q][j];
        const float mu = camel::warp_sum(s) / (float)COLS;
        float qq = 0.0f;
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) qq += (v[q][j] - mu) * (v[q][j] - mu);
        const float rs = 1.0f / sqrtf(camel::warp_sum(qq) / (float)COLS + 1e-5f);
        float* yr = y + (r0 + q) * COLS;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int c = (i * 32 + lane) * 4;
            float4 g = *reinterpret_cast<const float4*>(gamma + c), b = *reinterpret_cast<const float4*>(beta + c);
            const float* w = v[q] + 4 * i;
            camel::st4<CS>(yr + c, make_float4((w[0] - mu) * rs * g.x + b.x, (w[1] - mu) * rs * g.y + b.y,
                                                             (w[2] - mu) * rs * g.z + b.z, (w[3] - mu) * rs * g.w + b.w));
            asm volatile("" ::: "memory");  // γ, β loaded per float4, not all hoisted (registers)
        }
        if (lane == 0) mean[r0 + q] = mu, rstd[r0 + q] = rs;
    }
}

// fP: persistent warps (grid = resident blocks), each walking rows with a stride and holding
// the next row's loads in registers while it reduces and writes the current one.
template <int MINB, bool CS = false>
__global__ void __launch_bounds__(256, MINB) lab_fwd_prefetch(const float* __restrict__ x, const float* __restrict__ gamma,
                                                               const float* __restrict__ beta, float* __restrict__ y,
                                                               float* __restrict__ mean, float* __restrict__ rstd,
                                                               long long rows) {
    const int lane = threadIdx.x % 32;
    const long long stride = (long long)gridDim.x * (blockDim.x / 32);
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    float nx[PER_LANE];
    auto load = [&](long long rr) {
        const float* xr = x + rr * COLS;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            float4 a = lab_ld<CS>(xr + (i * 32 + lane) * 4);
            nx[4 * i] = a.x, nx[4 * i + 1] = a.y, nx[4 * i + 2] = a.z, nx[4 * i + 3] = a.w;
        }
    };
    if (r < rows) load(r);
    for (; r < rows; r += stride) {
        float v[PER_LANE];
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) v[j] = nx[j];
        if (r + stride < rows) load(r + stride);
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) s += v[j];
        const float mu = camel::warp_sum(s) / (float)COLS;
        float qq = 0.0f;
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) qq += (v[j] - mu) * (v[j] - mu);
        const float rs = 1.0f / sqrtf(camel::warp_sum(qq) / (float)COLS + 1e-5f);
        float* yr = y + r * COLS;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int c = (i * 32 + lane) * 4;
            float4 g = *reinterpret_cast<const float4*>(gamma + c), b = *reinterpret_cast<const float4*>(beta + c);
            const float* w = v + 4 * i;
            camel::st4<CS>(yr + c, make_float4((w[0] - mu) * rs * g.x + b.x, (w[1] - mu) * rs * g.y + b.y,
                                               (w[2] - mu) * rs * g.z + b.z, (w[3] - mu) * rs * g.w + b.w));
            asm volatile("" ::: "memory");  // γ, β loaded per float4, not all hoisted (registers)
        }
        if (lane == 0) mean[r] = mu, rstd[r] = rs;
    }
}

// ---------------------------------------------------------------------------------------------
// Backward candidates. All persistent (grid = resident blocks × SMs), a warp per row at a time.
// The first fused column sum (dropped): every block waits until all blocks of the grid have
// written their partial row (all resident: the grid is sized so), then warp e sums entry e of
// [dγ | dβ] over the partials (lane b takes partials b, b + 32, …, 12 loads in flight; then a
// butterfly): deterministic, but each 4-byte read is a 32-byte sector of its own. The kept form
// is the library's ln3_fused_colsum (a block per 8 entries, whole sectors). counters[0..1] zero
// at launch, left zero.
__device__ __forceinline__ void lab_fused_colsum_warp(const float* __restrict__ partial, float* __restrict__ dgamma,
                                                      float* __restrict__ dbeta, int* counters) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(counters, 1);
        while (camel::ld_acquire_gpu(counters) < (int)gridDim.x) __nanosleep(32);
    }
    __syncthreads();
    const int lane = threadIdx.x % 32, W = blockDim.x / 32;
    const int nb = gridDim.x;
    for (int e = blockIdx.x * W + threadIdx.x / 32; e < 2 * COLS; e += gridDim.x * W) {
        const int which = e / COLS, col = e % COLS;
        const float* p = partial + (long long)which * nb * COLS + col;
        float t[12];
#pragma unroll
        for (int q = 0; q < 12; ++q) t[q] = lane + 32 * q < nb ? __ldcg(p + (long long)(lane + 32 * q) * COLS) : 0.0f;
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < 12; ++q) s += t[q];
        for (int b = lane + 32 * 12; b < nb; b += 32) s += __ldcg(p + (long long)b * COLS);
        s = camel::warp_sum(s);
        if (lane == 0) (which ? dbeta : dgamma)[col] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(counters + 1, 1) == (int)gridDim.x - 1) {
        counters[0] = 0;
        counters[1] = 0;
    }
}

// bX: the library's step 3 main kernel (column sum not fused) followed by the dropped fused form.
__global__ void __launch_bounds__(256, 2) lab_bwd_reg(const float* __restrict__ x, const float* __restrict__ gamma,
                                                       const float* __restrict__ g, const float* __restrict__ mean,
                                                       const float* __restrict__ rstd, float* __restrict__ dx,
                                                       float* __restrict__ partial, long long rows, long long cols,
                                                       float* dgamma, float* dbeta, int* counters) {
    ln3_bwd<VEC, NV>(x, gamma, g, mean, rstd, dx, partial, rows, cols, dgamma, dbeta, nullptr);
    lab_fused_colsum_warp(partial, dgamma, dbeta, counters);
}

// bV: one template for the variants, all with the row width a constant (no bounds code):
// ACC: dγ/dβ sums in registers (as step 3); PART: how the block's warps are added into its partial
// row (1: step 3's one warp a turn, 8 barriers; 2: every warp stores its sums to its own slice of
// dynamic shared memory, one barrier, then each thread adds the 8 slices of its columns in warp
// order — the same sums bit for bit); CS: streaming hints on x, g loads and dx stores; FUSED: the
// column sum in the same kernel (1: lab_fused_colsum_warp, 2: the library's ln3_fused_colsum).
template <int MINB, bool ACC, int PART, bool CS, int FUSED>
__global__ void __launch_bounds__(256, MINB) lab_bwd(const float* __restrict__ x, const float* __restrict__ gamma,
                                                      const float* __restrict__ g, const float* __restrict__ mean,
                                                      const float* __restrict__ rstd, float* __restrict__ dx,
                                                      float* __restrict__ partial, long long rows, long long cols,
                                                      float* dgamma, float* dbeta, int* counters) {
    extern __shared__ __align__(16) float lab_red[];  // PART 1: 2·COLS floats; PART 2: 8 × 2·COLS
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, W = blockDim.x / 32;
    const float inv_cols = 1.0f / (float)cols;
    float ag[PER_LANE], ab[PER_LANE];
#pragma unroll
    for (int j = 0; j < PER_LANE; ++j) ag[j] = ab[j] = 0.0f;
    for (long long r = (long long)blockIdx.x * W + w; r < rows; r += (long long)gridDim.x * W) {
        float xv[PER_LANE], gv[PER_LANE];
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int c = (i * 32 + lane) * 4;
            float4 a = make_float4(0.f, 0.f, 0.f, 0.f), b = a;
            if (c < cols) a = lab_ld<CS>(x + r * cols + c), b = lab_ld<CS>(g + r * cols + c);
            xv[4 * i] = a.x, xv[4 * i + 1] = a.y, xv[4 * i + 2] = a.z, xv[4 * i + 3] = a.w;
            gv[4 * i] = b.x, gv[4 * i + 1] = b.y, gv[4 * i + 2] = b.z, gv[4 * i + 3] = b.w;
        }
        const float mu = mean[r], rs = rstd[r];
        float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            if ((i * 32 + lane) * 4 >= cols) continue;
            float4 q = *reinterpret_cast<const float4*>(gamma + (i * 32 + lane) * 4);
            const float wv[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int j = 4 * i + k;
                const float xh = (xv[j] - mu) * rs, h = gv[j] * wv[k];
                if (ACC) ag[j] += gv[j] * xh, ab[j] += gv[j];
                xv[j] = xh, gv[j] = h, s1 += h, s2 += h * xh;
            }
        }
        s1 = camel::warp_sum(s1) * inv_cols;
        s2 = camel::warp_sum(s2) * inv_cols;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int c = (i * 32 + lane) * 4;
            if (c >= cols) continue;
            float o[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) o[k] = rs * (gv[4 * i + k] - s1 - xv[4 * i + k] * s2);
            const float4 v = make_float4(o[0], o[1], o[2], o[3]);
            if (CS) __stcs(reinterpret_cast<float4*>(dx + r * cols + c), v);
            else *reinterpret_cast<float4*>(dx + r * cols + c) = v;
        }
    }
    if (!ACC) return;
    if (PART == 1) {
        for (int turn = 0; turn < W; ++turn) {
            if (w == turn) {
#pragma unroll
                for (int i = 0; i < NV; ++i)
#pragma unroll
                    for (int k = 0; k < 4; ++k) {
                        const int c = (i * 32 + lane) * 4 + k, j = 4 * i + k;
                        lab_red[c] = turn == 0 ? ag[j] : lab_red[c] + ag[j];
                        lab_red[COLS + c] = turn == 0 ? ab[j] : lab_red[COLS + c] + ab[j];
                    }
            }
            __syncthreads();
        }
        for (int c = threadIdx.x; c < 2 * COLS; c += blockDim.x)
            partial[((long long)(c / COLS) * gridDim.x + blockIdx.x) * COLS + c % COLS] = lab_red[c];
    } else {
        float* mine = lab_red + w * 2 * COLS;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int c = (i * 32 + lane) * 4;
            *reinterpret_cast<float4*>(mine + c) = make_float4(ag[4 * i], ag[4 * i + 1], ag[4 * i + 2], ag[4 * i + 3]);
            *reinterpret_cast<float4*>(mine + COLS + c) = make_float4(ab[4 * i], ab[4 * i + 1], ab[4 * i + 2], ab[4 * i + 3]);
        }
        __syncthreads();
        for (int c = threadIdx.x; c < 2 * COLS; c += blockDim.x) {
            float t = 0.0f;
            for (int ww = 0; ww < W; ++ww) t += lab_red[ww * 2 * COLS + c];
            partial[((long long)(c / COLS) * gridDim.x + blockIdx.x) * COLS + c % COLS] = t;
        }
    }
    if (FUSED == 1) lab_fused_colsum_warp(partial, dgamma, dbeta, counters);
    if (FUSED == 2) ln3_fused_colsum(partial, dgamma, dbeta, counters, COLS);
}

// bP: a PAIR of warps owns a row (H = 2 warps, each half the columns: 3 float4 a lane at 768), so a
// lane's x, g and dγ/dβ sums are half as many registers (48 floats against 96): the aim is
// step 3's sums at the dx-only kernel's occupancy. The row's Σ ĝ and Σ ĝ·x̂ are each warp's
// shuffle sum plus its partner's, exchanged through shared memory with one named barrier of
// the pair's 64 threads per row (double-buffered by row parity: a warp cannot write a buffer
// again before its partner has passed the next barrier, i.e. read it). Both warps add the two
// halves in the same order, so they agree bit for bit. The block's partial row: each pair
// stores its sums to its own slice, one barrier, every thread adds the pairs' slices in order.
template <int MINB, int FUSED>
__global__ void __launch_bounds__(256, MINB) lab_bwd_pair(const float* __restrict__ x, const float* __restrict__ gamma,
                                                           const float* __restrict__ g, const float* __restrict__ mean,
                                                           const float* __restrict__ rstd, float* __restrict__ dx,
                                                           float* __restrict__ partial, long long rows, long long cols,
                                                           float* dgamma, float* dbeta, int* counters) {
    constexpr int H = 2, NVH = NV / H, PL = NVH * 4, HALF = COLS / H;  // per lane: 12 floats of the row
    extern __shared__ __align__(16) float lab_red[];                      // P × 2·COLS: the pairs' dγ/dβ
    __shared__ float xch[8][2][2][2];                                     // [pair][parity][half][s1, s2]
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, pr = w / H, h = w % H, P = blockDim.x / 32 / H;
    const float inv_cols = 1.0f / (float)COLS;
    float ag[PL], ab[PL];
#pragma unroll
    for (int j = 0; j < PL; ++j) ag[j] = ab[j] = 0.0f;
    int par = 0;
    for (long long r = (long long)blockIdx.x * P + pr; r < rows; r += (long long)gridDim.x * P, par ^= 1) {
        float xv[PL], gv[PL];
        const long long base = r * COLS + h * HALF;
#pragma unroll
        for (int i = 0; i < NVH; ++i) {
            const int c = (i * 32 + lane) * 4;
            float4 a = *reinterpret_cast<const float4*>(x + base + c), b = *reinterpret_cast<const float4*>(g + base + c);
            xv[4 * i] = a.x, xv[4 * i + 1] = a.y, xv[4 * i + 2] = a.z, xv[4 * i + 3] = a.w;
            gv[4 * i] = b.x, gv[4 * i + 1] = b.y, gv[4 * i + 2] = b.z, gv[4 * i + 3] = b.w;
        }
        const float mu = mean[r], rs = rstd[r];
        float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
        for (int i = 0; i < NVH; ++i) {
            float4 q = *reinterpret_cast<const float4*>(gamma + h * HALF + (i * 32 + lane) * 4);
            const float wv[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int j = 4 * i + k;
                const float xh = (xv[j] - mu) * rs, hh = gv[j] * wv[k];
                ag[j] += gv[j] * xh, ab[j] += gv[j];
                xv[j] = xh, gv[j] = hh, s1 += hh, s2 += hh * xh;
            }
        }
        s1 = camel::warp_sum(s1);
        s2 = camel::warp_sum(s2);
        if (lane == 0) xch[pr][par][h][0] = s1, xch[pr][par][h][1] = s2;
        asm volatile("bar.sync %0, %1;" ::"r"(1 + pr), "r"(64) : "memory");
        s1 = (xch[pr][par][0][0] + xch[pr][par][1][0]) * inv_cols;
        s2 = (xch[pr][par][0][1] + xch[pr][par][1][1]) * inv_cols;
#pragma unroll
        for (int i = 0; i < NVH; ++i) {
            const int c = (i * 32 + lane) * 4;
            float o[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) o[k] = rs * (gv[4 * i + k] - s1 - xv[4 * i + k] * s2);
            *reinterpret_cast<float4*>(dx + base + c) = make_float4(o[0], o[1], o[2], o[3]);
        }
    }
    float* mine = lab_red + pr * 2 * COLS + h * HALF;
#pragma unroll
    for (int i = 0; i < NVH; ++i) {
        const int c = (i * 32 + lane) * 4;
        *reinterpret_cast<float4*>(mine + c) = make_float4(ag[4 * i], ag[4 * i + 1], ag[4 * i + 2], ag[4 * i + 3]);
        *reinterpret_cast<float4*>(mine + COLS + c) = make_float4(ab[4 * i], ab[4 * i + 1], ab[4 * i + 2], ab[4 * i + 3]);
    }
    __syncthreads();
    for (int c = threadIdx.x; c < 2 * COLS; c += blockDim.x) {
        float t = 0.0f;
        for (int q = 0; q < P; ++q) t += lab_red[q * 2 * COLS + c];
        partial[((long long)(c / COLS) * gridDim.x + blockIdx.x) * COLS + c % COLS] = t;
    }
    if (FUSED) ln3_fused_colsum(partial, dgamma, dbeta, counters, COLS);
}

// ---------------------------------------------------------------------------------------------

// Median µs per launch of `launch(set)` streamed (lab_common.cuh), LAB_PER launches a batch (20).
static double streamed(const std::function<void(int)>& launch, int sets, int per = 0) {
    return lab_streamed(launch, sets, per ? per : lab_per(20));
}

static int occupancy(const void* k, int threads, size_t smem = 0) {
    int n = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, threads, smem));
    return n;
}

int main() {
    const long long ROWS = 16384, N = ROWS * COLS;
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (%d SMs)\n", prop.name, sms);

    // big copy (2^28 floats) for the "of copy" ratio
    const size_t BIG = 1ull << 28;
    float *bs = dalloc(BIG), *bd = dalloc(BIG);
    CK(cudaMemset(bs, 0, BIG * 4));
    const double tcopy = streamed([&](int) { CK(cudaMemcpyAsync(bd, bs, BIG * 4, cudaMemcpyDeviceToDevice)); }, 1, 10);
    const double copy_bw = 2.0 * BIG * 4 / tcopy / 1e3;
    printf("copy 2^28: %.1f us, %.0f GB/s\n", tcopy, copy_bw);
    CK(cudaFree(bs));
    CK(cudaFree(bd));

    // rotating sets: x, g, y/dx (3 × 50 MB) → 2 sets = 302 MB
    const int SETS = getenv("LAB_SETS") ? atoi(getenv("LAB_SETS")) : 2;
    std::vector<float*> X(SETS), G(SETS), Y(SETS), Y2(SETS);
    std::vector<float> h(N);
    srand(1);
    for (auto& e : h) e = (float)rand() / RAND_MAX * 4.0f - 2.0f;
    for (int s = 0; s < SETS; ++s) {
        X[s] = dalloc(N), G[s] = dalloc(N), Y[s] = dalloc(N);
        CK(cudaMemcpy(X[s], h.data(), N * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(G[s], h.data() + 7, (N - 7) * 4, cudaMemcpyHostToDevice));
        CK(cudaMemset(G[s] + N - 7, 0, 28));
    }
    float *gamma = dalloc(COLS), *beta = dalloc(COLS), *mean = dalloc(ROWS), *rstd = dalloc(ROWS);
    float *mean2 = dalloc(ROWS), *rstd2 = dalloc(ROWS), *ref = dalloc(N), *out = dalloc(N);
    std::vector<float> hg(COLS), hb(COLS);
    for (int c = 0; c < COLS; ++c) hg[c] = 1.0f + 0.001f * c, hb[c] = 0.01f * (c % 13);
    CK(cudaMemcpy(gamma, hg.data(), COLS * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(beta, hb.data(), COLS * 4, cudaMemcpyHostToDevice));

    auto same_copy = [&](double bytes) {
        float *s = dalloc((size_t)(bytes / 8)), *d = dalloc((size_t)(bytes / 8));
        std::vector<float*> ss{s};
        const double t = streamed([&](int) { CK(cudaMemcpyAsync(d, s, (size_t)(bytes / 2), cudaMemcpyDeviceToDevice)); }, 1);
        CK(cudaFree(s));
        CK(cudaFree(d));
        return t;
    };
    auto report = [&](const char* name, double us, double bytes, double same) {
        printf("%-44s %8.2f us  %6.0f GB/s  %5.1f %% of copy  %5.1f %% of same-size copy\n", name, us, bytes / us / 1e3,
               100.0 * bytes / us / 1e3 / copy_bw, 100.0 * same / us);
    };

    // ---------------- forward ----------------
    {
        const double bytes = 2.0 * N * 4 + 2.0 * ROWS * 4;
        const double same = same_copy(2.0 * N * 4);
        printf("\nforward 16384x768 (same-size copy %.2f us)\n", same);
        const dim3 blk(256);
        // reference: library step 3
        layernorm3_fwd_v4_n6_f32<<<ROWS / 8, blk>>>(X[0], gamma, beta, ref, mean, rstd, ROWS, COLS, 1e-5f);
        CK(cudaDeviceSynchronize());
        auto check = [&](const char* name) {
            CK(cudaDeviceSynchronize());
            double d = max_diff(ref, out, N), dm = max_diff(mean, mean2, ROWS), dr = max_diff(rstd, rstd2, ROWS);
            if (d > 1e-5 || dm > 1e-6 || dr > 1e-5) printf("  !! %s differs: y %.3g mean %.3g rstd %.3g\n", name, d, dm, dr);
        };
        auto run = [&](const char* name, const std::function<void(float*, float*, float*, float*)>& k) {
            CK(cudaMemset(out, 0xff, N * 4));
            k(X[0], out, mean2, rstd2);
            check(name);
            const double t = streamed([&](int s) { k(X[s], Y[s], mean2, rstd2); }, SETS);
            report(name, t, bytes, same);
        };
        run("F0 library step 3 (grid rows/8)", [&](float* x, float* y, float* m, float* r) {
            layernorm3_fwd_v4_n6_f32<<<ROWS / 8, blk>>>(x, gamma, beta, y, m, r, ROWS, COLS, 1e-5f);
        });
        run("F0s library step 4 (streaming hints)", [&](float* x, float* y, float* m, float* r) {
            layernorm4_fwd_v4_n6_f32<<<ROWS / 8, blk>>>(x, gamma, beta, y, m, r, ROWS, COLS, 1e-5f);
        });
        run("F1 lab R=1", [&](float* x, float* y, float* m, float* r) {
            lab_fwd_rows<1, 4><<<ROWS / 8, blk>>>(x, gamma, beta, y, m, r, ROWS);
        });
        run("F1s lab R=1, streaming hints", [&](float* x, float* y, float* m, float* r) {
            lab_fwd_rows<1, 4, true><<<ROWS / 8, blk>>>(x, gamma, beta, y, m, r, ROWS);
        });
        run("F2 lab R=2 (2 rows a warp in flight)", [&](float* x, float* y, float* m, float* r) {
            lab_fwd_rows<2, 3><<<ROWS / 16, blk>>>(x, gamma, beta, y, m, r, ROWS);
        });
        run("F4 lab R=4", [&](float* x, float* y, float* m, float* r) {
            lab_fwd_rows<4, 2><<<ROWS / 32, blk>>>(x, gamma, beta, y, m, r, ROWS);
        });
        {
            const int occ = occupancy((const void*)lab_fwd_prefetch<3>, 256);
            char name[80];
            snprintf(name, sizeof name, "FP persistent, next row prefetched (%d/SM)", occ);
            run(name, [&](float* x, float* y, float* m, float* r) {
                lab_fwd_prefetch<3><<<occ * sms, blk>>>(x, gamma, beta, y, m, r, ROWS);
            });
        }
        {
            const int o3 = occupancy((const void*)lab_fwd_prefetch<3, true>, 256);
            const int o4 = occupancy((const void*)lab_fwd_prefetch<4, true>, 256);
            char n3[80], n4[80];
            snprintf(n3, sizeof n3, "FPs persistent, prefetch, hints (%d/SM)", o3);
            snprintf(n4, sizeof n4, "FPs persistent, prefetch, hints (%d/SM)", o4);
            run(n3, [&](float* x, float* y, float* m, float* r) {
                lab_fwd_prefetch<3, true><<<o3 * sms, blk>>>(x, gamma, beta, y, m, r, ROWS);
            });
            run(n4, [&](float* x, float* y, float* m, float* r) {
                lab_fwd_prefetch<4, true><<<o4 * sms, blk>>>(x, gamma, beta, y, m, r, ROWS);
            });
            run("F1s128 R=1, hints, blocks of 128", [&](float* x, float* y, float* m, float* r) {
                lab_fwd_rows<1, 4, true><<<ROWS / 4, 128>>>(x, gamma, beta, y, m, r, ROWS);
            });
        }
        printf("  occupancy (blocks/SM): F0 %d, R=2 %d, R=4 %d\n", occupancy((const void*)layernorm3_fwd_v4_n6_f32, 256),
               occupancy((const void*)lab_fwd_rows<2, 3>, 256), occupancy((const void*)lab_fwd_rows<4, 2>, 256));
    }

    // ---------------- backward ----------------
    {
        // stats for the backward from the forward
        layernorm3_fwd_v4_n6_f32<<<ROWS / 8, 256>>>(X[0], gamma, beta, out, mean, rstd, ROWS, COLS, 1e-5f);
        layernorm3_fwd_v4_n6_f32<<<ROWS / 8, 256>>>(X[1], gamma, beta, out, mean2, rstd2, ROWS, COLS, 1e-5f);
        const double bytes = 3.0 * N * 4 + 2.0 * ROWS * 4 + 2.0 * COLS * 4;
        const double same = same_copy(3.0 * N * 4);
        printf("\nbackward 16384x768 (same-size copy %.2f us)\n", same);
        CK(cudaFuncSetAttribute(layernorm3_bwd_v4_n6_f32, cudaFuncAttributeMaxDynamicSharedMemorySize, LIB_SMEM));
        CK(cudaFuncSetAttribute(lab_bwd_reg, cudaFuncAttributeMaxDynamicSharedMemorySize, LIB_SMEM));
        const int occ_reg = occupancy((const void*)layernorm3_bwd_v4_n6_f32, 256, LIB_SMEM);
        const int grid_reg = occ_reg * sms;
        float* partial = dalloc(2ull * 4 * sms * COLS);
        float *dg = dalloc(COLS), *db = dalloc(COLS), *dgr = dalloc(COLS), *dbr = dalloc(COLS);
        int* counters;
        CK(cudaMalloc(&counters, 8));
        CK(cudaMemset(counters, 0, 8));
        auto colsum = [&](int nb) {
            layernorm3_param_grad_f32<<<(2 * COLS + 7) / 8, dim3(8, 64)>>>(partial, dg, db, nb, COLS);
        };
        // reference: library step 3 (main + column sum)
        layernorm3_bwd_v4_n6_f32<<<grid_reg, 256, LIB_SMEM>>>(X[0], gamma, G[0], mean, rstd, ref, partial, ROWS, COLS, dgr, dbr, nullptr);
        layernorm3_param_grad_f32<<<(2 * COLS + 7) / 8, dim3(8, 64)>>>(partial, dgr, dbr, grid_reg, COLS);
        CK(cudaDeviceSynchronize());
        auto check = [&](const char* name, bool params) {
            CK(cudaDeviceSynchronize());
            double d = max_diff(ref, out, N);
            double p = params ? std::max(max_diff(dgr, dg, COLS), max_diff(dbr, db, COLS)) : 0.0;
            if (d > 1e-5 || p > 1e-2) printf("  !! %s differs: dx %.3g dgamma/dbeta %.3g\n", name, d, p);
        };
        float* MS[2] = {mean, mean2};
        float* RS[2] = {rstd, rstd2};
        auto run = [&](const char* name, bool params, const std::function<void(int, float*)>& k) {
            CK(cudaMemset(out, 0xff, N * 4));
            CK(cudaMemset(dg, 0xff, COLS * 4));
            CK(cudaMemset(db, 0xff, COLS * 4));
            k(0, out);
            check(name, params);
            const double t = streamed([&](int s) { k(s, Y[s]); }, SETS);
            report(name, t, bytes, same);
        };
        run("B0 library step 3 + column-sum kernel (FUSED=off)", true, [&](int s, float* d) {
            layernorm3_bwd_v4_n6_f32<<<grid_reg, 256, LIB_SMEM>>>(X[s], gamma, G[s], MS[s % 2], RS[s % 2], d, partial, ROWS, COLS, dg, db, nullptr);
            colsum(grid_reg);
        });
        run("B5 library step 3, column sum fused (default)", true, [&](int s, float* d) {
            layernorm3_bwd_v4_n6_f32<<<grid_reg, 256, LIB_SMEM>>>(X[s], gamma, G[s], MS[s % 2], RS[s % 2], d, partial, ROWS, COLS, dg, db, counters);
        });
        run("B1 library step 3 main kernel only", false, [&](int s, float* d) {
            layernorm3_bwd_v4_n6_f32<<<grid_reg, 256, LIB_SMEM>>>(X[s], gamma, G[s], MS[s % 2], RS[s % 2], d, partial, ROWS, COLS, dg, db, nullptr);
        });
        run("B2 step 3 + fused column sum", true, [&](int s, float* d) {
            lab_bwd_reg<<<grid_reg, 256, LIB_SMEM>>>(X[s], gamma, G[s], MS[s % 2], RS[s % 2], d, partial, ROWS, COLS, dg, db, counters);
        });
#define LAB_BWD(NAME, PARAMS, ACC, PART, CS, FUSED, COLSUM)                                                    \
    {                                                                                                          \
        auto k = lab_bwd<2, ACC, PART, CS, FUSED>;                                                             \
        const size_t sm = PART == 2 ? 8 * 2 * COLS * 4 : 2 * COLS * 4;                                         \
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));                     \
        const int occ = occupancy((const void*)k, 256, sm);                                                    \
        char nm[96];                                                                                           \
        snprintf(nm, sizeof nm, "%s (%d/SM)", NAME, occ);                                                      \
        run(nm, PARAMS, [&](int s, float* d) {                                                                 \
            k<<<occ * sms, 256, sm>>>(X[s], gamma, G[s], MS[s % 2], RS[s % 2], d, partial, ROWS, COLS, dg, db, counters); \
            if (COLSUM) colsum(occ * sms);                                                                     \
        });                                                                                                    \
    }
        LAB_BWD("V0 dx only", false, false, 1, false, false, false)
        LAB_BWD("V0s dx only, streaming hints", false, false, 1, true, false, false)
        LAB_BWD("V1 const cols, turns, main only", false, true, 1, false, false, false)
        LAB_BWD("V1 const cols, turns + kernel", true, true, 1, false, false, true)
        LAB_BWD("V2 slices, main only", false, true, 2, false, false, false)
        LAB_BWD("V2 slices + kernel", true, true, 2, false, false, true)
        LAB_BWD("V2s slices, hints + kernel", true, true, 2, true, false, true)
        LAB_BWD("V2f slices + fused sum", true, true, 2, false, true, false)
        LAB_BWD("V2sf slices, hints + fused sum", true, true, 2, true, true, false)
        LAB_BWD("V2g slices + fused coalesced sum", true, true, 2, false, 2, false)
#define LAB_PAIR(NAME, MINB, FUSED)                                                                           \
    {                                                                                                          \
        auto k = lab_bwd_pair<MINB, FUSED>;                                                                    \
        const size_t sm = 4 * 2 * COLS * 4;                                                                    \
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));                     \
        const int occ = occupancy((const void*)k, 256, sm);                                                    \
        char nm[96];                                                                                           \
        snprintf(nm, sizeof nm, "%s (%d/SM)", NAME, occ);                                                      \
        run(nm, true, [&](int s, float* d) {                                                                   \
            k<<<occ * sms, 256, sm>>>(X[s], gamma, G[s], MS[s % 2], RS[s % 2], d, partial, ROWS, COLS, dg, db, counters); \
            if (!FUSED) colsum(occ * sms);                                                                     \
        });                                                                                                    \
    }
        {
            const size_t sm = 4 * 2 * 64 * 3 * 4 * 4;
            CK(cudaFuncSetAttribute(layernorm4_bwd_v4_n3_f32, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
            const int occ = occupancy((const void*)layernorm4_bwd_v4_n3_f32, 256, sm);
            for (int per = 2; per <= occ; ++per) {
                char nm[96];
                snprintf(nm, sizeof nm, "B4 library step 4, fused sum (%d/SM of %d)", per, occ);
                run(nm, true, [&](int s, float* d) {
                    layernorm4_bwd_v4_n3_f32<<<per * sms, 256, sm>>>(X[s], gamma, G[s], MS[s % 2], RS[s % 2], d, partial, ROWS, COLS, dg, db, counters);
                });
            }
        }
        LAB_PAIR("P3 pair of warps a row, + kernel", 3, 0)
        LAB_PAIR("P3f pair of warps a row, fused sum", 3, 1)
        LAB_PAIR("P4f pair of warps a row, fused sum", 4, 1)
        LAB_PAIR("P2f pair of warps a row, fused sum", 2, 1)
        printf("  occupancy (blocks/SM): step 3 %d\n", occ_reg);
    }
    return 0;
}
