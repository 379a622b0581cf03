// Cross-entropy lab: what does the forward kernel pay for the mean over rows when it fuses it
// (each block's sum, then the grid's last block adds them), and which handshake between the
// blocks costs least? Kernels, validation against the library's kernels/loss/ and the timing
// in one program, as llm.c keeps dev/cuda. Not part of the library.
//
// Versions (the library's forward row code, ce3_fwd_row, each with another epilogue):
//   step3        CeRowLoss: a loss a row, no mean (the op adds a sum and a scale kernel)
//   step4 ctr    block sum to a partial, one atom.acq_rel.gpu on a counter, the last block sums
//   step4        the library's CeMean: a marked word a block, the grid's last block takes them
//   R1 acqrel    the counter, one row a group
//   R1 fences    __threadfence, a relaxed atomicAdd, __threadfence in the last block
//   R1 nofence   partial store and atomicAdd without fences (wrong ordering: measures the fences)
//   R1 partial   block sum and partial store only (no mean: measures the counter's share)
//   R4 acqrel    the counter, four rows a group
//   step3 R2/R4  the per-row kernel with two / four rows a group
//   handshake    every block puts 16 losses of 1.0, 64 … 4096 blocks (the handshake alone)
//
// Timing: lab_common.cuh's streamed method, the logits rotated over 256 MiB. What it found and
// where it went: dev/labs/README.md.
//
// Build and run on the GPU host:  OUT=dir bash dev/labs/ce_lab.sh
#include <cmath>
#include <vector>

#include "../kernels/loss/01_block_per_row.cu"  // the library's kernels (steps 1–4)
#include "../kernels/loss/02_saved_stats.cu"
#include "../kernels/loss/03_registers.cu"
#include "../kernels/loss/04_fused_mean.cu"
#include "lab_common.cuh"

namespace {

// MODE 0: acq_rel handshake (step 4's first form, the library's until the marked words); 1: no
// fences; 2: partial only; 3: the fences (textbook). The workspace: the counter in word 0, the
// partials (a float a block) from word 1.
template <int MODE>
struct LabPut {
    static constexpr bool kMean = true;
    __device__ static void mean(float v, float* out, unsigned long long* ws, long long rows) {
        unsigned* counter = reinterpret_cast<unsigned*>(ws);
        float* partial = reinterpret_cast<float*>(ws + 1);
        __shared__ float scratch[32];
        __shared__ bool last;
        const unsigned nb = gridDim.x * gridDim.y;
        const unsigned b = blockIdx.x + blockIdx.y * gridDim.x;
        v = camel::block_sum(v, scratch);
        if (threadIdx.x == 0) {
            partial[b] = v;
            if (MODE == 3) __threadfence();
            if (MODE == 0) last = camel::atom_add_acq_rel_gpu(counter, 1u) == nb - 1;
            if (MODE == 1) last = atomicAdd(counter, 1u) == nb - 1;
            if (MODE == 3) last = atomicAdd(counter, 1u) == nb - 1;
            if (MODE == 2) last = false;
        }
        __syncthreads();
        if (!last) return;
        if (MODE == 3) __threadfence();
        float acc = 0.0f;
        for (unsigned i = threadIdx.x; i < nb; i += blockDim.x) acc += __ldcg(partial + i);
        acc = camel::block_sum(acc, scratch);
        if (threadIdx.x == 0) {
            *out = acc * (1.0f / (float)rows);
            *counter = 0;
        }
    }
};
}  // namespace

// 65 columns: softmax step 3's shape (G = 16 lanes a row, scalar, NV = 8), 16 rows a block.
template <class Put, int R = 1>
__global__ void __launch_bounds__(256) lab_short(const float* x, const long long* t, float* out, float* stats,
                                                 unsigned long long* ws, long long rows, long long cols,
                                                 long long* err) {
    ce3_fwd_row<16, 1, 8, Put, R>(x, t, out, stats, ws, rows, cols, err);
}
template <class Put>
__global__ void __launch_bounds__(512) lab_long(const float* x, const long long* t, float* out, float* stats,
                                                unsigned long long* ws, long long rows, long long cols,
                                                long long* err) {
    ce_fwd_long<Put>(x, t, out, stats, ws, rows, cols, err);
}

