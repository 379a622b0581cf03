// Split-K reduction for SGEMM steps 7–11: C = epilogue(Σ_s P[s]) where P holds `splits` partial
// products laid out [split][batch·M·N] (see common_gemm.cuh). One thread per element of C,
// float4 when N allows; the epilogue (bias, activation, saved pre-activation) is the same as the
// GEMM kernels'.
#include "common_gemm.cuh"

extern "C" __global__ void sgemm_splitk_reduce(const float* __restrict__ P, float* __restrict__ C,
                                               int splits, long long total, int N,
                                               const float* __restrict__ bias, int act,
                                               float* __restrict__ Z) {
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int sp = 0; sp < splits; ++sp) s += P[sp * total + idx];
        C[idx] = gemm_epilogue(s, (int)(idx % N), idx, bias, act, Z);
    }
}
