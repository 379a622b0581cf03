// Cross-entropy lab: what the mean over rows costs when step 4 fuses it into the forward kernel
// (kernels/loss.cu, CeMean: each block's sum, then the last block to arrive adds them), against
// step 3's kernel that stores a loss per row, and against epilogues that skip parts of the
// grid-wide handshake (some of them give no usable mean: they only measure). Not part of the
// library; a winner moves into kernels/loss.cu.
//
// Build and run on the GPU host:  OUT=dir bash bench/ce_lab.sh
//
// Timing: bench_memory's "streamed" method (lab_common.cuh), the logits rotated over 256 MiB.
//
// Candidates (the `put` of the library's forward, run by step 3's row code):
//   step3   CeRowLoss: out[r] per row (no mean; the op adds a sum and a scale kernel)
//   step4   CeMean: block sum, partial store, one atom.acq_rel.gpu on the counter; the last
//           block reads the partials from L2, sums, stores the mean (the library's, since the
//           second run below)
//   fences  the textbook form: __threadfence, a relaxed atomicAdd; the last block __threadfence
//           (the library's step 4 in the first run below, "step4" there)
//   acqrel  the lab's copy of the acq_rel handshake (the candidate that became step 4's)
//   nofence partial store and atomicAdd without fences (wrong ordering: measures the fences)
//   partial block sum and partial store only (no mean: measures the counter and the last block)
//
// What it showed (H100, 2026-11-22, µs; every mean within 2e-8 of step 3's losses summed in
// double on the host, the counter 0 after all runs). Step 4 with fences ("step4" in the first
// two runs; the second after the forward began loading t[r] with the row):
//   16384×65:   step3 5.25 / 5.10, step4 7.97–8.02 / 7.88, acqrel 7.81 / 7.47,
//               nofence 7.36 / 6.87, partial 5.72 / 5.51
//   4096×50257: step3 277.6 / 277.9, step4 281.8, acqrel 281.3–281.4, nofence 282.1–282.3,
//               partial 279.0–279.4
// At 65 columns (1024 blocks in one wave) the fused mean costs about 2.8 µs: 0.4–0.5 for the
// block sums and their stores, 1.4–1.6 for the counter and the last block's pass over the
// partials, 0.6–1.0 for the fences, of which the acq_rel atomic in their place saves 0.2–0.4.
// It became step 4's handshake. Even with fences step 4 is the faster loss: the op at step 3
// adds three launches to its 5.1 µs kernel (12.5 µs in all, bench_memory "cross_entropy+mean").
#include <cmath>
#include <vector>

#include "../kernels/loss.cu"  // the library's kernels (steps 1–4)
#include "lab_common.cuh"

