// Image filter, step 6: the separable passes fused into one kernel. Step 5 writes the row pass's
// intermediate image to global memory and reads it back in a second launch: two passes over the
// image, twice the DRAM traffic of the filter itself. Here a block keeps its piece of the
// intermediate in shared memory, so one launch reads the image once and writes the output once.
// The price is the apron of the column pass: the 2r intermediate rows above and below a block's
// output tile are row passes its neighbours compute too, so a block recomputes them (and loads
// their input) rather than exchange them. A tall tile keeps that share small: (64 + 2r) / 64 row
// passes per output row, 1.25x at r = 8. The halo reads of neighbouring blocks, which run at the
// same time, are served by L2 (a 2048 x 2048 image and its output, 16 MiB each, fit together in
// an L2 of more than 32 MiB), so DRAM sees each pixel read once.
//
// A block of 32 x 8 threads computes a tile of 128 columns x 64 rows:
// - load: the (64 + 2r) x (128 + 2R4) input tile (R4 = r rounded up to a multiple of 4, so a row
//   is whole float4s) goes straight into shared memory with cp.async: no staging registers, every
//   copy of a thread in flight at once, pixels outside the image zero-filled by the copy itself.
//   Consecutive threads copy consecutive 16-byte pieces (or 4-byte pixels where the image's rows
//   are not 16-byte aligned), and the tile's rows are contiguous in shared memory, so the stores
//   are conflict-free too.
// - row pass: a warp per tile row, each thread four adjacent outputs. It reads its 4 + 2R4 window
//   pixels as float4s (a warp's read is 512 contiguous bytes: conflict-free) and applies the taps
//   from registers: 1 + R4/2 float4 loads per four outputs instead of 2r + 1 loads per output. The
//   intermediate row overwrites its input row in place (a row's reads all precede its writes, and
//   a warp owns the row), so the block needs one buffer: 45 KiB at r = 8, four blocks per SM.
// - column pass: a thread computes 32 vertically adjacent outputs of one column, streaming its
//   32 + 2r intermediate pixels from shared memory through registers (a warp reads 32 consecutive
//   floats of a row: conflict-free), and stores them, a warp's stores one 128-byte row segment.
// The sums are step 5's, tap for tap in the same order, so the two steps agree to the bit.

#include "common/cp_async.cuh"
#include "filter/filter.cuh"

#define BX 32
#define BY 8
#define FUSED_TW (4 * BX)  // output columns a block: four a thread in the row pass
#define FUSED_TH 64        // output rows a block
#define FUSED_CB 32        // outputs a thread in the column pass

