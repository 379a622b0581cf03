// Mean lab: how should cross-entropy step 4's forward hand the blocks' sums of the losses to the
// one block that writes the mean? The library's row code and entry (kernels/loss/) with each
// handshake as a `Put`, at 16384, 65536 and 4096 rows of 65 and at 4096×50257. Not part of the
// library.
//
// Versions:
//   rows           step 3's loss a row, no mean (the floor the mean is added to)
//   partial        each block's sum stored, nothing after it (the block sums' cost)
//   float atom     each block's sum atomicAdd-ed into one float (order not fixed: measures only)
//   counter        step 4's first form: partial[b], one atom.acq_rel.gpu on a counter, the last
//                  block adds the partials in block order
//   words          the library's ce_mean_epilogue: each block stores its sum and a mark as one
//                  64-bit word; the grid's last block takes the words one by one as each is marked
//   word a warp    a word a warp (8 a block): no barrier for a block's sum
//   K at once      a thread polls K of its words together (K = 2, 4, 8)
//   1 then 4, <= 2 else 8, naps   other polling orders; __nanosleep(64) between polls
//   R1             one row a group (twice the blocks)
//
// Timing: lab_common.cuh's streamed method with PDL on a non-blocking stream, the logits
// rotated over 16 sets at 65 columns. What it found and where it went: dev/labs/README.md; raw
// output docs/data/mean_lab_h100.txt.
//
// Build and run on the GPU host:  OUT=dir bash dev/labs/mean_lab.sh
#include <cmath>
#include <string>
#include <vector>

#include "../kernels/loss/01_block_per_row.cu"  // the library's kernels
#include "../kernels/loss/02_saved_stats.cu"
#include "../kernels/loss/03_registers.cu"
#include "../kernels/loss/04_fused_mean.cu"
#include "lab_common.cuh"

namespace {

using camel::ld_relaxed_gpu;
using camel::st_relaxed_gpu;
constexpr unsigned long long FULL = CE_MARKED;

// The library's ce_take with NAP ns of __nanosleep between polls.
template <int NAP>
__device__ __forceinline__ float take_napping(unsigned long long* p) {
    unsigned long long w;
    while (!((w = ld_relaxed_gpu(p)) & FULL)) __nanosleep(NAP);
    st_relaxed_gpu(p, 0);
    return __uint_as_float((unsigned)w);
}

// Every word [0, n) a thread takes (i = threadIdx.x, + blockDim.x, …), up to K at once: all K
// loads in flight, and again for those not yet marked; their sums added in i's order (as
// ce_take one by one does: the same bits) and the words left zero.
template <int K>
__device__ __forceinline__ float take_all(unsigned long long* words, unsigned n, unsigned from = 0, float acc = 0.0f) {
    for (unsigned base = from; base < n; base += K * blockDim.x) {
        unsigned long long w[K];
#pragma unroll
        for (int k = 0; k < K; ++k) w[k] = 0;
        bool done;
        do {
            done = true;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const unsigned i = base + k * blockDim.x + threadIdx.x;
                if (i < n && !(w[k] & FULL)) w[k] = ld_relaxed_gpu(words + i);
            }
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const unsigned i = base + k * blockDim.x + threadIdx.x;
                done = done && (i >= n || (w[k] & FULL));
            }
        } while (!done);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const unsigned i = base + k * blockDim.x + threadIdx.x;
            if (i < n) {
                acc += __uint_as_float((unsigned)w[k]);
                st_relaxed_gpu(words + i, 0);
            }
        }
    }
    return acc;
}

struct Rows {  // step 3: a loss a row
    static constexpr bool kMean = false;
    __device__ static void mean(float, float*, unsigned long long*, long long) {}
};

