// Step 1 of the conv2d ladder: im2col + SGEMM. The launcher (im2col_gemm in
// crates/camel-cuda/src/kernels/conv2d.rs) writes each chunk of images' patches to a column
// matrix with conv2d_im2col_f32, multiplies the weight by it with camel's SGEMM ladder (one GEMM
// batched over the groups), and conv2d_bias_act_f32 adds the bias, applies the activation and
// moves the GEMM's [o][images·pixels] result to NCHW. The column matrix is kg·oh·ow floats per
// image, kh·kw times the input: the memory traffic step 2 removes.
//
// The backward: conv2d_gather_grad_f32 lays the upstream gradient out as the GEMM's
// [o][images·pixels], one GEMM gives the weight gradient (dy · colᵀ) and another the column
// gradient (Wᵀ · dy), which conv2d_col2im_f32 folds back onto the input as a gather: a thread
// per input element sums the column entries that read it, so no atomics and the same result
// on every run.
#include "conv2d.cuh"

// col[g][k][i·P + p] = x[n0 + i, g·cg + cg_k, oy·sh − ph + ki·dh, ox·sw − pw + kj·dw] (0 outside).
extern "C" __global__ void conv2d_im2col_f32(const float* __restrict__ x, float* __restrict__ col, ConvArgs a,
                                             long long n0, long long nb) {
    CAMEL_PDL_WAIT();
    const long long P = a.oh * a.ow, cg_n = a.c / a.groups, kg = cg_n * a.kh * a.kw, Q = nb * P;
    const long long total = a.groups * kg * Q;
    GRID_STRIDE_LOOP(i, total) {
        const long long q = i % Q, r = i / Q;
        const long long k = r % kg, g = r / kg;
        const long long img = q / P, p = q % P;
        const long long oy = p / a.ow, ox = p % a.ow;
        const long long kj = k % a.kw, t = k / a.kw;
        const long long ki = t % a.kh, cg = t / a.kh;
        const long long iy = oy * a.sh - a.ph + ki * a.dh, ix = ox * a.sw - a.pw + kj * a.dw;
        float v = 0.f;
        if (iy >= 0 && iy < a.h && ix >= 0 && ix < a.w)
            v = x[(((n0 + img) * a.c + g * cg_n + cg) * a.h + iy) * a.w + ix];
        col[i] = v;
    }
}

// y[n0 + i, o, p] = act(tmp[o][i·P + p] + bias[o]).
extern "C" __global__ void conv2d_bias_act_f32(const float* __restrict__ tmp, const float* __restrict__ bias,
                                               float* __restrict__ y, ConvArgs a, long long n0, long long nb,
                                               int has_bias, int relu) {
    CAMEL_PDL_WAIT();
    const long long P = a.oh * a.ow, Q = nb * P, total = nb * a.o * P;
    GRID_STRIDE_LOOP(i, total) {
        const long long p = i % P, t = i / P;
        const long long o = t % a.o, img = t / a.o;
        float v = tmp[o * Q + img * P + p];
        if (has_bias) v += bias[o];
        if (relu) v = conv_relu(v);
        y[n0 * a.o * P + i] = v;
    }
}

// dyt[o][i·P + p] = dy[n0 + i, o, p].
extern "C" __global__ void conv2d_gather_grad_f32(const float* __restrict__ dy, float* __restrict__ dyt, ConvArgs a,
                                                  long long n0, long long nb) {
    CAMEL_PDL_WAIT();
    const long long P = a.oh * a.ow, Q = nb * P, total = nb * a.o * P;
    GRID_STRIDE_LOOP(i, total) {
        const long long q = i % Q, o = i / Q;
        const long long img = q / P, p = q % P;
        dyt[i] = dy[((n0 + img) * a.o + o) * P + p];
    }
}

// dx[n0 + i, c, iy, ix] = Σ dcol[g][k][i·P + oy·ow + ox] over the kernel taps (ki, kj) and
// output pixels (oy, ox) whose patch reads (iy, ix).
extern "C" __global__ void conv2d_col2im_f32(const float* __restrict__ dcol, float* __restrict__ dx, ConvArgs a,
                                             long long n0, long long nb) {
    CAMEL_PDL_WAIT();
    const long long P = a.oh * a.ow, Q = nb * P, cg_n = a.c / a.groups, kg = cg_n * a.kh * a.kw;
    const long long total = nb * a.c * a.h * a.w;
    GRID_STRIDE_LOOP(i, total) {
        const long long ix = i % a.w, t1 = i / a.w;
        const long long iy = t1 % a.h, t2 = t1 / a.h;
        const long long c = t2 % a.c, img = t2 / a.c;
        const long long g = c / cg_n, cg = c % cg_n;
        const float* base = dcol + g * kg * Q + img * P;
        float s = 0.f;
        for_each_reader(a, iy, ix, [&](long long oy, long long ox, long long ki, long long kj) {
            s += base[((cg * a.kh + ki) * a.kw + kj) * Q + oy * a.ow + ox];
        });
        dx[n0 * a.c * a.h * a.w + i] = s;
    }
}

// dst[i] += src[i]: the weight gradient summed over chunks of images.
extern "C" __global__ void conv2d_accumulate_f32(float* __restrict__ dst, const float* __restrict__ src, long long n) {
    CAMEL_PDL_WAIT();
    GRID_STRIDE_LOOP(i, n) dst[i] += src[i];
}
