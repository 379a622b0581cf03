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
//
// Dropout (attn_dropout below) multiplies each weight P_ij by z_ij, 0 or 1 / (1 − p), after the
// softmax: O = (P ⊙ Z)·V. The log-sum-exp is the softmax's, without dropout. The backward
// uses dV = (P ⊙ Z)ᵀ·dO and dS = P ⊙ (Z ⊙ dP − Δ), where dP = dO·Vᵀ and Δ_i = Σ_d dO_id · O_id
// (= Σ_j P_ij Z_ij dP_ij, as O is the output with dropout).
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
    unsigned long long seed;     // of the dropout mask
    float drop_scale;            // 1 / (1 − dropout): a kept weight's multiplier
    unsigned drop_thr;           // a weight whose draw is below this is dropped; 0: no dropout
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

// Dropout on the attention weights. The draw of key j for query i of head bh is a hash of (seed,
// bh, i, j), a pure function, so the backward recomputes the forward's mask without storing it,
// and AttnGeom::dropout_multiplier (crates/camel-cuda/src/kernels/attention.rs) computes the same
// bits on the CPU. The hash starts from one value per query row (attn_drop_row, once per row)
// and costs one attn_mix per weight (attn_dropout).
__device__ __forceinline__ unsigned attn_mix(unsigned h) {  // murmur3's finalizer
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    return h ^ (h >> 16);
}

__device__ __forceinline__ unsigned attn_drop_row(const AttnArgs& a, long long bh, long long i) {
    const unsigned key = attn_mix((unsigned)a.seed ^ attn_mix((unsigned)(a.seed >> 32)));
    return attn_mix(key ^ attn_mix((unsigned)bh ^ attn_mix((unsigned)i)));
}

// The multiplier of key j's weight in the row whose hash is `row`: 0 (dropped), 1 / (1 − p)
// (kept), or 1 without dropout.
__device__ __forceinline__ float attn_dropout(const AttnArgs& a, unsigned row, long long j) {
    if (a.drop_thr == 0) return 1.0f;
    return attn_mix(row ^ ((unsigned)j * 0x9e3779b9u)) >= a.drop_thr ? a.drop_scale : 0.0f;
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

// 2^x as one ex2.approx.ftz instruction: a result below 2^−126 is flushed to 0. The attention
// weights are 2^(score − the row's max), so a flushed weight is below 2^−126 of the row's largest,
// which an f32 sum cannot see; the non-flushing exp2f spends three more instructions a weight on it.
__device__ __forceinline__ float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

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
