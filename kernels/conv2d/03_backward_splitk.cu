// Step 3 of the conv2d ladder: a backward for small channel counts, staged per image in shared
// memory. The forward is step 2's implicit GEMM; both gradients change.
//
// The weight gradient is a GEMM with a tiny output (O/g × C/g·kh·kw: 6 × 25 and 16 × 150 at
// LeNet's layers) and a huge inner dimension (N·OH·OW: 200 704 and 25 600), so a tiled GEMM
// over the output has a handful of blocks to give out. Here the inner dimension is split over
// the images instead (split-K): a block takes every gridDim.x-th image of one group, stages the
// image's input planes and upstream-gradient planes in shared memory, and each thread sums the
// products of its weight entries over the image's output pixels into a shared accumulator. The
// block's partial [O/g, C/g·kh·kw] goes to a workspace row, and conv2d_wgrad_reduce_f32 adds the
// rows in a fixed order: no atomics, the same sum on every run. When one image's entries are
// many for a block (2400 at LeNet's second layer), gridDim.z blocks share them, each staging the
// image itself.
//
// The input gradient is the transposed convolution computed directly: a block stages a group's
// weights once and an image's upstream-gradient planes per image; a thread owns one input pixel
// and CT of the group's input channels, visits the taps whose output pixel reads it (those whose
// stride divides the offset) and, per tap, multiplies one upstream value by CT weights (all
// read from shared memory, the weights as broadcasts across the warp). gridDim.z blocks share an
// image's pixels, so that a small batch still fills the GPU. At stride 1 (LeNet's, and most
// layers') the dy planes are staged zero-padded and a thread computes 4 rows of its column: no
// tap is bounds-checked, and each weight read feeds 4 FMAs.
//
// The launcher runs these kernels when a block's planes fit SMEM_FLOATS floats (48 KiB) and
// falls back to step 2's input gradient and step 1's weight gradient otherwise.
#include "conv2d.cuh"

// The output index o = t / s when t ≥ 0, s divides t and o < lim; −1 otherwise.
__device__ __forceinline__ int conv_tap_src(int t, int s, int lim) {
    if (t < 0) return -1;
    const int o = s == 1 ? t : t / s;
    return (o * s == t && o < lim) ? o : -1;
}

// The first and one-past-last output index o < lim with 0 ≤ o·s + off < len (an empty range when
// there is none).
__device__ __forceinline__ void conv_out_range(int off, int s, int len, int lim, int& lo, int& hi) {
    lo = off >= 0 ? 0 : (-off + s - 1) / s;
    const int top = len - 1 - off;
    hi = top < 0 ? 0 : min(lim, top / s + 1);
    if (hi < lo) hi = lo;
}

