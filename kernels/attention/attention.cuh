// attention.cuh — what the attention ladder's kernels share: the argument block, the offsets of
// a row of q, k, v and of the outputs, and the causal bound.
//
// Layouts. q is [B, H, Tq, D], k and v are [B, H, Tk, D], each with its own strides for the
// batch, head and token dims and its D features contiguous: camel passes the views that split a
// [B, T, H·D] projection into heads as they are, without a copy. The output O, its gradient dO
// and the gradients dq, dk, dv are dense [B, T, H, D], the head-merged layout the output
// projection reads, so merging the heads back costs nothing. The log-sum-exp of each query row
// (from which the backward recomputes the probabilities) is dense [B, H, Tq].
//
// Masking. With `causal`, query i sees key j when j ≤ i + (Tk − Tq): the queries are the last
// Tq positions of Tk (a key/value cache), as in the masked softmax (kernels/masked_softmax).
#pragma once

#include "common/common.cuh"
#include "common/half.cuh"  // to_float

// AttnArgs of crates/camel-cuda/src/kernels/attention.rs, passed by value.
struct AttnArgs {
    long long b, h, tq, tk;      // batch, heads, queries, keys
    long long q_sb, q_sh, q_st;  // q's strides (elements) along batch, head and token
    long long k_sb, k_sh, k_st;  // k's
    long long v_sb, v_sh, v_st;  // v's
    float scale;                 // the multiplier of q·k
    int causal;                  // mask the keys j > i + (tk − tq)
};

namespace camel {

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

// Keys query i sees: all tk, or i + 1 + (tk − tq) with the causal mask (at most tk).
__device__ __forceinline__ long long attn_visible(const AttnArgs& a, long long i) {
    return a.causal ? min(a.tk, i + 1 + (a.tk - a.tq)) : a.tk;
}

// The first query row that sees key j: 0, or j − (tk − tq) with the causal mask.
__device__ __forceinline__ long long first_query(const AttnArgs& a, long long j) {
    return a.causal ? max(0LL, j - (a.tk - a.tq)) : 0;
}

// Offset of token t of head (bb, hh) in a dense [B, T, H, D] tensor.
__device__ __forceinline__ long long bthd(const AttnArgs& a, long long bb, long long hh, long long t, long long T,
                                          int d) {
    return ((bb * T + t) * a.h + hh) * d;
}

__device__ __forceinline__ float dot4(float4 a, float4 b) {
    return fmaf(a.x, b.x, fmaf(a.y, b.y, fmaf(a.z, b.z, a.w * b.w)));
}

// acc + p · x, per component.
__device__ __forceinline__ float4 axpy4(float p, float4 x, float4 acc) {
    return make_float4(fmaf(p, x.x, acc.x), fmaf(p, x.y, acc.y), fmaf(p, x.z, acc.z), fmaf(p, x.w, acc.w));
}

__device__ __forceinline__ float4 scale4(float4 x, float s) { return make_float4(x.x * s, x.y * s, x.z * s, x.w * s); }

// Sum over the four threads of a quad (lanes 4k … 4k + 3); each gets the result.
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(FULL_MASK, v, 1);
    return v + __shfl_xor_sync(FULL_MASK, v, 2);
}

// The backward's Δ_i = Σ_d dO_id · O_id of each query row (f32 sums): a warp per row of the
// dense [B, Tq, H, D] O and dO (of T: f32, f16 or bf16), written to the [B, H, Tq] Δ.
template <typename T>
__device__ __forceinline__ void attn_delta(const T* __restrict__ o, const T* __restrict__ dout,
                                           float* __restrict__ delta, long long b, long long h, long long tq, int d) {
    const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // (b, h, i)
    const int lane = threadIdx.x % 32;
    if (row >= b * h * tq) return;
    const long long i = row % tq, bh = row / tq, hh = bh % h, bb = bh / h;
    const long long off = ((bb * tq + i) * h + hh) * d;
    float s = 0.0f;
    for (int e = lane; e < d; e += 32) s = fmaf(to_float(o[off + e]), to_float(dout[off + e]), s);
    s = warp_sum(s);
    if (lane == 0) delta[row] = s;
}

}  // namespace camel
