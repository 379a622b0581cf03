// LayerNorm step 4. Forward: step 3 with cache-streaming hints on the row's load and store
// (ld.global.cs / st.global.cs: evict first; x is read once and y written once, γ and β stay
// cached). Same arithmetic and shapes as step 3 (the same results bit for bit).
// Backward: step 3 with a PAIR of warps per row. Step 3's lane holds x, g, dγ and dβ of all its
// columns, and the sums' registers are what hold it back. Here the row's 64 threads hold half as
// much each, and their γ in registers, read once. The row's two sums, Σ ĝ and Σ ĝ·x̂, are each
// warp's shuffle sum plus its partner's, met in shared memory behind one __syncthreads per round
// of rows (`ln3_bwd_row`). Everything else is step 3's: the block's partial row from one slice per
// pair, the column sum fused when the grid is all resident (else step 3's
// layernorm3_param_grad_{dtype}). With programmatic dependent launch the kernel asks L2 for its first
// 4 rows of x and g before the PDL wait and triggers its successor right after it
// (common/pdl.cuh), and the launcher gives it the fewest blocks that keep the rounds
// (bwd_blocks).

#include "layernorm/layernorm.cuh"

// Kernel names: layernorm4_fwd_v{VEC}_n{NV}_{dtype}, dtype the element type of x, γ, β and y
// (f32, f16 or bf16; the launchers build the same names).
#define LAYERNORM4_T(VEC, NV, T, SUF)                                                                      \
    extern "C" __global__ void __launch_bounds__(256) layernorm4_fwd_v##VEC##_n##NV##_##SUF(               \
        const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,                  \
        T* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd, long long rows,              \
        long long cols, float eps) {                                                                        \
        CAMEL_PDL_WAIT();                                                                                   \
        ln3_fwd_row<VEC, NV, true, T>(x, gamma, beta, y, mean, rstd, rows, cols, eps);                     \
    }
#define LAYERNORM4(VEC, NV)                                                                                \
    LAYERNORM4_T(VEC, NV, float, f32)                                                                      \
    LAYERNORM4_T(VEC, NV, __half, f16)                                                                     \
    LAYERNORM4_T(VEC, NV, __nv_bfloat16, bf16)

LAYERNORM4(4, 1)
LAYERNORM4(4, 2)
LAYERNORM4(4, 3)
LAYERNORM4(4, 4)
LAYERNORM4(4, 6)
LAYERNORM4(4, 8)
LAYERNORM4(1, 1)
LAYERNORM4(1, 2)
LAYERNORM4(1, 4)
LAYERNORM4(1, 8)
LAYERNORM4(1, 16)
LAYERNORM4(1, 24)
LAYERNORM4(1, 32)

// Kernel names: layernorm4_bwd_v{VEC}_n{NV}_{dtype} (NV loads of VEC elements per thread, a row of
// up to 64·VEC·NV columns; dtype that of x, γ, g, dx, dγ and dβ; the launcher builds the same
// name). Blocks of 256 threads (4 pairs), dynamic shared memory 4 pairs × 2 × 64·VEC·NV floats
// (24 KiB at 768 columns).
#define LAYERNORM4_BWD_T(VEC, NV, T, SUF)                                                                  \
    extern "C" __global__ void __launch_bounds__(256, 2)                                                   \
        layernorm4_bwd_v##VEC##_n##NV##_##SUF(const T* __restrict__ x, const T* __restrict__ gamma,         \
                                              const T* __restrict__ g, const float* __restrict__ mean,     \
                                              const float* __restrict__ rstd, T* __restrict__ dx,          \
                                              float* __restrict__ partial, long long rows, long long cols, \
                                              T* __restrict__ dgamma, T* __restrict__ dbeta,               \
                                              int* counters) {                                             \
        if (threadIdx.x == 0) { /* the block's first round: 4 rows of x and of g (kernels/common/pdl.cuh) */     \
            camel::l2_prefetch_rows(x, (long long)blockIdx.x * 4, 4, rows, cols);                          \
            camel::l2_prefetch_rows(g, (long long)blockIdx.x * 4, 4, rows, cols);                          \
        }                                                                                                  \
        CAMEL_PDL_WAIT();                                                                                  \
        CAMEL_PDL_TRIGGER();                                                                               \
        ln3_bwd<VEC, NV, 64, T>(x, gamma, g, mean, rstd, dx, partial, rows, cols, dgamma, dbeta, counters); \
    }
#define LAYERNORM4_BWD(VEC, NV)                                                                            \
    LAYERNORM4_BWD_T(VEC, NV, float, f32)                                                                  \
    LAYERNORM4_BWD_T(VEC, NV, __half, f16)                                                                 \
    LAYERNORM4_BWD_T(VEC, NV, __nv_bfloat16, bf16)
LAYERNORM4_BWD(4, 1)
LAYERNORM4_BWD(4, 2)
LAYERNORM4_BWD(4, 3)
LAYERNORM4_BWD(4, 4)
LAYERNORM4_BWD(1, 1)
LAYERNORM4_BWD(1, 2)
LAYERNORM4_BWD(1, 4)
LAYERNORM4_BWD(1, 8)
LAYERNORM4_BWD(1, 12)
LAYERNORM4_BWD(1, 16)