// The handshake alone: every block of 256 threads puts 16 losses of 1.0 (a row's lane 0 of
// each 16-lane group, as at 65 columns) and nothing else; `Put` as above, `empty` does nothing.
template <class Put>
__global__ void __launch_bounds__(256) lab_handshake(float* out, unsigned long long* ws, long long rows) {
    Put::mean(threadIdx.x % 16 == 0 ? 1.0f : 0.0f, out, ws, rows);
}
__global__ void lab_empty() {}

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s (%d SMs)\n", prop.name, prop.multiProcessorCount);
    for (auto shape : {std::pair<long long, long long>{16384, 65}, {4096, 50257}}) {
        const long long rows = shape.first, cols = shape.second;
        const bool shrt = cols <= 1024;
        const size_t n = rows * cols;
        const int sets = std::max<int>(1, (int)((256ull << 20) / (n * 4)));
        std::vector<float> hx(n);
        std::vector<long long> ht(rows);
        unsigned s = 12345;
        for (auto& v : hx) v = ((s = s * 1664525u + 1013904223u) >> 8) * (12.0f / 16777216.0f) - 6.0f;
        for (auto& v : ht) v = ((s = s * 1664525u + 1013904223u) >> 8) % cols;
        float* x;
        long long *t, *err;
        float *loss, *stats, *mean;
        unsigned long long *ws_c, *ws_w;  // LabPut's counter and partials; the library's words
        CK(cudaMalloc(&x, n * 4 * sets));
        for (int i = 0; i < sets; ++i) CK(cudaMemcpy(x + i * n, hx.data(), n * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&t, rows * 8));
        CK(cudaMemcpy(t, ht.data(), rows * 8, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&err, 32));
        CK(cudaMemset(err, 0, 32));
        CK(cudaMalloc(&loss, rows * 4));
        CK(cudaMalloc(&stats, rows * 8));
        CK(cudaMalloc(&mean, 4));
        CK(cudaMalloc(&ws_c, rows * 8 + 8));
        CK(cudaMalloc(&ws_w, rows * 8));
        CK(cudaMemset(ws_c, 0, rows * 8 + 8));
        CK(cudaMemset(ws_w, 0, rows * 8));
        const unsigned blocks = shrt ? (unsigned)((rows + 15) / 16) : (unsigned)rows;
        const unsigned threads = shrt ? 256 : 512;
        // reference: step 3's per-row losses, summed on the host in double
        if (shrt) {
            lab_short<CeRowLoss><<<blocks, threads>>>(x, t, loss, stats, nullptr, rows, cols, err);
        } else {
            lab_long<CeRowLoss><<<blocks, threads>>>(x, t, loss, stats, nullptr, rows, cols, err);
        }
        std::vector<float> hl(rows);
        CK(cudaMemcpy(hl.data(), loss, rows * 4, cudaMemcpyDeviceToHost));
        double want = 0;
        for (float v : hl) want += v;
        want /= rows;
        // R: rows a 16-lane group takes (the short rows' grid shrinks R times)
        // words: the library's CeMean (its marked words), else LabPut's counter and partials
        auto run = [&](const char* name, auto kshort, auto klong, float* o, bool check, int R = 1, bool words = false) {
            unsigned long long* ws = words ? ws_w : ws_c;
            auto launch = [&](int i) {
                if (shrt) {
                    kshort<<<(blocks + R - 1) / R, threads>>>(x + (i % sets) * n, t, o, stats, ws, rows, cols, err);
                } else {
                    klong<<<blocks, threads>>>(x + (i % sets) * n, t, o, stats, ws, rows, cols, err);
                }
            };
            CK(cudaMemset(mean, 0xff, 4));  // NaN: a mean never written shows
            launch(0);
            float got;
            CK(cudaMemcpy(&got, mean, 4, cudaMemcpyDeviceToHost));
            const double us = lab_streamed(launch, sets, lab_per(20));
            const double gbs = (double)n * 4 / (us * 1e-6) / 1e9;
            printf("%lldx%lld %-9s %8.2f us %6.0f GB/s", rows, cols, name, us, gbs);
            if (check) printf("   mean %.7f want %.7f (rel %.1e)", got, want, std::fabs(got - want) / std::fabs(want));
            printf("\n");
        };
        // step 4 as the library runs it: 2 rows a group at 65 columns (ce4_rows); "step4 ctr" its
        // first form (the acq_rel counter), "step4" the library's now (the marked words)
        constexpr int R4 = ce4_rows(16, 1, 8);
        run("step3", lab_short<CeRowLoss>, lab_long<CeRowLoss>, loss, false);
        run("step4 ctr", lab_short<LabPut<0>, R4>, lab_long<LabPut<0>>, mean, true, R4);
        run("step4", lab_short<CeMean, R4>, lab_long<CeMean>, mean, true, R4, true);
        // the handshake's parts, one row a group
        run("R1 acqrel", lab_short<LabPut<0>>, lab_long<LabPut<0>>, mean, true);
        run("R1 fences", lab_short<LabPut<3>>, lab_long<LabPut<3>>, mean, true);
        run("R1 nofence", lab_short<LabPut<1>>, lab_long<LabPut<1>>, mean, true);
        run("R1 partial", lab_short<LabPut<2>>, lab_long<LabPut<2>>, mean, false);
        if (shrt) {  // rows a group: fewer blocks at the counter, longer row work
            run("step3 R2", lab_short<CeRowLoss, 2>, lab_long<CeRowLoss>, loss, false, 2);
            run("step3 R4", lab_short<CeRowLoss, 4>, lab_long<CeRowLoss>, loss, false, 4);
            run("R4 acqrel", lab_short<LabPut<0>, 4>, lab_long<LabPut<0>>, mean, true, 4);
        }
        run("step4 ctr", lab_short<LabPut<0>, R4>, lab_long<LabPut<0>>, mean, true, R4);
        run("step4", lab_short<CeMean, R4>, lab_long<CeMean>, mean, true, R4, true);
        run("step3", lab_short<CeRowLoss>, lab_long<CeRowLoss>, loss, false);
        unsigned c;
        CK(cudaMemcpy(&c, ws_c, 4, cudaMemcpyDeviceToHost));
        std::vector<unsigned long long> hw(rows);
        CK(cudaMemcpy(hw.data(), ws_w, rows * 8, cudaMemcpyDeviceToHost));
        unsigned long long left = 0;
        for (unsigned long long w : hw) left |= w;
        printf("counter after the runs: %u (must be 0); the words %s (must be zero)\n", c, left ? "NOT ZERO" : "zero");
        CK(cudaFree(x));
        for (void* p : {(void*)t, (void*)err, (void*)loss, (void*)stats, (void*)ws_c, (void*)ws_w, (void*)mean})
            CK(cudaFree(p));
    }
    // the handshake's cost against the number of blocks (how many rows a block takes decides it)
    float* mean;
    unsigned long long *ws_c, *ws_w;
    CK(cudaMalloc(&mean, 4));
    CK(cudaMalloc(&ws_c, 65536 * 8));
    CK(cudaMalloc(&ws_w, 65536 * 8));
    CK(cudaMemset(ws_c, 0, 65536 * 8));
    CK(cudaMemset(ws_w, 0, 65536 * 8));
    for (unsigned blocks : {64u, 256u, 1024u, 4096u}) {
        const long long rows = 16ll * blocks;
        const double e = lab_streamed([&](int) { lab_empty<<<blocks, 256>>>(); }, 1, lab_per(20));
        const double p = lab_streamed(
            [&](int) { lab_handshake<LabPut<2>><<<blocks, 256>>>(mean, ws_c, rows); }, 1, lab_per(20));
        const double a = lab_streamed(
            [&](int) { lab_handshake<LabPut<0>><<<blocks, 256>>>(mean, ws_c, rows); }, 1, lab_per(20));
        const double f = lab_streamed(
            [&](int) { lab_handshake<LabPut<3>><<<blocks, 256>>>(mean, ws_c, rows); }, 1, lab_per(20));
        const double w = lab_streamed(
            [&](int) { lab_handshake<CeMean><<<blocks, 256>>>(mean, ws_w, rows); }, 1, lab_per(20));
        float got;
        CK(cudaMemcpy(&got, mean, 4, cudaMemcpyDeviceToHost));
        printf("handshake, %4u blocks: empty kernel %.2f us, block sums %.2f, step 4 (acq_rel) %.2f, fences %.2f, "
               "marked words %.2f  (mean %.3f, want 1)\n",
               blocks, e, p, a, f, w, got);
    }
    return 0;
}
