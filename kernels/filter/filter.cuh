// filter.cuh — what the steps of the image-filter ladder share (kernels/filter/NN_*.cu).
//
// Every step computes the same thing: the correlation of a single-channel row-major [H, W] f32
// image with a (2r+1) x (2r+1) filter, zero padding, an output of the image's size, as
// F.conv2d(x[None, None], w[None, None], padding=r):
//     y[i][j] = sum over a, b in [0, 2r] of w[a][b] * x[i + a - r][j + b - r]
// where a pixel outside the image reads 0 (so a NaN or inf tap still meets every output, as in
// PyTorch). The separable steps take the filter as a column vector c and a row vector v with
// w[a][b] = c[a] * v[b]: a row pass t[i][j] = sum_b v[b] x[i][j + b - r] into an intermediate
// image, then a column pass y[i][j] = sum_a c[a] t[i + a - r][j].
#pragma once

#include "common/common.cuh"

// The largest radius any step accepts (a 17 x 17 filter); the launchers check it.
#define FILTER_MAX_RADIUS 8

// X(R) for every radius the tuned step instantiates.
#define FILTER_RADII(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8)

namespace filter {

// x[row][col] of the [H, W] image, 0 outside it (the zero padding).
__device__ __forceinline__ float at(const float* __restrict__ x, int H, int W, int row, int col) {
    return (row >= 0 && row < H && col >= 0 && col < W) ? __ldg(x + (long long)row * W + col) : 0.0f;
}

}  // namespace filter
