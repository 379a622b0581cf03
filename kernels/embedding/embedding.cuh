// The grouped-token sums shared by the backward gathers of embedding steps 3 and 4.
#pragma once

#include "common/common.cuh"

// Grouped tokens a warp sums in step 3's gather (a chunk).

#define EMB_CHUNK 32

// Shared by the gathers of steps 3 and 4. Adds `cnt` grouped tokens into `acc` (columns col …
// col + W − 1; lane k < cnt holds token k's id in my_p and its row in my_r), four rows' loads in
// flight before any is added; where the row changes it calls flush() for the finished group and
// starts the next one's sum.
template <int W, class Flush>
__device__ __forceinline__ void emb_sum_grouped(const float* __restrict__ g, long long D, long long col, bool act,
                                                int cnt, int my_p, int my_r, float (&acc)[W], int& row,
                                                Flush& flush) {
    for (int j = 0; j < cnt; j += 4) {
        float v[4][W];
        int rr[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {  // four rows' loads in flight before any is added
            const int p = __shfl_sync(0xffffffffu, my_p, (j + u) & 31);
            rr[u] = __shfl_sync(0xffffffffu, my_r, (j + u) & 31);
            const bool ok = act && j + u < cnt;
            const float* src = g + (long long)p * D + col;
            if (W == 4) {
                const float4 x = ok ? *reinterpret_cast<const float4*>(src) : make_float4(0, 0, 0, 0);
                v[u][0] = x.x, v[u][1 % W] = x.y, v[u][2 % W] = x.z, v[u][3 % W] = x.w;
            } else {
                v[u][0] = ok ? src[0] : 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            if (j + u < cnt) {
                if (rr[u] != row) {  // the next group starts: store this one
                    flush();
#pragma unroll
                    for (int q = 0; q < W; ++q) acc[q] = 0.0f;
                    row = rr[u];
                }
#pragma unroll
                for (int q = 0; q < W; ++q) acc[q] += v[u][q];
            }
        }
    }
}

// Writes a group's sum: a plain store (the group's only writer) or atomic adds (one of several).
template <int W>
__device__ __forceinline__ void emb_put(float* o, const float (&acc)[W], bool store) {
    if (store) {
        if (W == 4) {
            *reinterpret_cast<float4*>(o) = make_float4(acc[0], acc[1 % W], acc[2 % W], acc[3 % W]);
        } else {
            o[0] = acc[0];
        }
    } else {
#pragma unroll
        for (int q = 0; q < W; ++q) atomicAdd(&o[q], acc[q]);
    }
}
