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
