// The 16-bit convolution's data movement: f16 and bf16 convolutions run as an unfold of the
// input's patches into rows, then one tensor-core GEMM of the rows with the weight (the HGEMM
// ladder, through camel-core's `linear` and `matmul`), as step 1 of the conv2d ladder runs SGEMM.
//
// Rows are laid out [groups][images·oh·ow][c/groups·kh·kw]: one row per output pixel, one column
// per tap, so that with one group the rows are the `x` of `linear(x, weight)` with the weight
// `[o, c·kh·kw]` as stored, and the GEMM's epilogue adds the bias and applies the activation
// to the f32 sums before their one rounding.
//
// The backward folds the rows' gradient back onto the input as a gather: a thread per input
// element sums, in f32, the row entries that read it, and rounds once; no atomics, and the same
// result on every run.
#include "common/half.cuh"
#include "conv2d.cuh"

using namespace camel;

// rows[g][img·P + p][k] = x[img, g·cg + cg_k, oy·sh − ph + ki·dh, ox·sw − pw + kj·dw] (0 outside),
// k = (cg_k·kh + ki)·kw + kj.
template <typename T>
__device__ void unfold_rows(const T* __restrict__ x, T* __restrict__ rows, const ConvArgs& a) {
    const long long P = a.oh * a.ow, cg_n = a.c / a.groups, kg = cg_n * a.kh * a.kw, Q = a.n * P;
    const long long total = a.groups * Q * kg;
    GRID_STRIDE_LOOP(i, total) {
        const long long k = i % kg, r = i / kg;
        const long long q = r % Q, g = r / Q;
        const long long img = q / P, p = q % P;
        const long long oy = p / a.ow, ox = p % a.ow;
        const long long kj = k % a.kw, t = k / a.kw;
        const long long ki = t % a.kh, cg = t / a.kh;
        const long long iy = oy * a.sh - a.ph + ki * a.dh, ix = ox * a.sw - a.pw + kj * a.dw;
        T v = from_float<T>(0.f);
        if (iy >= 0 && iy < a.h && ix >= 0 && ix < a.w) v = x[((img * a.c + g * cg_n + cg) * a.h + iy) * a.w + ix];
        rows[i] = v;
    }
}

// dx[img, c, iy, ix] = Σ drows[g][img·P + oy·ow + ox][(cg·kh + ki)·kw + kj] over the taps (ki, kj)
// and output pixels (oy, ox) whose patch reads (iy, ix); summed in f32, rounded once.
template <typename T>
__device__ void fold_rows(const T* __restrict__ drows, T* __restrict__ dx, const ConvArgs& a) {
    const long long P = a.oh * a.ow, Q = a.n * P, cg_n = a.c / a.groups, kg = cg_n * a.kh * a.kw;
    const long long total = a.n * a.c * a.h * a.w;
    GRID_STRIDE_LOOP(i, total) {
        const long long ix = i % a.w, t1 = i / a.w;
        const long long iy = t1 % a.h, t2 = t1 / a.h;
        const long long c = t2 % a.c, img = t2 / a.c;
        const long long g = c / cg_n, cg = c % cg_n;
        const T* base = drows + (g * Q + img * P) * kg;
        float s = 0.f;
        for_each_reader(a, iy, ix, [&](long long oy, long long ox, long long ki, long long kj) {
            s += to_float(base[(oy * a.ow + ox) * kg + (cg * a.kh + ki) * a.kw + kj]);
        });
        dx[i] = from_float<T>(s);
    }
}

#define HALF_ROWS(T, SUFFIX)                                                                            \
    extern "C" __global__ void conv2d_unfold_rows_##SUFFIX(const T* __restrict__ x, T* __restrict__ rows, \
                                                           ConvArgs a) {                                \
        CAMEL_PDL_WAIT();                                                                               \
        unfold_rows<T>(x, rows, a);                                                                     \
    }                                                                                                   \
    extern "C" __global__ void conv2d_fold_rows_##SUFFIX(const T* __restrict__ drows, T* __restrict__ dx, \
                                                         ConvArgs a) {                                  \
        CAMEL_PDL_WAIT();                                                                               \
        fold_rows<T>(drows, dx, a);                                                                     \
    }

HALF_ROWS(__half, f16)
HALF_ROWS(__nv_bfloat16, bf16)
