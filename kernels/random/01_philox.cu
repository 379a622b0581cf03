// Random numbers, Bernoulli samples, dropout and multinomial sampling from the Philox4x32-10
// stream (philox.cuh), one step: each thread computes whole Philox counters (four values) in a
// grid-stride loop, so no generator state lives on the device and any grid covers any n. The
// CPU reference is crates/camel-core/src/ops/random/cpu.rs; launchers are in
// crates/camel-cuda/src/kernels/random.rs.

#include "common/half.cuh"
#include "common/index_error.cuh"
#include "random/philox.cuh"

using camel::philox_block;
using camel::philox_uniform;
using camel::Words4;

typedef unsigned long long u64;

// Writes the `take` (1 to 4) values of `v` that fall inside the output: a full group at a
// 16-byte-aligned address as one float4 store (a warp's scalar store would touch sixteen
// 32-byte sectors to write 128 bytes), the tail one value at a time.
__device__ __forceinline__ void store_group(float* out, long long i, long long take, const float v[4]) {
    if (take == 4 && ((unsigned long long)(out + i) & 15ull) == 0) {
        *reinterpret_cast<float4*>(out + i) = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
    for (int t = 0; t < take; ++t) out[i + t] = v[t];
}

// lo + (hi − lo)·u rounded once per operation (no fused multiply-add, as on the CPU), kept below
// hi where the rounding reaches it.
__device__ __forceinline__ float uniform_in(float u, float lo, float hi) {
    const float v = __fadd_rn(lo, __fmul_rn(__fsub_rn(hi, lo), u));
    return v < hi ? v : nextafterf(hi, -INFINITY);
}

// out[i] = uniform i of the draw scaled into [lo, hi).
extern "C" __global__ void random_uniform_f32(float* __restrict__ out, long long n, u64 seed, u64 offset, float lo,
                                              float hi) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(j, camel::ceil_div(n, 4)) {
        const Words4 w = philox_block(seed, offset, (u64)j);
        const float v[4] = {uniform_in(philox_uniform(w.x), lo, hi), uniform_in(philox_uniform(w.y), lo, hi),
                            uniform_in(philox_uniform(w.z), lo, hi), uniform_in(philox_uniform(w.w), lo, hi)};
        const long long i = 4 * j;
        store_group(out, i, n - i < 4 ? n - i : 4, v);
    }
}

// out[i] = standard normal i: Box–Muller on words (0, 1) and (2, 3) of each counter.
extern "C" __global__ void random_normal_f32(float* __restrict__ out, long long n, u64 seed, u64 offset) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(j, camel::ceil_div(n, 4)) {
        const Words4 w = philox_block(seed, offset, (u64)j);
        float v[4];
        camel::box_muller(w.x, w.y, &v[0], &v[1]);
        camel::box_muller(w.z, w.w, &v[2], &v[3]);
        const long long i = 4 * j;
        store_group(out, i, n - i < 4 ? n - i : 4, v);
    }
}

// out[i] = 1 where uniform i < p, else 0.
extern "C" __global__ void random_bernoulli_scalar_f32(float* __restrict__ out, long long n, u64 seed, u64 offset,
                                                       float p) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(j, camel::ceil_div(n, 4)) {
        const Words4 w = philox_block(seed, offset, (u64)j);
        const float v[4] = {philox_uniform(w.x) < p ? 1.0f : 0.0f, philox_uniform(w.y) < p ? 1.0f : 0.0f,
                            philox_uniform(w.z) < p ? 1.0f : 0.0f, philox_uniform(w.w) < p ? 1.0f : 0.0f};
        const long long i = 4 * j;
        store_group(out, i, n - i < 4 ? n - i : 4, v);
    }
}

__device__ __forceinline__ float bernoulli_one(unsigned word, float p) {
    if (!(p >= 0.0f && p <= 1.0f)) return NAN;  // NaN or outside [0, 1]: NaN in its place
    return philox_uniform(word) < p ? 1.0f : 0.0f;
}

