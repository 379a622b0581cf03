// Cross-entropy step 3: short rows in registers (softmax step 3's layout), long rows with aligned
// float4 loads after a scalar prologue, several loads in flight per thread (loss/loss.cuh has the
// row code). The loss is per row; a mean over rows is a separate reduction.

#include "loss/loss.cuh"

extern "C" __global__ void __launch_bounds__(512)
    cross_entropy3_fwd_long_f32(const float* __restrict__ x, const long long* __restrict__ t,
                                float* __restrict__ loss, float* __restrict__ stats, long long rows, long long cols,
                                long long* err) {
    CAMEL_PDL_WAIT();
    ce_fwd_long<CeRowLoss>(x, t, loss, stats, nullptr, rows, cols, err);
}

extern "C" __global__ void __launch_bounds__(512)
    cross_entropy3_bwd_long_f32(const float* __restrict__ x, const long long* __restrict__ t,
                                const float* __restrict__ stats, const float* __restrict__ g, float* __restrict__ dx,
                                long long rows, long long cols, long long* err, int vec) {
    CAMEL_PDL_WAIT();
    ce_bwd_long<false>(x, t, stats, g, dx, rows, cols, err, vec);
}

// Kernel names: ce3_fwd_g{G}_v{VEC}_n{NV}_f32 and ce3_bwd_g{G}_v{VEC}_n{NV}_f32 (the launchers
// build the same names); the shapes are softmax step 3's (CAMEL_ROW3_SHAPES, common/rows.cuh).
#define CE3(G, VEC, NV)                                                                                    \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G)                                        \
        ce3_fwd_g##G##_v##VEC##_n##NV##_f32(const float* __restrict__ x, const long long* __restrict__ t,    \
                                             float* __restrict__ loss, float* __restrict__ stats,          \
                                             long long rows, long long cols, long long* err) {             \
        ce3_prefetch<G, 1>(x, nullptr, nullptr, rows, cols);                                               \
        CAMEL_PDL_WAIT();                                                                                  \
        if (G <= 16) CAMEL_PDL_TRIGGER();                                                                  \
        ce3_fwd_row<G, VEC, NV, CeRowLoss>(x, t, loss, stats, nullptr, rows, cols, err);                   \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(G <= 32 ? 256 : G) ce3_bwd_g##G##_v##VEC##_n##NV##_f32(   \
        const float* __restrict__ x, const long long* __restrict__ t, const float* __restrict__ stats,     \
        const float* __restrict__ g, float* __restrict__ dx, long long rows, long long cols, long long* err) { \
        ce3_prefetch<G, 1>(x, t, stats, rows, cols);                                                           \
        CAMEL_PDL_WAIT();                                                                                      \
        if (G <= 16) CAMEL_PDL_TRIGGER();                                                                      \
        ce3_bwd_row<G, VEC, NV, false>(x, t, stats, g, dx, rows, cols, err);                               \
    }

CAMEL_ROW3_SHAPES(CE3)
