// Reduction lab: why does the library's step 3 of the last-dim sum/max over 65536×4096
// (kernels/reduce/) trail PyTorch's reduction, and does a kernel with more bytes in flight a
// thread or fewer block barriers a row close the gap? Candidates beside step 3 in one program,
// as llm.c keeps dev/cuda. Not part of the library.
//
// Versions:
//   step 3       the library's: a block of 256 threads a row, 4 float4 a thread, shared memory
//   warp a row   a warp a row with 8, 16, 32 float4 in flight
//   persistent   persistent warps
//   block N      blocks of 64 / 128 / 256 threads a row
//   LAB_FILL=const, LAB_BLOCK=mem   constant input; a blocker that reads instead of spinning
//
// Timing: lab_common.cuh's streamed method (the input is 1 GiB, past the L2, so no rotation).
// What it found and where it went: dev/labs/README.md.
//
// Build and run on the GPU host:  OUT=dir bash dev/labs/reduce_lab.sh
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#include "../kernels/reduce/01_block_per_output.cu"  // the library's kernels (steps 1–3)
#include "../kernels/reduce/02_warp_shuffle.cu"
#include "../kernels/reduce/03_loads_in_flight.cu"
#include "lab_common.cuh"

// W<U>: a warp per row; each lane issues U float4 loads before combining any (U·512 bytes in flight
// a warp), U accumulators; blocks of 256 (8 rows). Persistent when `stride_rows` > 0: the grid is
// the resident blocks and warps walk the rows.
template <int U, bool PERSIST>
__global__ void __launch_bounds__(256) lab_warp_rows(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                     long long cols, int op) {
    const int lane = threadIdx.x % 32;
    const long long first = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    const long long step = PERSIST ? (long long)gridDim.x * 8 : rows;
    for (long long r = first; r < rows; r += step) {
        const float4* x4 = reinterpret_cast<const float4*>(x + r * cols);
        const long long n = cols / 4;
        float acc[U];
#pragma unroll
        for (int u = 0; u < U; ++u) acc[u] = camel::identity(op);
        long long c = lane;
        for (; c + (long long)(U - 1) * 32 < n; c += U * 32) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = x4[c + u * 32];
#pragma unroll
            for (int u = 0; u < U; ++u)
                acc[u] = camel::combine(op, acc[u],
                                        camel::combine(op, camel::combine(op, v[u].x, v[u].y), camel::combine(op, v[u].z, v[u].w)));
        }
        for (; c < n; c += 32) {
            float4 v = x4[c];
            acc[0] = camel::combine(op, acc[0], camel::combine(op, camel::combine(op, v.x, v.y), camel::combine(op, v.z, v.w)));
        }
#pragma unroll
        for (int u = 1; u < U; ++u) acc[0] = camel::combine(op, acc[0], acc[u]);
        const float a = camel::warp_reduce(op, acc[0]);
        if (lane == 0) y[r] = a;
    }
}

// B<T,U>: a block of T threads per row, U float4 loads a thread before combining; warp shuffles,
// one shared-memory hop.
template <int T, int U>
__global__ void __launch_bounds__(T) lab_block_rows(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                    long long cols, int op) {
    __shared__ float scratch[32];
    const long long r = blockIdx.x;
    const float4* x4 = reinterpret_cast<const float4*>(x + r * cols);
    const long long n = cols / 4;
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = camel::identity(op);
    long long c = threadIdx.x;
    for (; c + (long long)(U - 1) * T < n; c += U * T) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = x4[c + u * T];
#pragma unroll
        for (int u = 0; u < U; ++u)
            acc[u] = camel::combine(op, acc[u],
                                    camel::combine(op, camel::combine(op, v[u].x, v[u].y), camel::combine(op, v[u].z, v[u].w)));
    }
    for (; c < n; c += T) {
        float4 v = x4[c];
        acc[0] = camel::combine(op, acc[0], camel::combine(op, camel::combine(op, v.x, v.y), camel::combine(op, v.z, v.w)));
    }
#pragma unroll
    for (int u = 1; u < U; ++u) acc[0] = camel::combine(op, acc[0], acc[u]);
    const float a = camel::group_reduce<false>(op, acc[0], scratch);
    if (threadIdx.x == 0) y[r] = a;
}

// LAB_BLOCK=mem: the blocker is reads (full sums over `g_blk`, as bench_memory's), not a spin.
static const float* g_blk = nullptr;
static float* g_blk_out = nullptr;
static long long g_blk_n = 0;

static double streamed(const std::function<void()>& launch) {
    if (!g_blk) return lab_streamed([&](int) { launch(); }, 1, 10);
    return lab_streamed([&](int) { launch(); }, 1, 10, [&] {
        for (int u = 0; u < 4; ++u)
            reduce3_rows_block_vec_f32<<<g_blk_n / 4096, 256>>>(g_blk, g_blk_out, g_blk_n / 4096, 4096, 0);
        launch();  // one unmeasured launch after the reads, as bench_memory's warm-up
    });
}

