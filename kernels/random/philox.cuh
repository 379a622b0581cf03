// philox.cuh — Philox4x32-10, the counter-based generator behind every random kernel, written to
// match crates/camel-core/src/rng.rs operation for operation: the CPU and the GPU produce the
// same words for the same (seed, counter), and so the same uniforms, Bernoulli samples and
// dropout masks bit for bit.
//
// A draw is a key (the 64-bit seed) and a first counter (the offset). Value i of the draw is
// word i % 4 of counter offset + i / 4 (64-bit, wrapping): counter c is the 128-bit block
// (lo32(c), hi32(c), 0, 0). Each thread computes whole counters, so no state is shared.
#pragma once

#include "common/common.cuh"

namespace camel {

struct Words4 {
    unsigned x, y, z, w;
};

// Random123's multipliers and Weyl key increments.
constexpr unsigned PHILOX_M0 = 0xD2511F53u, PHILOX_M1 = 0xCD9E8D57u;
constexpr unsigned PHILOX_W0 = 0x9E3779B9u, PHILOX_W1 = 0xBB67AE85u;

__device__ __forceinline__ Words4 philox_round(Words4 c, unsigned k0, unsigned k1) {
    const unsigned hi0 = __umulhi(PHILOX_M0, c.x), lo0 = PHILOX_M0 * c.x;
    const unsigned hi1 = __umulhi(PHILOX_M1, c.z), lo1 = PHILOX_M1 * c.z;
    return Words4{hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0};
}

// The four words of counter `offset + j` under key `seed`.
__device__ __forceinline__ Words4 philox_block(unsigned long long seed, unsigned long long offset,
                                               unsigned long long j) {
    const unsigned long long c = offset + j;
    Words4 w{(unsigned)c, (unsigned)(c >> 32), 0u, 0u};
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        w = philox_round(w, k0, k1);
    }
    return w;
}

// Uniform in [0, 1) from the top 24 bits: exact in f32, so identical to the CPU's.
__device__ __forceinline__ float philox_uniform(unsigned x) { return (float)(x >> 8) * 5.9604644775390625e-8f; }

// Uniform in (0, 1]: Box–Muller's logarithm argument.
__device__ __forceinline__ float philox_uniform_open(unsigned x) {
    return (float)((x >> 8) + 1u) * 5.9604644775390625e-8f;
}

// Box–Muller: r cos θ and r sin θ with r = √(−2 ln u1), θ = 2π u2, each product rounded on its
// own (the __f*_rn intrinsics keep nvcc from fusing them) as on the CPU. logf, sqrtf and sincosf
// are CUDA's accurate versions (no fast math): within a few ulps of Rust's, not bitwise.
__device__ __forceinline__ void box_muller(unsigned x1, unsigned x2, float* z0, float* z1) {
    const float r = sqrtf(__fmul_rn(-2.0f, logf(philox_uniform_open(x1))));
    const float theta = __fmul_rn(6.28318548202514648f, philox_uniform(x2));
    float s, c;
    sincosf(theta, &s, &c);
    *z0 = __fmul_rn(r, c);
    *z1 = __fmul_rn(r, s);
}

}  // namespace camel