namespace {

// MODE 0: acq_rel handshake; 1: no fences; 2: partial only; 3: the fences (textbook).
template <int MODE>
struct LabPut {
    static constexpr bool kEveryThread = true;
    __device__ static void put(float l, bool own, long long, float* out, float* partial, unsigned* counter,
                               long long rows) {
        __shared__ float scratch[32];
        __shared__ bool last;
        const unsigned nb = gridDim.x * gridDim.y;
        const unsigned b = blockIdx.x + blockIdx.y * gridDim.x;
        float v = camel::block_sum(own ? l : 0.0f, scratch);
        if (threadIdx.x == 0) {
            partial[b] = v;
            if (MODE == 3) __threadfence();
            if (MODE == 0) last = atomic_add_acq_rel(counter, 1u) == nb - 1;
            if (MODE == 3) last = atomicAdd(counter, 1u) == nb - 1;
            if (MODE == 1) last = atomicAdd(counter, 1u) == nb - 1;
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
template <class Put>
__global__ void __launch_bounds__(256) lab_short(const float* x, const long long* t, float* out, float* stats,
                                                 float* partial, unsigned* counter, long long rows, long long cols,
                                                 long long* err) {
    ce3_fwd_row<16, 1, 8, Put>(x, t, out, stats, partial, counter, rows, cols, err);
}
template <class Put>
__global__ void __launch_bounds__(512) lab_long(const float* x, const long long* t, float* out, float* stats,
                                                float* partial, unsigned* counter, long long rows, long long cols,
                                                long long* err) {
    ce_fwd_long<Put>(x, t, out, stats, partial, counter, rows, cols, err);
}

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
        float *loss, *stats, *partial, *mean;
        unsigned* counter;
        CK(cudaMalloc(&x, n * 4 * sets));
        for (int i = 0; i < sets; ++i) CK(cudaMemcpy(x + i * n, hx.data(), n * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&t, rows * 8));
        CK(cudaMemcpy(t, ht.data(), rows * 8, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&err, 32));
        CK(cudaMemset(err, 0, 32));
        CK(cudaMalloc(&loss, rows * 4));
        CK(cudaMalloc(&stats, rows * 8));
        CK(cudaMalloc(&partial, rows * 4));
        CK(cudaMalloc(&mean, 4));
        CK(cudaMalloc(&counter, 4));
        CK(cudaMemset(counter, 0, 4));
        const unsigned blocks = shrt ? (unsigned)((rows + 15) / 16) : (unsigned)rows;
        const unsigned threads = shrt ? 256 : 512;
        // reference: step 3's per-row losses, summed on the host in double
        if (shrt) {
            lab_short<CeRowLoss><<<blocks, threads>>>(x, t, loss, stats, nullptr, nullptr, rows, cols, err);
        } else {
            lab_long<CeRowLoss><<<blocks, threads>>>(x, t, loss, stats, nullptr, nullptr, rows, cols, err);
        }
        std::vector<float> hl(rows);
        CK(cudaMemcpy(hl.data(), loss, rows * 4, cudaMemcpyDeviceToHost));
        double want = 0;
        for (float v : hl) want += v;
        want /= rows;
        auto run = [&](const char* name, auto kshort, auto klong, float* o, bool check) {
            auto launch = [&](int i) {
                if (shrt) {
                    kshort<<<blocks, threads>>>(x + (i % sets) * n, t, o, stats, partial, counter, rows, cols, err);
                } else {
                    klong<<<blocks, threads>>>(x + (i % sets) * n, t, o, stats, partial, counter, rows, cols, err);
                }
            };
            CK(cudaMemset(mean, 0xff, 4));  // NaN: a mean never written shows
            launch(0);
            float got;
            CK(cudaMemcpy(&got, mean, 4, cudaMemcpyDeviceToHost));
            const double us = lab_streamed(launch, sets, lab_per(20));
            const double gbs = (double)n * 4 / (us * 1e-6) / 1e9;
            printf("%lldx%lld %-8s %8.2f us %6.0f GB/s", rows, cols, name, us, gbs);
            if (check) printf("   mean %.7f want %.7f (rel %.1e)", got, want, std::fabs(got - want) / std::fabs(want));
            printf("\n");
        };
        run("step3", lab_short<CeRowLoss>, lab_long<CeRowLoss>, loss, false);
        run("step4", lab_short<CeMean>, lab_long<CeMean>, mean, true);
        run("fences", lab_short<LabPut<3>>, lab_long<LabPut<3>>, mean, true);
        run("acqrel", lab_short<LabPut<0>>, lab_long<LabPut<0>>, mean, true);
        run("nofence", lab_short<LabPut<1>>, lab_long<LabPut<1>>, mean, true);
        run("partial", lab_short<LabPut<2>>, lab_long<LabPut<2>>, mean, false);
        run("step4", lab_short<CeMean>, lab_long<CeMean>, mean, true);
        run("step3", lab_short<CeRowLoss>, lab_long<CeRowLoss>, loss, false);
        unsigned c;
        CK(cudaMemcpy(&c, counter, 4, cudaMemcpyDeviceToHost));
        printf("counter after the runs: %u (must be 0)\n", c);
        CK(cudaFree(x));
        for (void* p : {(void*)t, (void*)err, (void*)loss, (void*)stats, (void*)partial, (void*)mean, (void*)counter})
            CK(cudaFree(p));
    }
    return 0;
}