// out[i] = 1 where uniform i < p[i], else 0; NaN where p[i] is NaN or outside [0, 1].
extern "C" __global__ void bernoulli_f32(const float* __restrict__ p, float* __restrict__ out, long long n, u64 seed,
                                         u64 offset) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(j, camel::ceil_div(n, 4)) {
        const Words4 w = philox_block(seed, offset, (u64)j);
        const unsigned words[4] = {w.x, w.y, w.z, w.w};
        const long long i = 4 * j, take = n - i < 4 ? n - i : 4;
        for (int t = 0; t < take; ++t) out[i + t] = bernoulli_one(words[t], p[i + t]);
    }
}

__device__ __forceinline__ float keep(unsigned word, float p, float scale) {
    return philox_uniform(word) >= p ? scale : 0.0f;
}

// y[i] = x[i] · (uniform i ≥ p ? scale : 0): dropout's forward, and its backward on the upstream
// gradient with the same (seed, offset). A full group of four is one float4 load and store when
// both pointers are 16-byte aligned.
extern "C" __global__ void dropout_f32(const float* __restrict__ x, float* __restrict__ y, long long n, u64 seed,
                                       u64 offset, float p, float scale) {
    CAMEL_PDL_WAIT();
    const bool vec = (((u64)x | (u64)y) & 15ull) == 0;
    GRID_STRIDE_LOOP(j, camel::ceil_div(n, 4)) {
        const Words4 w = philox_block(seed, offset, (u64)j);
        const long long i = 4 * j;
        if (vec && i + 4 <= n) {
            const float4 v = *reinterpret_cast<const float4*>(x + i);
            const float4 o = make_float4(__fmul_rn(v.x, keep(w.x, p, scale)), __fmul_rn(v.y, keep(w.y, p, scale)),
                                         __fmul_rn(v.z, keep(w.z, p, scale)), __fmul_rn(v.w, keep(w.w, p, scale)));
            *reinterpret_cast<float4*>(y + i) = o;
        } else {
            const unsigned words[4] = {w.x, w.y, w.z, w.w};
            const long long take = n - i < 4 ? n - i : 4;
            for (int t = 0; t < take; ++t) y[i + t] = __fmul_rn(x[i + t], keep(words[t], p, scale));
        }
    }
}

// The same dropout on f16 and bf16 (dropout_f16, dropout_bf16): each element widens to f32, the
// product is the f32 one above, and it rounds once to T, so a 16-bit tensor gets the f32 result
// of its widened values, rounded. A full group of four is one 8-byte load and store when both
// pointers are 8-byte aligned.
template <typename T>
__device__ __forceinline__ void dropout_16(const T* __restrict__ x, T* __restrict__ y, long long n, u64 seed, u64 offset,
                                           float p, float scale) {
    CAMEL_PDL_WAIT();
    const bool vec = (((u64)x | (u64)y) & 7ull) == 0;
    GRID_STRIDE_LOOP(j, camel::ceil_div(n, 4)) {
        const Words4 w = philox_block(seed, offset, (u64)j);
        const unsigned words[4] = {w.x, w.y, w.z, w.w};
        const long long i = 4 * j;
        if (vec && i + 4 <= n) {
            const uint2 v = *reinterpret_cast<const uint2*>(x + i);
            const unsigned short h[4] = {(unsigned short)(v.x & 0xffff), (unsigned short)(v.x >> 16),
                                         (unsigned short)(v.y & 0xffff), (unsigned short)(v.y >> 16)};
            unsigned short o[4];
#pragma unroll
            for (int t = 0; t < 4; ++t)
                o[t] = camel::float_to_bits<T>(__fmul_rn(camel::bits_to_float<T>(h[t]), keep(words[t], p, scale)));
            *reinterpret_cast<uint2*>(y + i) = make_uint2(o[0] | (unsigned)o[1] << 16, o[2] | (unsigned)o[3] << 16);
        } else {
            const long long take = n - i < 4 ? n - i : 4;
            for (int t = 0; t < take; ++t)
                y[i + t] = camel::from_float<T>(__fmul_rn(camel::to_float(x[i + t]), keep(words[t], p, scale)));
        }
    }
}

extern "C" __global__ void dropout_f16(const __half* __restrict__ x, __half* __restrict__ y, long long n, u64 seed,
                                       u64 offset, float p, float scale) {
    dropout_16(x, y, n, seed, offset, p, scale);
}

