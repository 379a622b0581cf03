// Cross-entropy step 2. Forward: one online pass over the row (running max and sum of
// exponentials, merged with shuffles) gives the loss and the row's statistics (m, s), saved as
// stats[2r], stats[2r+1]. Backward: dx = g[r]·(exp(x − m)/s − [c == t]) reads the logits once,
// where step 1 re-derives m and s. A warp per row for short rows, the block for long ones; float4
// when cols % 4 == 0.

#include "common/common.cuh"
#include "common/index_error.cuh"
#include "common/rows.cuh"

template <bool WARP, bool VEC>
__device__ __forceinline__ void ce_fwd_row(const float* __restrict__ x, const long long* __restrict__ t,
                                           float* __restrict__ loss, float* __restrict__ stats, long long rows,
                                           long long cols, long long* err) {
    __shared__ float scratch[64];
    long long r = camel::group_row<WARP>();
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float m, s;
    camel::row_online<WARP, VEC>(xr, cols, m, s);
    camel::group_online<WARP>(m, s, scratch);
    if (camel::group_tid<WARP>() == 0) {
        long long tr = t[r];
        stats[2 * r] = m;
        stats[2 * r + 1] = s;
        if (tr < 0 || tr >= cols) {
            record_index_error(err, CAMEL_OP_CROSS_ENTROPY, tr, cols);
            loss[r] = NAN;
        } else {
            loss[r] = (m - xr[tr]) + logf(s);
        }
    }
}

template <bool WARP, bool VEC>
__device__ __forceinline__ void ce_bwd_row(const float* __restrict__ x, const long long* __restrict__ t,
                                           const float* __restrict__ stats, const float* __restrict__ g,
                                           float* __restrict__ dx, long long rows, long long cols, long long* err) {
    long long r = camel::group_row<WARP>();
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* dr = dx + r * cols;
    const int tid = camel::group_tid<WARP>(), gs = camel::group_size<WARP>();
    long long tr = t[r];
    bool bad = tr < 0 || tr >= cols;
    float m = stats[2 * r], inv = 1.0f / stats[2 * r + 1];
    float gr = bad ? NAN : g[r];
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* d4 = reinterpret_cast<float4*>(dr);
        for (long long c = tid; c < cols / 4; c += gs) {
            float4 v = x4[c];
            long long c0 = 4 * c;
            float4 o = make_float4(gr * (expf(v.x - m) * inv - (c0 == tr ? 1.0f : 0.0f)),
                                   gr * (expf(v.y - m) * inv - (c0 + 1 == tr ? 1.0f : 0.0f)),
                                   gr * (expf(v.z - m) * inv - (c0 + 2 == tr ? 1.0f : 0.0f)),
                                   gr * (expf(v.w - m) * inv - (c0 + 3 == tr ? 1.0f : 0.0f)));
            d4[c] = o;
        }
    } else {
        for (long long c = tid; c < cols; c += gs) dr[c] = gr * (expf(xr[c] - m) * inv - (c == tr ? 1.0f : 0.0f));
    }
    if (bad && tid == 0) record_index_error(err, CAMEL_OP_CROSS_ENTROPY, tr, cols);
}

#define CE_VARIANT(suffix, WARP, VEC)                                                                          \
    extern "C" __global__ void cross_entropy_fwd_##suffix(const float* __restrict__ x,                         \
                                                          const long long* __restrict__ t, float* __restrict__ loss, \
                                                          float* __restrict__ stats, long long rows,          \
                                                          long long cols, long long* err) {                   \
        CAMEL_PDL_WAIT();                                                                                     \
        ce_fwd_row<WARP, VEC>(x, t, loss, stats, rows, cols, err);                                            \
    }                                                                                                          \
    extern "C" __global__ void cross_entropy_bwd_##suffix(                                                     \
        const float* __restrict__ x, const long long* __restrict__ t, const float* __restrict__ stats,        \
        const float* __restrict__ g, float* __restrict__ dx, long long rows, long long cols, long long* err) { \
        CAMEL_PDL_WAIT();                                                                                      \
        ce_bwd_row<WARP, VEC>(x, t, stats, g, dx, rows, cols, err);                                           \
    }

CE_VARIANT(warp_f32, true, false)
CE_VARIANT(warp_vec_f32, true, true)
CE_VARIANT(block_f32, false, false)
CE_VARIANT(block_vec_f32, false, true)