// 0 partial, 1 float atom, 3 warp slots, 4 slots polled all at once, 5 warp slots polled 16 at
// once, 6 slots with a 64 ns nap between polls, 7 the first word alone then 4 at once, 8 two at
// once, 9 the counter (step 4's first form), 10 one by one up to 2 words a thread, else 8 at
// once, 11 8 at once. Modes 0 and 9: the counter in word 0 of `ws`, a
// float a block from word 1; the others: a 64-bit word a block (or a warp), zero.
template <int MODE>
struct Lab {
    static constexpr bool kMean = true;
    __device__ static void mean(float v, float* out, unsigned long long* ws, long long rows) {
        __shared__ float scratch[32];
        __shared__ bool last;
        const unsigned nb = gridDim.x;
        const unsigned b = blockIdx.x;
        unsigned* counter = reinterpret_cast<unsigned*>(ws);
        float* partial = reinterpret_cast<float*>(ws + 1);
        if (MODE == 3 || MODE == 5) {
            const unsigned warps = blockDim.x / 32, w = threadIdx.x / 32;
            v = camel::warp_sum(v);
            if (threadIdx.x % 32 == 0) st_relaxed_gpu(ws + b * warps + w, FULL | __float_as_uint(v));
            if (b != nb - 1) return;
            float acc = 0.0f;
            if (MODE == 5) {
                acc = take_all<16>(ws, nb * warps);
            } else {
                for (unsigned i = threadIdx.x; i < nb * warps; i += blockDim.x) acc += ce_take(ws + i);
            }
            acc = camel::block_sum(acc, scratch);
            if (threadIdx.x == 0) *out = acc * (1.0f / (float)rows);
            return;
        }
        v = camel::block_sum(v, scratch);
        if (MODE == 0) {
            if (threadIdx.x == 0) partial[b] = v;
            return;
        }
        if (MODE == 1) {
            if (threadIdx.x == 0) atomicAdd(out, v * (1.0f / (float)rows));
            return;
        }
        if (MODE == 9) {
            if (threadIdx.x == 0) {
                partial[b] = v;
                last = camel::atom_add_acq_rel_gpu(counter, 1u) == nb - 1;
            }
            __syncthreads();
            if (!last) return;
            float acc = 0.0f;
            for (unsigned i = threadIdx.x; i < nb; i += blockDim.x) acc += __ldcg(partial + i);
            acc = camel::block_sum(acc, scratch);
            if (threadIdx.x == 0) {
                *out = acc * (1.0f / (float)rows);
                *counter = 0;
            }
            return;
        }
        if (threadIdx.x == 0) st_relaxed_gpu(ws + b, FULL | __float_as_uint(v));
        if (b != nb - 1) return;
        float acc = 0.0f;
        if (MODE == 10) {  // one by one up to 2 words a thread, else 8 at once
            if (nb <= 2 * blockDim.x) {
                for (unsigned i = threadIdx.x; i < nb; i += blockDim.x) acc += ce_take(ws + i);
            } else {
                acc = take_all<8>(ws, nb);
            }
        } else if (MODE == 11) {
            acc = take_all<8>(ws, nb);
        } else if (MODE == 4) {
            acc = take_all<4>(ws, nb);
        } else if (MODE == 7) {  // the first word alone, then the rest 4 at once
            if (threadIdx.x < nb) acc = ce_take(ws + threadIdx.x);
            acc = take_all<4>(ws, nb, blockDim.x, acc);
        } else if (MODE == 8) {
            acc = take_all<2>(ws, nb);
        } else {
            for (unsigned i = threadIdx.x; i < nb; i += blockDim.x) acc += take_napping<64>(ws + i);
        }
        acc = camel::block_sum(acc, scratch);
        if (threadIdx.x == 0) *out = acc * (1.0f / (float)rows);
    }
};

constexpr int R = ce4_rows(16, 1, 5);
template <class Put, int RR = R>
__global__ void __launch_bounds__(256) lab_fwd(const float* __restrict__ x, const long long* __restrict__ t,
                                               float* __restrict__ out, float* __restrict__ stats,
                                               unsigned long long* ws, long long rows, long long cols,
                                               long long* err) {
    ce3_prefetch<16, RR>(x, nullptr, nullptr, rows, cols);
    CAMEL_PDL_WAIT();
    CAMEL_PDL_TRIGGER();
    ce3_fwd_row<16, 1, 5, Put, RR>(x, t, out, stats, ws, rows, cols, err);
}