template <int R>
__device__ __forceinline__ void filter_fused(const float* __restrict__ x, const float* __restrict__ v,
                                             const float* __restrict__ c, float* __restrict__ y, int H,
                                             int W) {
    constexpr int K = 2 * R + 1;
    constexpr int R4 = (R + 3) / 4 * 4;      // the horizontal apron, whole float4s
    constexpr int SW = FUSED_TW + 2 * R4;    // shared row stride (floats), a multiple of 4
    constexpr int SH = FUSED_TH + 2 * R;     // tile rows: the output rows and their apron
    constexpr int NW = 4 + 2 * R4;           // a thread's row-pass window
    static_assert(FUSED_TH % FUSED_CB == 0 && (FUSED_TW / BX) * (FUSED_TH / FUSED_CB) == BY,
                  "the column pass gives each warp one 32-column x FUSED_CB-row piece");
    // tile[i][j] = x[y0 - R + i][x0 - R4 + j]; after the row pass tile[i][j] (j < FUSED_TW) is the
    // intermediate t[y0 - R + i][x0 + j]
    __shared__ __align__(16) float tile[SH * SW];
    const int tid = threadIdx.y * BX + threadIdx.x, lane = threadIdx.x;
    const int x0 = blockIdx.x * FUSED_TW, y0 = blockIdx.y * FUSED_TH;

    // load: element e of the flat tile is pixel (y0 - R + e / SW, x0 - R4 + e % SW)
    const bool vec = (W % 4 == 0) && ((unsigned long long)x % 16 == 0);
    if (vec) {
        // x0 - R4 and W are multiples of 4: a float4 lies wholly inside or outside the image
#pragma unroll 4
        for (int e = tid; e < SH * SW / 4; e += BX * BY) {
            const int gr = y0 - R + e / (SW / 4), gc = x0 - R4 + 4 * (e % (SW / 4));
            const bool ok = gr >= 0 && gr < H && gc >= 0 && gc < W;
            camel::cp_async16(tile + 4 * e, ok ? x + (long long)gr * W + gc : x, ok ? 16 : 0);
        }
    } else {
#pragma unroll 4
        for (int e = tid; e < SH * SW; e += BX * BY) {
            const int gr = y0 - R + e / SW, gc = x0 - R4 + e % SW;
            const bool ok = gr >= 0 && gr < H && gc >= 0 && gc < W;
            camel::cp_async4(tile + e, ok ? x + (long long)gr * W + gc : x, ok);
        }
    }
    camel::cp_async_commit();
    float taps[K];
#pragma unroll
    for (int b = 0; b < K; b++) taps[b] = __ldg(v + b);
    camel::cp_async_wait<0>();
    __syncthreads();

    // row pass: warp threadIdx.y takes tile rows threadIdx.y, + 8, ...; lane its columns 4 lane … + 3
    for (int i = threadIdx.y; i < SH; i += BY) {
        float* srow = tile + i * SW;
        const int gr = y0 - R + i;
        float out[4];
        if (gr >= 0 && gr < H) {
            float win[NW];
#pragma unroll
            for (int m = 0; m < NW / 4; m++) {
                const float4 p = reinterpret_cast<const float4*>(srow)[lane + m];
                win[4 * m] = p.x;
                win[4 * m + 1] = p.y;
                win[4 * m + 2] = p.z;
                win[4 * m + 3] = p.w;
            }
#pragma unroll
            for (int q = 0; q < 4; q++) {
                float acc = 0.0f;
#pragma unroll
                for (int b = 0; b < K; b++) acc = fmaf(taps[b], win[q + R4 - R + b], acc);
                out[q] = acc;
            }
        } else {
            // rows outside the image are 0 in the intermediate (step 5's column pass reads them
            // as padding), whatever the taps: an infinite tap times a zero pixel is not 0
#pragma unroll
            for (int q = 0; q < 4; q++) out[q] = 0.0f;
        }
        __syncwarp();  // every lane has read the row before any lane overwrites it
        reinterpret_cast<float4*>(srow)[lane] = make_float4(out[0], out[1], out[2], out[3]);
    }
#pragma unroll
    for (int a = 0; a < K; a++) taps[a] = __ldg(c + a);
    __syncthreads();

    // column pass: warp w takes columns 32 (w % 4) … + 31 and output rows FUSED_CB (w / 4) …
    // + FUSED_CB - 1
    const int col = (threadIdx.y % (FUSED_TW / BX)) * BX + lane;
    const int r0 = (threadIdx.y / (FUSED_TW / BX)) * FUSED_CB;
    float acc[FUSED_CB];
#pragma unroll
    for (int j = 0; j < FUSED_CB; j++) acc[j] = 0.0f;
    // tile row r0 + s feeds output row r0 + j through tap a = s - j
    const float* scol = tile + r0 * SW + col;
#pragma unroll
    for (int s = 0; s < FUSED_CB + 2 * R; s++) {
        const float p = scol[s * SW];
#pragma unroll
        for (int j = 0; j < FUSED_CB; j++) {
            if (s - j >= 0 && s - j < K) acc[j] = fmaf(taps[s - j], p, acc[j]);
        }
    }
    const int gc = x0 + col;
    if (gc >= W) return;
#pragma unroll
    for (int j = 0; j < FUSED_CB; j++) {
        const int gr = y0 + r0 + j;
        if (gr < H) y[(long long)gr * W + gc] = acc[j];
    }
}

// At least four blocks an SM (64 registers a thread, 45 KiB of shared memory each at r = 8): a
// 2048 x 2048 image's 512 blocks are then resident at once on a GPU of 128 SMs or more.
#define FILTER_FUSED(R)                                                                                 \
    extern "C" __global__ void __launch_bounds__(BX* BY, 4)                                             \
        filter_fused_r##R(const float* __restrict__ x, const float* __restrict__ row,                   \
                          const float* __restrict__ col, float* __restrict__ y, int H, int W) {         \
        CAMEL_PDL_WAIT();                                                                               \
        filter_fused<R>(x, row, col, y, H, W);                                                          \
    }

FILTER_RADII(FILTER_FUSED)