int main() {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (%d SMs)\n", prop.name, sms);
    const long long ROWS = 65536, COLS = 4096, N = ROWS * COLS;
    float *x, *d, *ref, *out;
    CK(cudaMalloc(&x, N * 4));
    CK(cudaMalloc(&d, N * 4));
    CK(cudaMalloc(&ref, ROWS * 4));
    CK(cudaMalloc(&out, ROWS * 4));
    const bool constant = getenv("LAB_FILL") && std::string(getenv("LAB_FILL")) == "const";
    {
        std::vector<float> h(N);
        srand(3);
        for (auto& e : h) e = constant ? 0.5f : (float)rand() / RAND_MAX - 0.5f;
        CK(cudaMemcpy(x, h.data(), N * 4, cudaMemcpyHostToDevice));
    }
    if (getenv("LAB_BLOCK") && std::string(getenv("LAB_BLOCK")) == "mem") {
        g_blk = d, g_blk_n = N;
        CK(cudaMalloc(&g_blk_out, ROWS * 4));
    }
    printf("input %s, blocker %s\n", constant ? "0.5 everywhere" : "random", g_blk ? "reads (mem)" : "spin");
    const double tcopy = streamed([&] { CK(cudaMemcpyAsync(d, x, N * 4, cudaMemcpyDeviceToDevice)); });
    const double copy_bw = 2.0 * N * 4 / tcopy / 1e3;
    printf("copy 2^28: %.1f us, %.0f GB/s\n", tcopy, copy_bw);
    const double bytes = N * 4.0 + ROWS * 4.0;
    for (int op = 0; op < 2; ++op) {
        printf("\n%s over the last dim, %lldx%lld\n", op ? "max" : "sum", ROWS, COLS);
        reduce3_rows_block_vec_f32<<<ROWS, 256>>>(x, ref, ROWS, COLS, op);
        CK(cudaDeviceSynchronize());
        std::vector<float> hr(ROWS), ho(ROWS);
        CK(cudaMemcpy(hr.data(), ref, ROWS * 4, cudaMemcpyDeviceToHost));
        auto run = [&](const char* name, const std::function<void()>& k) {
            CK(cudaMemset(out, 0xff, ROWS * 4));
            k();
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(ho.data(), out, ROWS * 4, cudaMemcpyDeviceToHost));
            double m = 0;
            for (long long i = 0; i < ROWS; ++i) {
                const double e = std::fabs((double)ho[i] - hr[i]);
                if (!(e <= m)) m = std::isnan(e) ? INFINITY : e;
            }
            const double t = streamed(k);
            printf("%-40s %8.1f us  %6.0f GB/s  %5.1f %% of copy  (max diff %.2g)\n", name, t, bytes / t / 1e3,
                   100.0 * bytes / t / 1e3 / copy_bw, m);
        };
        run("L3 library step 3 (block of 256 a row)", [&] { reduce3_rows_block_vec_f32<<<ROWS, 256>>>(x, out, ROWS, COLS, op); });
        run("L3w library step 3, warp a row", [&] { reduce3_rows_warp_vec_f32<<<ROWS / 8, 256>>>(x, out, ROWS, COLS, op); });
        run("W8 warp a row, 8 float4 in flight", [&] { lab_warp_rows<8, false><<<ROWS / 8, 256>>>(x, out, ROWS, COLS, op); });
        run("W16 warp a row, 16 in flight", [&] { lab_warp_rows<16, false><<<ROWS / 8, 256>>>(x, out, ROWS, COLS, op); });
        run("W32 warp a row, 32 in flight", [&] { lab_warp_rows<32, false><<<ROWS / 8, 256>>>(x, out, ROWS, COLS, op); });
        int occ16 = 0, occ8 = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ16, lab_warp_rows<16, true>, 256, 0));
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ8, lab_warp_rows<8, true>, 256, 0));
        run("W8p persistent warps, 8 in flight", [&] { lab_warp_rows<8, true><<<occ8 * sms, 256>>>(x, out, ROWS, COLS, op); });
        run("W16p persistent warps, 16 in flight", [&] { lab_warp_rows<16, true><<<occ16 * sms, 256>>>(x, out, ROWS, COLS, op); });
        run("B128x8 block of 128, 8 in flight", [&] { lab_block_rows<128, 8><<<ROWS, 128>>>(x, out, ROWS, COLS, op); });
        run("B256x4 block of 256, 4 in flight", [&] { lab_block_rows<256, 4><<<ROWS, 256>>>(x, out, ROWS, COLS, op); });
        run("B64x16 block of 64, 16 in flight", [&] { lab_block_rows<64, 16><<<ROWS, 64>>>(x, out, ROWS, COLS, op); });
        printf("  occupancy (blocks/SM): W8p %d, W16p %d\n", occ8, occ16);
    }
    return 0;
}
