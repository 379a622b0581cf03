// Split-K reductions. For SGEMM steps 7–11 and 13: C = epilogue(Σ_s P[s]) where P holds `splits`
// partial products laid out [split][batch·M·N] (see common_gemm.cuh). The epilogue (bias,
// activation, saved pre-activation) is the same as the GEMM kernels'.
//
// Each thread owns 4 consecutive elements (a float4 when N % 4 == 0 and the pointers are 16-byte
// aligned) and loads 4 splits' partials before adding them, so 16 floats are in flight per thread
// instead of 1. The sums still run in split order (s = 0 + P[0] + P[1] + ...), whatever the
// vector width, so the result does not depend on the layout.
// What it measures: docs/kernels/matmul.md.
#include "common_gemm.cuh"
#include "hmma.cuh"

// The tensor-core GEMM's reduction (steps 14–16, 16-bit output): see HGEMM_SPLITK_REDUCE.
HGEMM_SPLITK_REDUCE(hgemm_splitk_reduce_f16, __half)
HGEMM_SPLITK_REDUCE(hgemm_splitk_reduce_bf16, __nv_bfloat16)

extern "C" __global__ void sgemm_splitk_reduce(const float* __restrict__ P, float* __restrict__ C,
                                               int splits, long long total, int N,
                                               const float* __restrict__ bias, int act,
                                               float* __restrict__ Z) {
    CAMEL_PDL_WAIT();
    const bool vec = (N % 4 == 0) && ((reinterpret_cast<size_t>(P) & 15) == 0) &&
                     ((reinterpret_cast<size_t>(C) & 15) == 0) &&
                     (!Z || (reinterpret_cast<size_t>(Z) & 15) == 0);
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; 4 * q < total;
         q += (long long)gridDim.x * blockDim.x) {
        const long long idx = 4 * q;
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (vec) {  // total = batch·M·N is a multiple of 4: the float4 is inside
            int sp = 0;
            for (; sp + 4 <= splits; sp += 4) {
                float4 p[4];
#pragma unroll
                for (int u = 0; u < 4; ++u)
                    p[u] = *reinterpret_cast<const float4*>(&P[(sp + u) * total + idx]);
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    s[0] += p[u].x;
                    s[1] += p[u].y;
                    s[2] += p[u].z;
                    s[3] += p[u].w;
                }
            }
            for (; sp < splits; ++sp) {
                const float4 p = *reinterpret_cast<const float4*>(&P[sp * total + idx]);
                s[0] += p.x;
                s[1] += p.y;
                s[2] += p.z;
                s[3] += p.w;
            }
            float4 v;
            v.x = gemm_epilogue(s[0], (int)((idx + 0) % N), idx + 0, bias, act, Z);
            v.y = gemm_epilogue(s[1], (int)((idx + 1) % N), idx + 1, bias, act, Z);
            v.z = gemm_epilogue(s[2], (int)((idx + 2) % N), idx + 2, bias, act, Z);
            v.w = gemm_epilogue(s[3], (int)((idx + 3) % N), idx + 3, bias, act, Z);
            *reinterpret_cast<float4*>(&C[idx]) = v;
        } else {
            const int n = (int)min(4LL, total - idx);
            for (int sp = 0; sp < splits; ++sp)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (e < n) s[e] += P[sp * total + idx + e];
            for (int e = 0; e < n; ++e)
                C[idx + e] = gemm_epilogue(s[e], (int)((idx + e) % N), idx + e, bias, act, Z);
        }
    }
}
