// 2-D pooling over NCHW: max pooling (saving each window's argmax for the backward) and
// average pooling, forward and backward. The forwards run a thread per output element over its
// window; the backwards a thread per input element that gathers from the windows covering it,
// so no atomics are needed where windows overlap and the result is the same on every run.
//
// Max pooling's rules (the CPU reference's too): padding is never the maximum; on ties the
// first maximum in row-major window order wins; a NaN wins over any number, and the first NaN
// over later ones. The saved index is the offset iy·w + ix in the input plane, as PyTorch's.
//
// Each kernel is a template over the element type T of x, y, dy and dx (float, __half,
// __nv_bfloat16): elements widen to f32 as they are read (common/half.cuh), averages and
// gradient sums run in f32, and each output rounds once. The names end in _f32, _f16 or _bf16.
#include "common/common.cuh"
#include "common/half.cuh"

struct PoolArgs {
    long long n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

template <typename T>
__device__ __forceinline__ void max_pool2d(const T* __restrict__ x, T* __restrict__ y, long long* __restrict__ idx,
                                           PoolArgs a) {
    CAMEL_PDL_WAIT();
    const long long total = a.n * a.c * a.oh * a.ow;
    GRID_STRIDE_LOOP(i, total) {
        const long long ox = i % a.ow, t = i / a.ow;
        const long long oy = t % a.oh, plane = t / a.oh;
        const T* xp = x + plane * a.h * a.w;
        const long long y0 = oy * a.sh - a.ph, x0 = ox * a.sw - a.pw;
        float best = -INFINITY;
        long long bi = -1;
        for (long long ky = 0; ky < a.kh; ++ky) {
            const long long iy = y0 + ky;
            if (iy < 0 || iy >= a.h) continue;
            for (long long kx = 0; kx < a.kw; ++kx) {
                const long long ix = x0 + kx;
                if (ix < 0 || ix >= a.w) continue;
                const float v = camel::to_float(xp[iy * a.w + ix]);
                if (bi < 0 || v > best || (v != v && best == best)) {
                    best = v;
                    bi = iy * a.w + ix;
                }
            }
        }
        y[i] = camel::from_float<T>(best);  // a widened element: rounds back to itself
        idx[i] = bi;
    }
}

template <typename T>
__device__ __forceinline__ void max_pool2d_bwd(const T* __restrict__ dy, const long long* __restrict__ idx,
                                               T* __restrict__ dx, PoolArgs a) {
    CAMEL_PDL_WAIT();
    const long long total = a.n * a.c * a.h * a.w;
    GRID_STRIDE_LOOP(i, total) {
        const long long ix = i % a.w, t = i / a.w;
        const long long iy = t % a.h, plane = t / a.h;
        const long long me = iy * a.w + ix;
        const long long ylo_n = iy + a.ph - a.kh + 1, xlo_n = ix + a.pw - a.kw + 1;
        const long long oy0 = ylo_n <= 0 ? 0 : camel::ceil_div(ylo_n, a.sh);
        const long long ox0 = xlo_n <= 0 ? 0 : camel::ceil_div(xlo_n, a.sw);
        const long long oy1 = min((iy + a.ph) / a.sh, a.oh - 1), ox1 = min((ix + a.pw) / a.sw, a.ow - 1);
        const long long base = plane * a.oh * a.ow;
        float s = 0.f;
        for (long long oy = oy0; oy <= oy1; ++oy)
            for (long long ox = ox0; ox <= ox1; ++ox) {
                const long long o = base + oy * a.ow + ox;
                if (idx[o] == me) s += camel::to_float(dy[o]);
            }
        dx[i] = camel::from_float<T>(s);
    }
}

// The divisor of output (oy, ox): the window's size, or with count_include_pad off the input
// elements it covers.
__device__ __forceinline__ float avg_divisor(const PoolArgs& a, long long oy, long long ox, int cip) {
    if (cip) return (float)(a.kh * a.kw);
    const long long y0 = oy * a.sh - a.ph, x0 = ox * a.sw - a.pw;
    const long long hy = min(y0 + a.kh, a.h) - max(y0, 0LL), hx = min(x0 + a.kw, a.w) - max(x0, 0LL);
    return (float)(hy * hx);
}

template <typename T>
__device__ __forceinline__ void avg_pool2d(const T* __restrict__ x, T* __restrict__ y, PoolArgs a, int cip) {
    CAMEL_PDL_WAIT();
    const long long total = a.n * a.c * a.oh * a.ow;
    GRID_STRIDE_LOOP(i, total) {
        const long long ox = i % a.ow, t = i / a.ow;
        const long long oy = t % a.oh, plane = t / a.oh;
        const T* xp = x + plane * a.h * a.w;
        const long long y0 = oy * a.sh - a.ph, x0 = ox * a.sw - a.pw;
        float s = 0.f;
        for (long long iy = max(y0, 0LL); iy < min(y0 + a.kh, a.h); ++iy)
            for (long long ix = max(x0, 0LL); ix < min(x0 + a.kw, a.w); ++ix) s += camel::to_float(xp[iy * a.w + ix]);
        y[i] = camel::from_float<T>(s / avg_divisor(a, oy, ox, cip));
    }
}

template <typename T>
__device__ __forceinline__ void avg_pool2d_bwd(const T* __restrict__ dy, T* __restrict__ dx, PoolArgs a, int cip) {
    CAMEL_PDL_WAIT();
    const long long total = a.n * a.c * a.h * a.w;
    GRID_STRIDE_LOOP(i, total) {
        const long long ix = i % a.w, t = i / a.w;
        const long long iy = t % a.h, plane = t / a.h;
        const long long ylo_n = iy + a.ph - a.kh + 1, xlo_n = ix + a.pw - a.kw + 1;
        const long long oy0 = ylo_n <= 0 ? 0 : camel::ceil_div(ylo_n, a.sh);
        const long long ox0 = xlo_n <= 0 ? 0 : camel::ceil_div(xlo_n, a.sw);
        const long long oy1 = min((iy + a.ph) / a.sh, a.oh - 1), ox1 = min((ix + a.pw) / a.sw, a.ow - 1);
        const long long base = plane * a.oh * a.ow;
        float s = 0.f;
        for (long long oy = oy0; oy <= oy1; ++oy)
            for (long long ox = ox0; ox <= ox1; ++ox)
                s += camel::to_float(dy[base + oy * a.ow + ox]) / avg_divisor(a, oy, ox, cip);
        dx[i] = camel::from_float<T>(s);
    }
}

#define POOL(T, SUF)                                                                                        \
    extern "C" __global__ void max_pool2d_##SUF(const T* __restrict__ x, T* __restrict__ y,                 \
                                                long long* __restrict__ idx, PoolArgs a) {                  \
        max_pool2d<T>(x, y, idx, a);                                                                        \
    }                                                                                                       \
    extern "C" __global__ void max_pool2d_bwd_##SUF(const T* __restrict__ dy, const long long* __restrict__ idx, \
                                                    T* __restrict__ dx, PoolArgs a) {                       \
        max_pool2d_bwd<T>(dy, idx, dx, a);                                                                  \
    }                                                                                                       \
    extern "C" __global__ void avg_pool2d_##SUF(const T* __restrict__ x, T* __restrict__ y, PoolArgs a, int cip) { \
        avg_pool2d<T>(x, y, a, cip);                                                                        \
    }                                                                                                       \
    extern "C" __global__ void avg_pool2d_bwd_##SUF(const T* __restrict__ dy, T* __restrict__ dx, PoolArgs a,  \
                                                    int cip) {                                              \
        avg_pool2d_bwd<T>(dy, dx, a, cip);                                                                  \
    }

POOL(float, f32)
POOL(__half, f16)
POOL(__nv_bfloat16, bf16)
