// conv2d.cuh — what the conv2d ladder's steps share: the geometry passed by value
// (ConvArgs, `Conv2dGeom` in crates/camel-cuda/src/kernels/conv2d.rs) and the ReLU of the fused
// epilogue.
//
// Layouts: input x [n, c, h, w], weight [o, c/groups, kh, kw] (row k of a group's GEMM operand is
// (cg·kh + i)·kw + j), output y [n, o, oh, ow]. Step 1's column matrix is
// [groups][kg = c/groups·kh·kw][images·oh·ow].
#pragma once

#include "common/common.cuh"

struct ConvArgs {
    long long n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, oh, ow;
};

// max(v, 0) that keeps NaN (IEEE: NaN < 0 is false), as `relu` everywhere in camel.
__device__ __forceinline__ float conv_relu(float v) { return v < 0.f ? 0.f : v; }

// Calls f(oy, ox, ki, kj) for every output pixel (oy, ox) and tap (ki, kj) whose patch reads the
// input pixel (iy, ix): the gather that folds a gradient of the patches (step 1's columns, the
// 16-bit convolution's rows) back onto the input without atomics.
template <typename F>
__device__ __forceinline__ void for_each_reader(const ConvArgs& a, long long iy, long long ix, F f) {
    for (long long ki = 0; ki < a.kh; ++ki) {
        const long long ty = iy + a.ph - ki * a.dh;
        if (ty < 0 || ty % a.sh != 0) continue;
        const long long oy = ty / a.sh;
        if (oy >= a.oh) continue;
        for (long long kj = 0; kj < a.kw; ++kj) {
            const long long tx = ix + a.pw - kj * a.dw;
            if (tx < 0 || tx % a.sw != 0) continue;
            const long long ox = tx / a.sw;
            if (ox >= a.ow) continue;
            f(oy, ox, ki, kj);
        }
    }
}