// Rows longer than 16384: the library's long-row layout (a block of 512 a row, plain PDL wait).
template <class Put>
__global__ void __launch_bounds__(512) lab_long(const float* __restrict__ x, const long long* __restrict__ t,
                                                float* __restrict__ out, float* __restrict__ stats,
                                                unsigned long long* ws, long long rows, long long cols,
                                                long long* err) {
    CAMEL_PDL_WAIT();
    ce_fwd_long<Put>(x, t, out, stats, ws, rows, cols, err);
}

using Fwd = void (*)(const float*, const long long*, float*, float*, unsigned long long*, long long, long long,
                     long long*);
cudaStream_t S;

}  // namespace

// Usage: mean_lab [rows] (65 columns; 16384 unless given) | mean_lab long (4096×50257)
int main(int argc, char** argv) {
    lab_open(&S);
    auto streamed = [](const std::function<void(int)>& launch, int sets, int per = 200) {
        return lab_streamed(launch, sets, per, [] { blocker<<<1, 1, 0, S>>>(2000000); }, S);
    };
    const bool lng = argc > 1 && std::string(argv[1]) == "long";
    const long long rows = lng ? 4096 : argc > 1 ? atoll(argv[1]) : 16384, cols = lng ? 50257 : 65, n = rows * cols;
    const int sets = lng ? 1 : 16;  // 823 MB: more than L2 without rotating
    float *a = dalloc(1ull << 29), *b = dalloc(1ull << 29);
    const double copy_bw =
        lab_copy_bw(a, b, S, [&](const std::function<void(int)>& l, int s) { return streamed(l, s, 20); });
    unsigned seed = 7;
    lab_fill(a, n * sets, -6.0f, 6.0f, seed);
    std::vector<long long> ht(rows);
    for (auto& v : ht) v = ((seed = seed * 1664525u + 1013904223u) >> 8) % cols;
    long long *t = dalloc<long long>(rows), *err = dalloc<long long>(4);
    CK(cudaMemcpy(t, ht.data(), rows * 8, cudaMemcpyHostToDevice));
    CK(cudaMemset(err, 0, 32));
    float *stats = dalloc(2 * rows * sets), *loss = dalloc(rows * sets), *mean = dalloc(1);
    const size_t nw = lng ? rows + 1 : 8 * (size_t)rows / 16 + 1;  // words: a row, or up to 8 a block of 16 rows
    unsigned long long* ws_c = dalloc<unsigned long long>(nw);  // the counter's and "partial"'s
    unsigned long long* ws_w = dalloc<unsigned long long>(nw);  // the marked words, zero
    CK(cudaMemset(ws_c, 0, nw * 8));
    CK(cudaMemset(ws_w, 0, nw * 8));
    const unsigned blocks = lng ? rows : (unsigned)((rows + 16 * R - 1) / (16 * R));
    const unsigned blocks1 = lng ? rows : (unsigned)((rows + 15) / 16);
    auto launch = [&](Fwd k, int i, float* out, unsigned grid, bool words) {
        lab_launch_block(S, true, 0, k, grid, lng ? 512u : 256u, (const float*)a + (size_t)i * n, (const long long*)t,
                         out, stats + 2 * rows * i, words ? ws_w : ws_c, rows, cols, err);
    };
    // Reference: step 3's losses of set 0, added in double on the host; and the library's mean.
    const Fwd lib = lng ? cross_entropy4_fwd_long_f32 : ce4_fwd_g16_v1_n5_f32;
    launch(lng ? lab_long<Rows> : lab_fwd<Rows, 1>, 0, loss, blocks1, false);
    launch(lib, 0, mean, blocks, true);
    CK(cudaStreamSynchronize(S));
    std::vector<float> hl(rows);
    CK(cudaMemcpy(hl.data(), loss, rows * 4, cudaMemcpyDeviceToHost));
    double want = 0;
    for (float v : hl) want += v;
    want /= rows;
    float lib_mean;
    CK(cudaMemcpy(&lib_mean, mean, 4, cudaMemcpyDeviceToHost));
    printf("%lldx%lld forward, %u blocks (short rows: 2 rows a 16-lane group; %u with one), %d sets; the "
           "library's mean %.9g, host (double) %.9g\n\n",
           rows, cols, blocks, blocks1, sets, lib_mean, want);
    struct Cand {
        const char* name;
        Fwd k;
        bool r1;     // one row a group
        bool words;  // the marked words (else the counter's workspace)
        bool mean;   // writes a mean to check
        bool same;   // must equal the library's bits (the same blocks, the same order)
    };
    const Cand cands[] = {
        {"rows (step 3, R2)", lab_fwd<Rows>, false, false, false, false},
        {"rows (step 3, R1)", lab_fwd<Rows, 1>, true, false, false, false},
        {"partial", lab_fwd<Lab<0>>, false, false, false, false},
        {"float atom", lab_fwd<Lab<1>>, false, false, false, false},
        {"counter (first)", lab_fwd<Lab<9>>, false, false, true, true},
        {"words (library)", lib, false, true, true, true},
        {"word a warp", lab_fwd<Lab<3>>, false, true, true, false},
        {"word a warp, 16 at once", lab_fwd<Lab<5>>, false, true, true, false},
        {"words, 4 at once", lab_fwd<Lab<4>>, false, true, true, true},
        {"words, 2 at once", lab_fwd<Lab<8>>, false, true, true, true},
        {"words, 1 then 4", lab_fwd<Lab<7>>, false, true, true, true},
        {"words, 64 ns naps", lab_fwd<Lab<6>>, false, true, true, true},
        {"words R1", lab_fwd<CeMean, 1>, true, true, true, false},
        {"words R1, 4 at once", lab_fwd<Lab<4>, 1>, true, true, true, false},
        {"words R1, 1 then 4", lab_fwd<Lab<7>, 1>, true, true, true, false},
        {"words, <= 2 else 8", lab_fwd<Lab<10>>, false, true, true, true},
        {"words R1, <= 2 else 8", lab_fwd<Lab<10>, 1>, true, true, true, false},
        {"words, 8 at once", lab_fwd<Lab<11>>, false, true, true, true},
    };
    const Cand longs[] = {
        {"rows (step 3)", lab_long<Rows>, false, false, false, false},
        {"counter (first)", lab_long<Lab<9>>, false, false, true, true},
        {"words (library)", lib, false, true, true, true},
        {"words, 2 at once", lab_long<Lab<8>>, false, true, true, true},
        {"words, 8 at once", lab_long<Lab<11>>, false, true, true, true},
        {"words, <= 2 else 8", lab_long<Lab<10>>, false, true, true, true},
    };
    for (int rep = 0; rep < 2; ++rep) {
        for (const Cand& c : lng ? std::vector<Cand>(std::begin(longs), std::end(longs))
                                 : std::vector<Cand>(std::begin(cands), std::end(cands))) {
            const unsigned grid = c.r1 ? blocks1 : blocks;
            CK(cudaMemsetAsync(mean, 0xff, 4, S));  // NaN: a mean never written shows
            launch(c.k, 0, c.mean ? mean : loss, grid, c.words);
            CK(cudaStreamSynchronize(S));
            float got;
            CK(cudaMemcpy(&got, mean, 4, cudaMemcpyDeviceToHost));
            const double us = streamed(
                [&](int i) { launch(c.k, i, c.mean ? mean : loss + (size_t)rows * i, grid, c.words); }, sets);
            printf("%-24s %6.2f us %6.1f %% of copy", c.name, us, 100.0 * n * 4 / us / 1e3 / copy_bw);
            if (c.mean)
                printf("   mean %.9g, rel. to host %.1e, %s", got, std::fabs(got - want) / want,
                       got == lib_mean ? "the library's bits" : (c.same ? "NOT THE LIBRARY'S BITS" : "other bits"));
            printf("\n");
        }
        printf("\n");
    }
    std::vector<unsigned long long> hw(nw);
    CK(cudaMemcpy(hw.data(), ws_w, nw * 8, cudaMemcpyDeviceToHost));
    unsigned long long left = 0;
    for (unsigned long long w : hw) left |= w;
    unsigned c;
    long long he;
    CK(cudaMemcpy(&c, ws_c, 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&he, err, 8, cudaMemcpyDeviceToHost));
    printf("after the runs: counter %u, words %s, index errors %lld (must be 0, zero, 0)\n", c,
           left ? "NOT ZERO" : "zero", he);
    return 0;
}
