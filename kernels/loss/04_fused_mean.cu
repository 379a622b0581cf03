// Cross-entropy step 4: the mean over rows fused in, so the loss is one kernel forward and one
// backward. Through step 3 the op writes a loss per row and then averages them with a sum and a
// scale; backward it scales the upstream gradient and broadcasts it to the rows first. Step 4 runs
// step 3's row code with CeMean in place of the per-row store: each block sums its rows' losses
// and the grid's last block adds the blocks' sums in block order (ce_mean_epilogue), so the mean
// has the same bits whichever block ends last. Where a row is short, a group takes 2 rows
// (ce4_rows), so half as many block sums. Backward (MEAN), every row's upstream gradient is the
// mean's g[0] / rows.

#include "loss/loss.cuh"

extern "C" __global__ void __launch_bounds__(512)
    cross_entropy4_fwd_long_f32(const float* __restrict__ x, const long long* __restrict__ t,
                                float* __restrict__ mean, float* __restrict__ stats, unsigned long long* words,
                                long long rows, long long cols, long long* err) {
    CAMEL_PDL_WAIT();
    ce_fwd_long<CeMean>(x, t, mean, stats, words, rows, cols, err);
}

extern "C" __global__ void __launch_bounds__(512)
    cross_entropy4_bwd_long_f32(const float* __restrict__ x, const long long* __restrict__ t,
                                const float* __restrict__ stats, const float* __restrict__ g, float* __restrict__ dx,
                                long long rows, long long cols, long long* err, int vec) {
    CAMEL_PDL_WAIT();
    ce_bwd_long<true>(x, t, stats, g, dx, rows, cols, err, vec);
}

// Kernel names: ce4_fwd_g{G}_v{VEC}_n{NV}_{dtype} and ce4_bwd_g{G}_v{VEC}_n{NV}_{dtype}, dtype the
// logits' (f32, f16 or bf16; the mean, the statistics and g are f32 whatever it is); the
// launchers build the same names. The shapes are softmax step 3's (CAMEL_ROW3_SHAPES,
// common/rows.cuh). Rows past them (the long-row kernels above) are f32 only.
#define CE4_T(G, VEC, NV, T, SUF)                                                                          \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G) ce4_fwd_g##G##_v##VEC##_n##NV##_##SUF( \
        const T* __restrict__ x, const long long* __restrict__ t, float* __restrict__ mean,                \
        float* __restrict__ stats, unsigned long long* words, long long rows, long long cols,              \
        long long* err) {                                                                                  \
        ce3_prefetch<G, ce4_rows(G, VEC, NV)>(x, nullptr, nullptr, rows, cols);                            \
        CAMEL_PDL_WAIT();                                                                                  \
        if (G <= 16) CAMEL_PDL_TRIGGER();                                                                  \
        ce3_fwd_row<G, VEC, NV, CeMean, ce4_rows(G, VEC, NV), T>(x, t, mean, stats, words, rows, cols, err); \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G) ce4_bwd_g##G##_v##VEC##_n##NV##_##SUF( \
        const T* __restrict__ x, const long long* __restrict__ t, const float* __restrict__ stats,         \
        const float* __restrict__ g, T* __restrict__ dx, long long rows, long long cols, long long* err) {  \
        ce3_prefetch<G, 1>(x, t, stats, rows, cols);                                                           \
        CAMEL_PDL_WAIT();                                                                                      \
        if (G <= 16) CAMEL_PDL_TRIGGER();                                                                      \
        ce3_bwd_row<G, VEC, NV, true, T>(x, t, stats, g, dx, rows, cols, err);                             \
    }

#define CE4(G, VEC, NV)                                                                                    \
    CE4_T(G, VEC, NV, float, f32)                                                                          \
    CE4_T(G, VEC, NV, __half, f16)                                                                         \
    CE4_T(G, VEC, NV, __nv_bfloat16, bf16)

CAMEL_ROW3_SHAPES(CE4)
