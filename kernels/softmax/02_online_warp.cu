// Softmax step 2: one pass to read the row, one to write it. A warp owns a row when it is short
// (cols ≤ 1024: 8 rows per block of 256, no __syncthreads), the whole block when it is long. The
// max and the sum of exponentials come from one *online* pass (a running (m, s) that rescales s
// when m grows, merged across the group with shuffles), so the row is read from DRAM once; the
// write pass re-reads it from L1/L2. float4 loads and stores when cols % 4 == 0.
// Backward: dx = y ⊙ (g − Σ g⊙y) (softmax) or g − exp(y) Σ g (log-softmax), one fused kernel.

#include "common/rows.cuh"

template <bool WARP, bool VEC>
__device__ __forceinline__ void softmax_fwd_row(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                long long cols, int log_out) {
    __shared__ float scratch[64];
    long long r = camel::group_row<WARP>();
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m, s;
    camel::row_online<WARP, VEC>(xr, cols, m, s);
    camel::group_online<WARP>(m, s, scratch);
    const int tid = camel::group_tid<WARP>(), gs = camel::group_size<WARP>();
    float lse = logf(s), inv = 1.0f / s;
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long c = tid; c < cols / 4; c += gs) {
            float4 v = x4[c], o;
            if (log_out) {
                o = make_float4(v.x - m - lse, v.y - m - lse, v.z - m - lse, v.w - m - lse);
            } else {
                o = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
            }
            y4[c] = o;
        }
    } else {
        for (long long c = tid; c < cols; c += gs) {
            float v = xr[c];
            yr[c] = log_out ? v - m - lse : expf(v - m) * inv;
        }
    }
}

template <bool WARP, bool VEC>
__device__ __forceinline__ void softmax_bwd_row(const float* __restrict__ y, const float* __restrict__ g,
                                                float* __restrict__ dx, long long rows, long long cols, int log_out) {
    __shared__ float scratch[32];
    long long r = camel::group_row<WARP>();
    if (r >= rows) return;
    const float* yr = y + r * cols;
    const float* gr = g + r * cols;
    float* dr = dx + r * cols;
    const int tid = camel::group_tid<WARP>(), gs = camel::group_size<WARP>();
    float dot = 0.0f;  // Σ g·y (softmax) or Σ g (log-softmax)
    if (VEC) {
        const float4* y4 = reinterpret_cast<const float4*>(yr);
        const float4* g4 = reinterpret_cast<const float4*>(gr);
        for (long long c = tid; c < cols / 4; c += gs) {
            float4 a = g4[c];
            if (log_out) {
                dot += (a.x + a.y) + (a.z + a.w);
            } else {
                float4 b = y4[c];
                dot += (a.x * b.x + a.y * b.y) + (a.z * b.z + a.w * b.w);
            }
        }
    } else {
        for (long long c = tid; c < cols; c += gs) dot += log_out ? gr[c] : gr[c] * yr[c];
    }
    dot = camel::group_sum<WARP>(dot, scratch);
    if (VEC) {
        const float4* y4 = reinterpret_cast<const float4*>(yr);
        const float4* g4 = reinterpret_cast<const float4*>(gr);
        float4* d4 = reinterpret_cast<float4*>(dr);
        for (long long c = tid; c < cols / 4; c += gs) {
            float4 a = g4[c], b = y4[c], o;
            if (log_out) {
                o = make_float4(a.x - expf(b.x) * dot, a.y - expf(b.y) * dot, a.z - expf(b.z) * dot,
                                a.w - expf(b.w) * dot);
            } else {
                o = make_float4(b.x * (a.x - dot), b.y * (a.y - dot), b.z * (a.z - dot), b.w * (a.w - dot));
            }
            d4[c] = o;
        }
    } else {
        for (long long c = tid; c < cols; c += gs) {
            float a = gr[c], b = yr[c];
            dr[c] = log_out ? a - expf(b) * dot : b * (a - dot);
        }
    }
}

#define SOFTMAX_VARIANT(suffix, WARP, VEC)                                                                 \
    extern "C" __global__ void softmax_fwd_##suffix(const float* __restrict__ x, float* __restrict__ y,    \
                                                    long long rows, long long cols, int log_out) {         \
        CAMEL_PDL_WAIT();                                                                                  \
        softmax_fwd_row<WARP, VEC>(x, y, rows, cols, log_out);                                             \
    }                                                                                                      \
    extern "C" __global__ void softmax_bwd_##suffix(const float* __restrict__ y, const float* __restrict__ g, \
                                                    float* __restrict__ dx, long long rows, long long cols,  \
                                                    int log_out) {                                          \
        CAMEL_PDL_WAIT();                                                                                   \
        softmax_bwd_row<WARP, VEC>(y, g, dx, rows, cols, log_out);                                         \
    }

SOFTMAX_VARIANT(warp_f32, true, false)
SOFTMAX_VARIANT(warp_vec_f32, true, true)
SOFTMAX_VARIANT(block_f32, false, false)
SOFTMAX_VARIANT(block_vec_f32, false, true)