extern "C" __global__ void dropout_bf16(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y, long long n,
                                        u64 seed, u64 offset, float p, float scale) {
    dropout_16(x, y, n, seed, offset, p, scale);
}

// Whether a row of k weights can be sampled: every weight finite and non-negative, their sum
// positive and finite; 0 when it can, else the reason code of CAMEL_OP_MULTINOMIAL.
__device__ __forceinline__ long long check_row(const float* w, long long k, long long samples, int replacement) {
    float total = 0.0f;
    long long positive = 0;
    for (long long c = 0; c < k; ++c) {
        const float v = w[c];
        if (!(v >= 0.0f && v <= 3.402823466e38f)) return 1;
        total += v;
        positive += v > 0.0f;
    }
    if (!(total > 0.0f && total <= 3.402823466e38f)) return 1;
    if (!replacement && positive < samples) return 2;
    return 0;
}

// Uniform `i` of the draw (word i % 4 of counter offset + i / 4).
__device__ __forceinline__ float uniform_at(u64 seed, u64 offset, long long i) {
    const Words4 w = philox_block(seed, offset, (u64)(i / 4));
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
    return philox_uniform(words[i % 4]);
}

// With replacement, pass 1: cdf = the running sums of each row of w (one thread a row, in order,
// in f32, as on the CPU); a row that cannot be sampled records an error.
extern "C" __global__ void multinomial_cdf_f32(const float* __restrict__ w, float* __restrict__ cdf, long long rows,
                                               long long k, long long* err) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(r, rows) {
        const float* row = w + r * k;
        const long long why = check_row(row, k, 1, 1);
        if (why) record_index_error(err, CAMEL_OP_MULTINOMIAL, r, why);
        float acc = 0.0f;
        for (long long c = 0; c < k; ++c) {
            acc += row[c];
            cdf[r * k + c] = acc;
        }
    }
}

// With replacement, pass 2: sample s of row r (value i = r · samples + s of the draw) is the
// first category whose running sum exceeds u · total; when rounding leaves u · total at the
// total, the last category with a positive weight.
extern "C" __global__ void multinomial_replacement(const float* __restrict__ cdf, long long* __restrict__ out,
                                                   long long rows, long long k, long long samples, u64 seed,
                                                   u64 offset) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, rows * samples) {
        const float* c = cdf + (i / samples) * k;
        const float t = __fmul_rn(uniform_at(seed, offset, i), c[k - 1]);
        long long lo = 0, hi = k;  // first index with c > t
        while (lo < hi) {
            const long long mid = lo + (hi - lo) / 2;
            if (c[mid] <= t)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == k) {
            lo = k - 1;
            while (lo > 0 && c[lo - 1] == c[lo]) --lo;
        }
        out[i] = lo;
    }
}

// Without replacement: one thread a row copies its weights to `work`, then for each sample draws
// u, picks the first category whose running sum exceeds u · (the sum of the weights left) and
// zeroes it, the CPU's loop exactly (the same sums in the same order).
extern "C" __global__ void multinomial_no_replacement_f32(const float* __restrict__ w, float* __restrict__ work,
                                                          long long* __restrict__ out, long long rows, long long k,
                                                          long long samples, u64 seed, u64 offset, long long* err) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(r, rows) {
        const float* row = w + r * k;
        float* wk = work + r * k;
        const long long why = check_row(row, k, samples, 0);
        if (why) record_index_error(err, CAMEL_OP_MULTINOMIAL, r, why);
        for (long long c = 0; c < k; ++c) wk[c] = row[c];
        for (long long s = 0; s < samples; ++s) {
            float total = 0.0f;
            for (long long c = 0; c < k; ++c) total += wk[c];
            const float t = __fmul_rn(uniform_at(seed, offset, r * samples + s), total);
            float acc = 0.0f;
            long long pick = -1, last = 0;
            for (long long c = 0; c < k; ++c) {
                acc += wk[c];
                if (wk[c] > 0.0f) last = c;
                if (acc > t) {
                    pick = c;
                    break;
                }
            }
            if (pick < 0) pick = last;
            wk[pick] = 0.0f;
            out[r * samples + s] = pick;
        }
    }
}
