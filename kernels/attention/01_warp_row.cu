// Step 1: naive fused attention, f32. A warp per query row streams over every key the row sees,
// one key at a time: the score q·k (each lane holds D/32 features, a warp sum adds them), then
// the online softmax — a running max m and sum l, the output accumulator rescaled by
// exp(m_old − m_new) whenever the max grows — so the Tq × Tk score matrix is never written.
// Each warp reads K and V from global memory itself (L2 serves the re-reads of the other rows):
// the step teaches the online softmax, not data reuse. The backward is step 2's.

#include "attention/attention.cuh"

template <int D>
__device__ __forceinline__ void attn01(const float* __restrict__ q, const float* __restrict__ k,
                                       const float* __restrict__ v, float* __restrict__ o,
                                       float* __restrict__ lse, const AttnArgs a) {
    constexpr int E = D / 32;  // features per lane
    const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= a.b * a.h * a.tq) return;  // the whole warp
    const long long i = row % a.tq, bh = row / a.tq, hh = bh % a.h, bb = bh / a.h;
    const float* qr = q + bb * a.q_sb + hh * a.q_sh + i * a.q_st;
    const float* kb = k + bb * a.k_sb + hh * a.k_sh;
    const float* vb = v + bb * a.v_sb + hh * a.v_sh;
    float qv[E], acc[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        qv[e] = qr[lane + 32 * e] * a.scale;
        acc[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const long long n = camel::attn_visible(a, i);
    const unsigned drow = camel::attn_drop_row(a, bh, i);
    for (long long j = 0; j < n; ++j) {
        const float* kr = kb + j * a.k_st;
        const float* vr = vb + j * a.v_st;
        float s = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) s = fmaf(qv[e], kr[lane + 32 * e], s);
        s = camel::warp_sum(s);
        // a NaN score leaves the max alone and makes p, so l and the output, NaN
        const float mn = fmaxf(m, s);
        const float corr = expf(m - mn);  // 0 at the first key (m = −inf)
        const float p = expf(s - mn);
        l = fmaf(l, corr, p);
        const float pz = p * camel::attn_dropout(a, drow, j);  // l sums the weights before dropout
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] = fmaf(acc[e], corr, pz * vr[lane + 32 * e]);
        m = mn;
    }
    float* orow = o + camel::bthd(a, bb, hh, i, a.tq, D);
    const float inv = 1.0f / l;
#pragma unroll
    for (int e = 0; e < E; ++e) orow[lane + 32 * e] = acc[e] * inv;
    if (lane == 0) lse[row] = m + logf(l);
}

// attn01_fwd_d{D}_f32: blocks of 128 threads, four query rows a block.
#define ATTN01(D)                                                                                      \
    extern "C" __global__ void __launch_bounds__(128)                                                  \
        attn01_fwd_d##D##_f32(const float* __restrict__ q, const float* __restrict__ k,                \
                              const float* __restrict__ v, float* __restrict__ o, float* __restrict__ lse, \
                              const AttnArgs a) {                                                      \
        CAMEL_PDL_WAIT();                                                                              \
        attn01<D>(q, k, v, o, lse, a);                                                                 \
    }
ATTN01(32)
ATTN01(64)
ATTN01(128)