// dx of one group, CT channels a thread. Shared memory: the group's weights [og][cg][kh][kw],
// then one image's dy planes [og][oh·ow].
template <int CT>
__device__ __forceinline__ void dgrad_direct(const float* __restrict__ dy, const float* __restrict__ w,
                                             float* __restrict__ dx, const ConvArgs& a) {
    extern __shared__ float smem[];
    const int cg_n = (int)(a.c / a.groups), og = (int)(a.o / a.groups);
    const int KH = (int)a.kh, KW = (int)a.kw, khw = KH * KW, kg = cg_n * khw;
    const int H = (int)a.h, W = (int)a.w, OH = (int)a.oh, OW = (int)a.ow, P = OH * OW, HW = H * W;
    const int SH = (int)a.sh, SW = (int)a.sw, PH = (int)a.ph, PW = (int)a.pw, DH = (int)a.dh, DW = (int)a.dw;
    const long long g = blockIdx.y;
    float* ws = smem;
    float* dys = smem + og * kg;
    const float* wg = w + g * og * (long long)kg;
    for (int i = threadIdx.x; i < og * kg; i += blockDim.x) ws[i] = wg[i];
    // the image's (pixel, channel tile) items, split evenly over the gridDim.z blocks along z
    const int items = (cg_n + CT - 1) / CT * HW;
    const int chunk = (items + gridDim.z - 1) / gridDim.z, it0 = blockIdx.z * chunk;
    const int it1 = min(items, it0 + chunk);
    for (long long img = blockIdx.x; img < a.n; img += gridDim.x) {
        __syncthreads();  // the weights are staged and the previous image's planes are read
        const float* dyi = dy + (img * a.o + g * og) * P;
        for (int i = threadIdx.x; i < og * P; i += blockDim.x) dys[i] = dyi[i];
        __syncthreads();
        float* dxi = dx + (img * a.c + g * cg_n) * HW;
        for (int it = it0 + threadIdx.x; it < it1; it += blockDim.x) {
            const int p = it % HW, c0 = it / HW * CT;
            const int iy = p / W, ix = p % W;
            int wc[CT];  // weight offsets of the thread's channels (clamped into the group)
            float acc[2][CT];  // even and odd upstream channels: two independent FMA chains
#pragma unroll
            for (int j = 0; j < CT; ++j) {
                wc[j] = min(c0 + j, cg_n - 1) * khw;
                acc[0][j] = acc[1][j] = 0.f;
            }
            for (int ki = 0; ki < KH; ++ki) {
                const int oy = conv_tap_src(iy + PH - ki * DH, SH, OH);
                if (oy < 0) continue;
                for (int kj = 0; kj < KW; ++kj) {
                    const int ox = conv_tap_src(ix + PW - kj * DW, SW, OW);
                    if (ox < 0) continue;
                    const float* d = dys + oy * OW + ox;
                    const float* wt = ws + ki * KW + kj;
                    int m = 0;
#pragma unroll 2
                    for (; m + 1 < og; m += 2) {
                        const float v0 = d[m * P], v1 = d[(m + 1) * P];
                        const float* w0 = wt + m * kg;
                        const float* w1 = w0 + kg;
#pragma unroll
                        for (int j = 0; j < CT; ++j) {
                            acc[0][j] = fmaf(w0[wc[j]], v0, acc[0][j]);
                            acc[1][j] = fmaf(w1[wc[j]], v1, acc[1][j]);
                        }
                    }
                    if (m < og) {
                        const float v0 = d[m * P];
                        const float* w0 = wt + m * kg;
#pragma unroll
                        for (int j = 0; j < CT; ++j) acc[0][j] = fmaf(w0[wc[j]], v0, acc[0][j]);
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < CT; ++j)
                if (c0 + j < cg_n) dxi[(c0 + j) * HW + p] = acc[0][j] + acc[1][j];
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) conv2d_dgrad_direct_c1_f32(const float* dy, const float* w,
                                                                             float* dx, ConvArgs a) {
    CAMEL_PDL_WAIT();
    dgrad_direct<1>(dy, w, dx, a);
}

extern "C" __global__ void __launch_bounds__(256) conv2d_dgrad_direct_c2_f32(const float* dy, const float* w,
                                                                             float* dx, ConvArgs a) {
    CAMEL_PDL_WAIT();
    dgrad_direct<2>(dy, w, dx, a);
}

extern "C" __global__ void __launch_bounds__(256) conv2d_dgrad_direct_c3_f32(const float* dy, const float* w,
                                                                             float* dx, ConvArgs a) {
    CAMEL_PDL_WAIT();
    dgrad_direct<3>(dy, w, dx, a);
}

extern "C" __global__ void __launch_bounds__(256) conv2d_dgrad_direct_c4_f32(const float* dy, const float* w,
                                                                             float* dx, ConvArgs a) {
    CAMEL_PDL_WAIT();
    dgrad_direct<4>(dy, w, dx, a);
}

// dx of one group at stride 1, RX rows × CT channels a thread: the same sum, with the image's
// dy planes staged zero-padded ([og][ohp][owp], the halo ht rows above and hl columns left, and
// enough below and right for every tap of every row a thread computes), so a tap needs no
// bounds check, and each (tap, upstream channel) costs CT weight reads (broadcasts) and RX dy
// reads (consecutive across the warp) for RX·CT FMAs.
template <int CT, int RX>
__device__ __forceinline__ void dgrad_s1(const float* __restrict__ dy, const float* __restrict__ w,
                                         float* __restrict__ dx, const ConvArgs& a, int ht, int hl, int ohp,
                                         int owp) {
    extern __shared__ float smem[];
    const int cg_n = (int)(a.c / a.groups), og = (int)(a.o / a.groups);
    const int KH = (int)a.kh, KW = (int)a.kw, khw = KH * KW, kg = cg_n * khw;
    const int H = (int)a.h, W = (int)a.w, OH = (int)a.oh, OW = (int)a.ow, P = OH * OW, HW = H * W;
    const int PH = (int)a.ph, PW = (int)a.pw, DH = (int)a.dh, DW = (int)a.dw, PP = ohp * owp;
    const long long g = blockIdx.y;
    float* ws = smem;
    float* dys = smem + og * kg;
    const float* wg = w + g * og * (long long)kg;
    for (int i = threadIdx.x; i < og * kg; i += blockDim.x) ws[i] = wg[i];
    const int rgs = (H + RX - 1) / RX, items = (cg_n + CT - 1) / CT * rgs * W;
    const int chunk = (items + gridDim.z - 1) / gridDim.z, it0 = blockIdx.z * chunk;
    const int it1 = min(items, it0 + chunk);
    for (long long img = blockIdx.x; img < a.n; img += gridDim.x) {
        __syncthreads();  // the weights are staged and the previous image's planes are read
        const float* dyi = dy + (img * a.o + g * og) * P;
        for (int i = threadIdx.x; i < og * PP; i += blockDim.x) {
            const int m = i / PP, r = i % PP, oy = r / owp - ht, ox = r % owp - hl;
            dys[i] = ((unsigned)oy < (unsigned)OH && (unsigned)ox < (unsigned)OW) ? dyi[m * P + oy * OW + ox] : 0.f;
        }
        __syncthreads();
        float* dxi = dx + (img * a.c + g * cg_n) * HW;
        for (int it = it0 + threadIdx.x; it < it1; it += blockDim.x) {
            const int ix = it % W, t = it / W, iy0 = t % rgs * RX, c0 = t / rgs * CT;
            int wc[CT];
            float acc[RX][CT];
#pragma unroll
            for (int j = 0; j < CT; ++j) {
                wc[j] = min(c0 + j, cg_n - 1) * khw;
#pragma unroll
                for (int r = 0; r < RX; ++r) acc[r][j] = 0.f;
            }
            // dy row oy + ht and column ox + hl of tap (0, 0); tap (ki, kj) is ki·dh rows up and
            // kj·dw columns left
            const float* d0 = dys + (iy0 + PH + ht) * owp + ix + PW + hl;
            for (int ki = 0; ki < KH; ++ki) {
                for (int kj = 0; kj < KW; ++kj) {
                    const float* d = d0 - ki * DH * owp - kj * DW;
                    const float* wt = ws + ki * KW + kj;
                    for (int m = 0; m < og; ++m, d += PP, wt += kg) {
                        float v[RX], wv[CT];
#pragma unroll
                        for (int r = 0; r < RX; ++r) v[r] = d[r * owp];
#pragma unroll
                        for (int j = 0; j < CT; ++j) wv[j] = wt[wc[j]];
#pragma unroll
                        for (int r = 0; r < RX; ++r)
#pragma unroll
                            for (int j = 0; j < CT; ++j) acc[r][j] = fmaf(wv[j], v[r], acc[r][j]);
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < RX; ++r) {
                if (iy0 + r >= H) break;
#pragma unroll
                for (int j = 0; j < CT; ++j)
                    if (c0 + j < cg_n) dxi[(c0 + j) * HW + (iy0 + r) * W + ix] = acc[r][j];
            }
        }
    }
}

#define DGRAD_S1(CT)                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) conv2d_dgrad_s1_c##CT##_f32(                            \
        const float* dy, const float* w, float* dx, ConvArgs a, int ht, int hl, int ohp, int owp) {          \
        CAMEL_PDL_WAIT();                                                                                      \
        dgrad_s1<CT, 4>(dy, w, dx, a, ht, hl, ohp, owp);                                                       \
    }
DGRAD_S1(1)
DGRAD_S1(2)
DGRAD_S1(3)
DGRAD_S1(4)

// part[blockIdx.x][g][e] = Σ over the block's images and their output pixels of
// dy[img, g·og + m, oy, ox] · x[img, g·cg + c, oy·sh − ph + ki·dh, ox·sw − pw + kj·dw], for the
// weight entries e = m·kg + (c·kh + ki)·kw + kj of group g = blockIdx.y in the block's part
// (blockIdx.z of gridDim.z equal ranges). Shared memory: the accumulators [og·kg], then one
// image's x planes [cg][h·w] and dy planes [og][oh·ow].
extern "C" __global__ void __launch_bounds__(256) conv2d_wgrad_partial_f32(const float* __restrict__ dy,
                                                                           const float* __restrict__ x,
                                                                           float* __restrict__ part, ConvArgs a) {
    CAMEL_PDL_WAIT();
    // a name of its own: in an extern "C" kernel `smem` would take C linkage, against the C++
    // linkage the helpers above give it (any name is the block's one dynamic allocation)
    extern __shared__ float wsmem[];
    const int cg_n = (int)(a.c / a.groups), og = (int)(a.o / a.groups);
    const int KH = (int)a.kh, KW = (int)a.kw, khw = KH * KW, kg = cg_n * khw, E = og * kg;
    const int H = (int)a.h, W = (int)a.w, OH = (int)a.oh, OW = (int)a.ow, P = OH * OW, HW = H * W;
    const int SH = (int)a.sh, SW = (int)a.sw, PH = (int)a.ph, PW = (int)a.pw, DH = (int)a.dh, DW = (int)a.dw;
    const long long g = blockIdx.y;
    const int chunk = (E + gridDim.z - 1) / gridDim.z, e0 = blockIdx.z * chunk, e1 = min(E, e0 + chunk);
    float* acc = wsmem;
    float* xs = acc + E;
    float* dys = xs + cg_n * HW;
    // each thread owns the entries e ≡ e0 + threadIdx.x (mod blockDim.x): acc needs no barrier
    for (int e = e0 + threadIdx.x; e < e1; e += blockDim.x) acc[e] = 0.f;
    for (long long img = blockIdx.x; img < a.n; img += gridDim.x) {
        __syncthreads();  // the previous image's planes are read
        const float* xi = x + (img * a.c + g * cg_n) * HW;
        for (int i = threadIdx.x; i < cg_n * HW; i += blockDim.x) xs[i] = xi[i];
        const float* dyi = dy + (img * a.o + g * og) * P;
        for (int i = threadIdx.x; i < og * P; i += blockDim.x) dys[i] = dyi[i];
        __syncthreads();
        for (int e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
            const int m = e / kg, k = e % kg, c = k / khw, r = k % khw, ki = r / KW, kj = r % KW;
            const int offy = ki * DH - PH, offx = kj * DW - PW;
            int oy0, oy1, ox0, ox1;
            conv_out_range(offy, SH, H, OH, oy0, oy1);
            conv_out_range(offx, SW, W, OW, ox0, ox1);
            float s0 = 0.f, s1 = 0.f;  // even and odd columns: two independent FMA chains
            if (ox0 < ox1) {
                const float* xr = xs + c * HW + (oy0 * SH + offy) * W + ox0 * SW + offx;
                const float* dr = dys + m * P + oy0 * OW + ox0;
                const int nx = ox1 - ox0;
                for (int oy = oy0; oy < oy1; ++oy, xr += SH * W, dr += OW) {
                    int t = 0;
                    for (; t + 1 < nx; t += 2) {
                        s0 = fmaf(dr[t], xr[t * SW], s0);
                        s1 = fmaf(dr[t + 1], xr[(t + 1) * SW], s1);
                    }
                    if (t < nx) s0 = fmaf(dr[t], xr[t * SW], s0);
                }
            }
            acc[e] += s0 + s1;
        }
    }
    float* out = part + ((long long)blockIdx.x * a.groups + g) * E;
    for (int e = e0 + threadIdx.x; e < e1; e += blockDim.x) out[e] = acc[e];
}

// dw[i] = Σ_{s < splits} part[s][i] for 32 columns i a block: each of its 8 warps sums the rows
// s ≡ warp (mod 8) in order, and the first warp adds the 8 sums in warp order: a fixed order
// whatever the scheduling.
extern "C" __global__ void __launch_bounds__(256) conv2d_wgrad_reduce_f32(const float* __restrict__ part,
                                                                          float* __restrict__ dw, long long splits,
                                                                          long long len) {
    CAMEL_PDL_WAIT();
    __shared__ float sums[8][32];
    const int lane = threadIdx.x % 32, row = threadIdx.x / 32;
    const long long i = (long long)blockIdx.x * 32 + lane;
    float s = 0.f;
    if (i < len)
        for (long long k = row; k < splits; k += 8) s += part[k * len + i];
    sums[row][lane] = s;
    __syncthreads();
    if (row == 0 && i < len) {
        float t = sums[0][lane];
#pragma unroll
        for (int r = 1; r < 8; ++r) t += sums[r][lane];
        dw[i] = t;
    }
}
