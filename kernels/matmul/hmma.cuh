// The tensor-core GEMM for 16-bit inputs (HGEMM, steps 14–16). Every step computes, for each
// batch b = blockIdx.z,
//   C[b] = act(op(A[b]) · op(B[b]) + bias)    (C is M×N row-major)
// with A, B, C, bias and Z of one element type T (__half or __nv_bfloat16), products and sums
// in f32 on the tensor cores, and one rounding to T where C is stored. The transposes are
// compile-time: each step has four kernels, `_nn`, `_nt`, `_tn`, `_tt` (first letter A, second
// B; `t` = stored transposed, as in common_gemm.cuh).
//
// The building blocks, shared by the three steps:
// - `mma.sync.m16n8k16`: one warp multiplies a 16×16 tile of A by a 16×8 tile of B into a 16×8
//   f32 accumulator; each thread holds a fixed scatter of the operands in registers (fragments).
// - `ldmatrix.x4`: one warp loads four 8×8 16-bit matrices from shared memory straight into the
//   fragment layout (`.trans` transposes them on the way), one 16-byte row address a lane. So an
//   operand stored in either orientation feeds the same `mma`: the shared tile keeps the
//   global layout (contiguous dimension along the shared rows) and `.trans` is chosen per layout.
// - Global → shared memory in 16-byte chunks of eight elements, zero-filled outside the matrix.
//   An operand whose rows are not 16-byte aligned (a leading dimension not a multiple of 8, or an
//   odd base or batch stride) is loaded element by element: correct at any shape, fast where
//   the data allows.
//
// What the steps change (template flags below):
//   14: mma.sync + ldmatrix, a plain row-major shared tile, loads through registers into two
//       shared buffers (step 11's scheme). ldmatrix's eight row addresses of one 8×8 matrix fall
//       in the same banks: 4- to 8-way bank conflicts.
//   15: the same with the 16-byte chunks of each shared row XOR-swizzled by the row index, so the
//       eight rows of every ldmatrix phase hit eight distinct 16-byte bank groups.
//   16: cp.async (global → shared without registers), every stage in flight, the fragments of
//       step kk + 1 loaded before the mma of step kk, a 128×256 block tile with 64×64 warp
//       tiles, blocks ordered in groups of 8 tile rows for L2 reuse, and C staged through shared
//       memory into 16-byte row stores.
#pragma once

#include "common/cp_async.cuh"
#include "common/half.cuh"
#include "common_gemm.cuh"  // CAMEL_PDL_WAIT, gelu_tanh

// The arguments of every HGEMM kernel (T: __half or __nv_bfloat16). Batch strides of 0
// broadcast one matrix; bias (N elements, null = none), Z (the pre-activation, like C, null =
// none) and act (0 none, 1 ReLU, 2 GELU) as in common_gemm.cuh.
// Split-K: with k_split > 0, K is cut into S = ⌈K / k_split⌉ ranges (k_split a multiple of 32),
// blockIdx.z = batch · S + split, and each block writes its raw f32 sums to the workspace P,
// laid out [split][batch·M·N]; `hgemm_splitk_reduce` then adds the splits in order, applies the
// epilogue and rounds once. With k_split = 0, P is unused and C gets the result directly.
#define HGEMM_ARGS(T)                                                                        \
    const T *__restrict__ A, const T *__restrict__ B, T *__restrict__ C, int M, int N, int K, \
        long long strideA, long long strideB, long long strideC, const T *__restrict__ bias, \
        int act, T *__restrict__ Z, float *__restrict__ P, int k_split
#define HGEMM_CALL_ARGS A, B, C, M, N, K, strideA, strideB, strideC, bias, act, Z, P, k_split

namespace hgemm {

typedef unsigned short u16;

// Offset of element (r, c) in a shared tile of rows W elements wide (W/8 chunks of 16 bytes).
// Swizzled: the chunk index is XORed with bits of the row so that eight consecutive rows at the
// same logical chunk land in eight distinct 16-byte slots of a 128-byte bank line.
template <int W, bool SWZ>
__device__ __forceinline__ int tile_off(int r, int c) {
    constexpr int CH = W / 8;
    int ch = c >> 3;
    if constexpr (SWZ) {
        constexpr int RPL = CH >= 8 ? 1 : 8 / CH;     // rows sharing one 128-byte line
        constexpr int MASK = (CH >= 8 ? 8 : CH) - 1;  // chunk bits that can be permuted
        ch ^= (r / RPL) & MASK;
    }
    return r * W + ch * 8 + (c & 7);
}

// Where a thread's ldmatrix rows lie in a W-wide tile (tile_off, swizzled or not), as
// shared-memory byte offsets: the thread addresses row rbase + rl, columns cbase + cl … + 7,
// with rbase and cbase multiples of 16 known at compile time once the loops unroll, and rl, cl
// its own (cl may hold a warp's multiple of 64 too). The swizzle XORs the low chunk bits with
// bits of rl alone, so a load's offset is one of NV per-thread bases (by cbase's low chunk bits)
// plus a constant: no address arithmetic a load.
template <int W, bool SWZ = true>
struct SwzRows {
    static constexpr int CH = W / 8, RPL = CH >= 8 ? 1 : 8 / CH;
    static constexpr int MASK = SWZ ? (CH >= 8 ? 8 : CH) - 1 : 0, NV = SWZ ? (MASK + 1) / 2 : 1;
    unsigned base[NV];
    __device__ __forceinline__ SwzRows(int rl, int cl) {
#pragma unroll
        for (int v = 0; v < NV; ++v) base[v] = 2 * (rl * W + 8 * ((2 * v + cl / 8) ^ ((rl / RPL) & MASK)));
    }
    __device__ __forceinline__ unsigned at(int rbase, int cbase) const {
        return base[(cbase / 16) % NV] + 2 * (rbase * W + 8 * ((cbase / 8) & ~MASK));
    }
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

// ldmatrix.x4 from the shared-memory address `addr` (callers that keep per-lane addresses).
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
}

template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const u16* p) {
    ldmatrix_x4<TRANS>(r, smem_addr(p));
}

template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const unsigned (&a)[4],
                                                 unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const unsigned (&a)[4],
                                                        unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// cp.async of one 16-byte chunk of which the first `bytes` are read and the rest zero-filled
// (`bytes` = 0 reads nothing; the source must still be a valid address, the matrix base).
__device__ __forceinline__ void cp_async16(u16* s, const u16* g, int bytes) { camel::cp_async16(s, g, bytes); }
using camel::cp_async_commit;
using camel::cp_async_wait;

// Elements (r, c .. c+7) of a row-major matrix X with leading dimension ld as one 16-byte word,
// zero outside rows × cols. `vec`: the rows are 16-byte aligned, so a whole chunk is one load.
__device__ __forceinline__ uint4 load_chunk(const u16* X, long long ld, int rows, int cols,
                                            int r, int c, bool vec) {
    camel::Half8 v;
    v.u = make_uint4(0, 0, 0, 0);
    if (r >= rows || c >= cols) return v.u;
    const u16* p = X + (long long)r * ld + c;
    if (vec && c + 8 <= cols) return *reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (c + e < cols) v.h[e] = p[e];
    return v.u;
}

// One operand's shared tile: R rows of W elements, the global matrix's contiguous dimension
// along the rows. `X` points at the tile's first element (row r0, column c0) so that the bounds
// are `rows - r0`, `cols - c0`.
template <int R, int W, int NT, bool SWZ>
struct Tile {
    static constexpr int CHUNKS = R * W / 8;
    static constexpr int PER = CHUNKS / NT;  // chunks a thread (the configurations divide)
    static_assert(CHUNKS % NT == 0, "tile chunks must divide among the threads");

    // Through registers (steps 14, 15): fetch into `r`, later store into a shared buffer.
    __device__ __forceinline__ static void fetch(uint4 (&v)[PER], const u16* X, long long ld,
                                                 int rows, int cols, bool vec, int tid) {
#pragma unroll
        for (int p = 0; p < PER; ++p) {
            const int e = tid + p * NT, r = e / (W / 8), c = (e % (W / 8)) * 8;
            v[p] = load_chunk(X, ld, rows, cols, r, c, vec);
        }
    }
    __device__ __forceinline__ static void store(u16* S, const uint4 (&v)[PER], int tid) {
#pragma unroll
        for (int p = 0; p < PER; ++p) {
            const int e = tid + p * NT, r = e / (W / 8), c = (e % (W / 8)) * 8;
            *reinterpret_cast<uint4*>(S + tile_off<W, SWZ>(r, c)) = v[p];
        }
    }
    // Straight to shared memory, for a tile wholly inside the matrix with 16-byte aligned rows
    // (step 16's common case): one cp.async a chunk, no bounds. A thread's chunks sit RS rows
    // apart, a multiple of 8 that keeps the swizzle, so its addresses are two offsets set once
    // (`src0` into the matrix from the tile's origin, `dst0` into the shared tile) plus p·RS rows.
    static constexpr int RS = NT / (W / 8);
    static_assert(RS % 8 == 0 || PER == 1, "a thread's chunks keep their swizzle");
    __device__ __forceinline__ static long long src0(int tid, long long ld) {
        return (long long)(tid / (W / 8)) * ld + (tid % (W / 8)) * 8;
    }
    __device__ __forceinline__ static int dst0(int tid) {
        return tile_off<W, SWZ>(tid / (W / 8), (tid % (W / 8)) * 8);
    }
    // `x`: the tile's origin plus src0; `s`: the shared tile plus dst0
    __device__ __forceinline__ static void copy_inside(u16* s, const u16* x, long long ld) {
#pragma unroll
        for (int p = 0; p < PER; ++p) cp_async16(s + p * RS * W, x + p * RS * ld, 16);
    }
    // Straight to shared memory (step 16): cp.async where the rows are aligned, else loads
    // through registers (the slow path for odd layouts).
    __device__ __forceinline__ static void copy_async(u16* S, const u16* X, const u16* base,
                                                      long long ld, int rows, int cols, bool vec,
                                                      int tid) {
#pragma unroll
        for (int p = 0; p < PER; ++p) {
            const int e = tid + p * NT, r = e / (W / 8), c = (e % (W / 8)) * 8;
            u16* s = S + tile_off<W, SWZ>(r, c);
            if (vec) {
                const bool in = r < rows && c < cols;
                const int n = in ? min(8, cols - c) : 0;
                cp_async16(s, in ? X + (long long)r * ld + c : base, 2 * n);
            } else {
                *reinterpret_cast<uint4*>(s) = load_chunk(X, ld, rows, cols, r, c, false);
            }
        }
    }
};

// Out of line, as gemm_epilogue_full: inlined at every store, GELU's tanhf bloats the PTX.
template <typename T>
__device__ __noinline__ float epilogue_full(float v, int j, long long idx, const T* bias, int act,
                                            T* Z) {
    if (bias) v += camel::to_float(bias[j]);
    if (Z) Z[idx] = camel::from_float<T>(v);
    if (act == 1) v = v > 0.0f ? v : (v != v ? v : 0.0f);  // ReLU; NaN stays NaN
    else if (act == 2) v = gelu_tanh(v);
    return v;
}
template <typename T>
__device__ __forceinline__ float epilogue(float v, int j, long long idx, const T* bias, int act,
                                          T* Z) {
    if (!bias && !Z && act == 0) return v;
    return epilogue_full(v, j, idx, bias, act, Z);
}

// A compile-time flag for a lambda's `auto` parameter (`Flag<true>{}`), so that one body makes
// two loops, each with its branch resolved.
template <bool B>
struct Flag {
    static constexpr bool value = B;
};

// Bias and activation of the pair of columns j, j + 1 of a tile that may reach past column N:
// only columns inside N (the bias holds N elements).
template <typename T>
__device__ __forceinline__ void epilogue_pair(float& v0, float& v1, int j, int N, const T* bias,
                                              int act) {
    if (j < N) v0 = epilogue_full(v0, j, 0, bias, act, (T*)nullptr);
    if (j + 1 < N) v1 = epilogue_full(v1, j + 1, 0, bias, act, (T*)nullptr);
}

// Stores the pair C[i][j], C[i][j+1] (j even) through the epilogue.
template <typename T>
__device__ __forceinline__ void store_pair(T* C, int M, int N, int i, int j, float v0, float v1,
                                           const T* bias, int act, T* Z) {
    if (i >= M || j >= N) return;
    const long long idx = (long long)i * N + j;
    v0 = epilogue(v0, j, idx, bias, act, Z);
    if (j + 1 < N) v1 = epilogue(v1, j + 1, idx + 1, bias, act, Z);
    // an aligned pair is one store (f32 pairs also need C itself 8-byte aligned)
    const bool aligned = sizeof(T) == 2 || (reinterpret_cast<size_t>(C) & 7) == 0;
    if (j + 1 < N && (N % 2) == 0 && aligned) {
        if constexpr (sizeof(T) == 4) {
            *reinterpret_cast<float2*>(C + idx) = make_float2(v0, v1);
        } else {
            const unsigned lo = camel::float_to_bits<T>(v0), hi = camel::float_to_bits<T>(v1);
            *reinterpret_cast<unsigned*>(C + idx) = lo | (hi << 16);
        }
    } else {
        C[idx] = camel::from_float<T>(v0);
        if (j + 1 < N) C[idx + 1] = camel::from_float<T>(v1);
    }
}

// The kernel body. BM×BN block tile, BK-deep slices, WM×WN warp tiles; STAGES shared buffers;
// SWZ: swizzled shared tiles; ASYNC: cp.async pipeline (else loads through registers, two
// buffers); GROUP: tile rows per block-order group (1 = plain row-major order); TA, TB: the
// operands are stored transposed.
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, bool SWZ, bool ASYNC,
          int GROUP, bool TA, bool TB>
__device__ __forceinline__ void hgemm_body(HGEMM_ARGS(T)) {
    constexpr int WARPS_N = BN / WN, NT = (BM / WM) * WARPS_N * 32;
    constexpr int MI = WM / 16, NI = WN / 8;
    // shared tiles keep the global layout: rows along the dimension that is not contiguous
    constexpr int AR = TA ? BK : BM, AW = TA ? BM : BK;
    constexpr int BR = TB ? BN : BK, BW = TB ? BK : BN;
    typedef Tile<AR, AW, NT, SWZ> TileA;
    typedef Tile<BR, BW, NT, SWZ> TileB;
    static_assert(NI % 2 == 0, "B fragments are loaded in pairs of n8 tiles");

    CAMEL_PDL_WAIT();
    extern __shared__ __align__(128) unsigned char hgemm_smem[];
    u16* As = reinterpret_cast<u16*>(hgemm_smem);
    u16* Bs = As + STAGES * BM * BK;

    // block order: GROUP tile rows at a time sweep all tile columns (L2 reuse of B)
    int bm = blockIdx.y, bn = blockIdx.x;
    if constexpr (GROUP > 1) {
        const int gx = gridDim.x, gy = gridDim.y, id = blockIdx.y * gx + blockIdx.x;
        const int first = (id / (GROUP * gx)) * GROUP, rows = min(gy - first, GROUP);
        bm = first + (id % (GROUP * gx)) % rows;
        bn = (id % (GROUP * gx)) / rows;
    }
    const int i0 = bm * BM, j0 = bn * BN;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;

    // this block's batch and, when K is split, its range of K
    const int splits = k_split > 0 ? (K + k_split - 1) / k_split : 1;
    const int batch = blockIdx.z / splits, split = blockIdx.z % splits;
    const int k_begin = k_split > 0 ? split * k_split : 0;
    const int k_end = k_split > 0 ? min(K, k_begin + k_split) : K;
    const u16* a16 = reinterpret_cast<const u16*>(A) + batch * strideA;
    const u16* b16 = reinterpret_cast<const u16*>(B) + batch * strideB;
    C += batch * strideC;
    if (Z) Z += batch * strideC;
    // global geometry of each operand as stored (rows × cols, leading dimension); the loads stop
    // at k_end, and zero-fill past it as past the matrix
    const int a_rows = TA ? k_end : M, a_cols = TA ? M : k_end;
    const int b_rows = TB ? N : k_end, b_cols = TB ? k_end : N;
    const long long lda = TA ? M : K, ldb = TB ? K : N;
    const bool va = (lda % 8 == 0) && (strideA % 8 == 0) && ((size_t)A % 16 == 0);
    const bool vb = (ldb % 8 == 0) && (strideB % 8 == 0) && ((size_t)B % 16 == 0);
    // the tile origin for k-slice k0, and the bounds relative to it
    auto a_at = [&](int k0, int& r0, int& c0) {
        k0 += k_begin;
        r0 = TA ? k0 : i0;
        c0 = TA ? i0 : k0;
    };
    auto b_at = [&](int k0, int& r0, int& c0) {
        k0 += k_begin;
        r0 = TB ? j0 : k0;
        c0 = TB ? k0 : j0;
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.0f;

    // The fragments of one 16-deep step kk of a slice held in shared buffers `as`, `bs`, each
    // lane's ldmatrix address one of its SwzRows bases plus a constant. Tile rows of A are m (or
    // k when TA), of B k (or n when TB); `.trans` turns a k-row tile into the fragment layout.
    const SwzRows<AW, SWZ> ra = TA ? SwzRows<AW, SWZ>((lane % 8) + (lane / 16) * 8, wm + ((lane / 8) % 2) * 8)
                                   : SwzRows<AW, SWZ>(wm + lane % 16, (lane / 16) * 8);
    const SwzRows<BW, SWZ> rb = TB ? SwzRows<BW, SWZ>(wn + (lane % 8) + (lane / 16) * 8, ((lane / 8) % 2) * 8)
                                   : SwzRows<BW, SWZ>((lane % 8) + ((lane / 8) % 2) * 8, wn + (lane / 16) * 8);
    auto load_frags = [&](const u16* as, const u16* bs, int kk, unsigned (&af)[MI][4],
                          unsigned (&bf)[NI][2]) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
            ldmatrix_x4<TA>(af[mi], smem_addr(as) + (TA ? ra.at(kk, mi * 16) : ra.at(mi * 16, kk)));
#pragma unroll
        for (int np = 0; np < NI / 2; ++np) {
            unsigned r[4];
            ldmatrix_x4<!TB>(r, smem_addr(bs) + (TB ? rb.at(np * 16, kk) : rb.at(kk, np * 16)));
            bf[2 * np][0] = r[0];
            bf[2 * np][1] = r[1];
            bf[2 * np + 1][0] = r[2];
            bf[2 * np + 1][1] = r[3];
        }
    };
    auto mma_frags = [&](const unsigned (&af)[MI][4], const unsigned (&bf)[NI][2]) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma16816<T>(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    };

    const int KT = (k_end - k_begin + BK - 1) / BK;
    if constexpr (ASYNC) {
        // slice kt into stage kt % STAGES: cp.async where the rows are aligned (without bounds
        // where the whole tile is inside), else loads through registers. A slice moves a tile
        // BK rows down where its rows are k, else BK columns along.
        const long long a_step = TA ? BK * lda : BK, b_step = TB ? BK : BK * ldb;
        int ra0, ca0, rb0, cb0;
        a_at(0, ra0, ca0);
        b_at(0, rb0, cb0);
        const u16* a_in = a16 + (long long)ra0 * lda + ca0 + TileA::src0(tid, lda);
        const u16* b_in = b16 + (long long)rb0 * ldb + cb0 + TileB::src0(tid, ldb);
        const int a_d0 = TileA::dst0(tid), b_d0 = TileB::dst0(tid);
        auto issue = [&](int kt) {
            const int s = kt % STAGES;
            int r0, c0;
            a_at(kt * BK, r0, c0);
            if (va && a_rows - r0 >= AR && a_cols - c0 >= AW)
                TileA::copy_inside(As + s * BM * BK + a_d0, a_in + kt * a_step, lda);
            else
                TileA::copy_async(As + s * BM * BK, a16 + (long long)r0 * lda + c0, a16, lda,
                                  a_rows - r0, a_cols - c0, va, tid);
            b_at(kt * BK, r0, c0);
            if (vb && b_rows - r0 >= BR && b_cols - c0 >= BW)
                TileB::copy_inside(Bs + s * BK * BN + b_d0, b_in + kt * b_step, ldb);
            else
                TileB::copy_async(Bs + s * BK * BN, b16 + (long long)r0 * ldb + c0, b16, ldb,
                                  b_rows - r0, b_cols - c0, vb, tid);
        };
        // Every stage is in flight from the start. The fragments of step kk + 1 are loaded
        // before the mma of step kk (two register sets), so a warp's ldmatrix latency hides
        // behind its own mma. The slice's barrier sits in its last step: by then every warp
        // holds that step's fragments, so the slice's buffer takes slice kt + STAGES and the
        // next slice's first fragments load before the last mma of this one.
        constexpr int KS = BK / 16;
        static_assert(KS % 2 == 0, "the two fragment sets alternate over an even number of steps");
        unsigned af[2][MI][4], bf[2][NI][2];
        auto stage_a = [&](int kt) { return As + (kt % STAGES) * BM * BK; };
        auto stage_b = [&](int kt) { return Bs + (kt % STAGES) * BK * BN; };
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            if (s < KT) issue(s);
            cp_async_commit();
        }
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        load_frags(stage_a(0), stage_b(0), 0, af[0], bf[0]);
        for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                if (ks == KS - 1) {
                    cp_async_wait<STAGES - 2>();  // slice kt + 1 has landed
                    __syncthreads();              // every warp is done reading slice kt
                    if (kt + STAGES < KT) issue(kt + STAGES);
                    cp_async_commit();
                    if (kt + 1 < KT) load_frags(stage_a(kt + 1), stage_b(kt + 1), 0, af[0], bf[0]);
                } else {
                    load_frags(stage_a(kt), stage_b(kt), (ks + 1) * 16, af[(ks + 1) % 2], bf[(ks + 1) % 2]);
                }
                mma_frags(af[ks % 2], bf[ks % 2]);
            }
        }
    } else {
        uint4 ra[TileA::PER], rb[TileB::PER];
        auto fetch = [&](int kt) {
            int r0, c0;
            a_at(kt * BK, r0, c0);
            TileA::fetch(ra, a16 + (long long)r0 * lda + c0, lda, a_rows - r0, a_cols - c0, va, tid);
            b_at(kt * BK, r0, c0);
            TileB::fetch(rb, b16 + (long long)r0 * ldb + c0, ldb, b_rows - r0, b_cols - c0, vb, tid);
        };
        if (KT > 0) {
            fetch(0);
            TileA::store(As, ra, tid);
            TileB::store(Bs, rb, tid);
        }
        __syncthreads();
        unsigned af[MI][4], bf[NI][2];
        for (int kt = 0; kt < KT; ++kt) {
            const bool more = kt + 1 < KT;
            if (more) fetch(kt + 1);  // in flight while this slice is multiplied
            const int s = kt % 2;
#pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                load_frags(As + s * BM * BK, Bs + s * BK * BN, kk, af, bf);
                mma_frags(af, bf);
            }
            if (more) {
                TileA::store(As + (1 - s) * BM * BK, ra, tid);
                TileB::store(Bs + (1 - s) * BK * BN, rb, tid);
            }
            __syncthreads();
        }
    }

    // accumulator (mi, ni): rows g and g + 8, columns 2·(lane % 4) and + 1 of its 16×8 tile.
    // for_each_pair(f) calls f(r, c, v0, v1) for every pair this thread holds: row r, columns c
    // and c + 1 of the block tile.
    const int g = lane / 4, t2 = (lane % 4) * 2;
    auto for_each_pair = [&](auto&& f) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    f(wm + mi * 16 + g + 8 * h, wn + ni * 8 + t2, acc[mi][ni][2 * h],
                      acc[mi][ni][2 * h + 1]);
    };
    if (k_split > 0) {  // raw partial sums of this split, in f32
        float* p = P + ((long long)split * (gridDim.z / splits) + batch) * M * N;
        for_each_pair([&](int r, int c, float v0, float v1) {
            const int i = i0 + r, j = j0 + c;
            if (i >= M || j >= N) return;
            p[(long long)i * N + j] = v0;
            if (j + 1 < N) p[(long long)i * N + j + 1] = v1;
        });
        return;
    }
    // Staged through shared memory where the pipeline's buffers hold the whole tile (step 16)
    // and no pre-activation is saved: every warp writes its rounded accumulators into the tile
    // (rows padded by 8 elements, so a warp's 4-byte pair stores hit 32 distinct banks), then C
    // leaves in 16-byte row chunks, whole 128-byte lines a warp, instead of 4-byte pairs.
    constexpr int LDC = BN + 8;
    if constexpr (ASYNC && STAGES * (BM * BK + BK * BN) >= BM * LDC) {
        if (Z == nullptr) {
            cp_async_wait<0>();
            __syncthreads();  // every warp is done with the pipeline's buffers
            // the loop without bias and activation has no per-column branch
            auto stage = [&](auto with_epilogue) {
                for_each_pair([&](int r, int c, float v0, float v1) {
                    if constexpr (decltype(with_epilogue)::value)
                        epilogue_pair(v0, v1, j0 + c, N, bias, act);
                    const unsigned lo = camel::float_to_bits<T>(v0), hi = camel::float_to_bits<T>(v1);
                    *reinterpret_cast<unsigned*>(As + r * LDC + c) = lo | (hi << 16);
                });
            };
            if (bias || act != 0)
                stage(Flag<true>{});
            else
                stage(Flag<false>{});
            __syncthreads();
            const bool vec = N % 8 == 0 && (reinterpret_cast<size_t>(C) & 15) == 0;
#pragma unroll 4
            for (int e = tid; e < BM * (BN / 8); e += NT) {
                const int r = e / (BN / 8), c = (e % (BN / 8)) * 8, i = i0 + r, j = j0 + c;
                if (i >= M || j >= N) continue;
                const uint4 v = *reinterpret_cast<const uint4*>(As + r * LDC + c);
                u16* out = reinterpret_cast<u16*>(C) + (long long)i * N + j;
                if (vec) {
                    *reinterpret_cast<uint4*>(out) = v;
                } else {
                    const u16* pv = reinterpret_cast<const u16*>(&v);
                    for (int x = 0; x < 8 && j + x < N; ++x) out[x] = pv[x];
                }
            }
            return;
        }
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int i = i0 + wm + mi * 16 + g, j = j0 + wn + ni * 8 + t2;
            store_pair(C, M, N, i, j, acc[mi][ni][0], acc[mi][ni][1], bias, act, Z);
            store_pair(C, M, N, i + 8, j, acc[mi][ni][2], acc[mi][ni][3], bias, act, Z);
        }
}

}  // namespace hgemm

// The four transpose kernels of one step for one element type: NAME_nn, NAME_nt, NAME_tn,
// NAME_tt, each `extern "C"` with HGEMM_ARGS(T); CONFIG is the template's tile arguments.
#define HGEMM_KERNEL(NAME, T, NT, TA, TB, ...)                                            \
    extern "C" __global__ void __launch_bounds__(NT) NAME(HGEMM_ARGS(T)) {                \
        hgemm::hgemm_body<T, __VA_ARGS__, TA, TB>(HGEMM_CALL_ARGS);                       \
    }
#define HGEMM_STEP(NAME, T, NT, ...)                         \
    HGEMM_KERNEL(NAME##_nn, T, NT, false, false, __VA_ARGS__) \
    HGEMM_KERNEL(NAME##_nt, T, NT, false, true, __VA_ARGS__)  \
    HGEMM_KERNEL(NAME##_tn, T, NT, true, false, __VA_ARGS__)  \
    HGEMM_KERNEL(NAME##_tt, T, NT, true, true, __VA_ARGS__)

// The split-K reduction of one element type: C = epilogue(Σ_s P[s]), the splits added in order
// from 0 in f32, the result rounded once to T (P as in HGEMM_ARGS; total = batch·M·N).
#define HGEMM_SPLITK_REDUCE(NAME, T)                                                                   \
    extern "C" __global__ void NAME(const float* __restrict__ P, T* __restrict__ C, int splits,          \
                                    long long total, int N, const T* __restrict__ bias, int act,         \
                                    T* __restrict__ Z) {                                                 \
        CAMEL_PDL_WAIT();                                                                                \
        for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;              \
             idx += (long long)gridDim.x * blockDim.x) {                                                 \
            float s = 0.0f;                                                                              \
            for (int sp = 0; sp < splits; ++sp) s += P[sp * total + idx];                                \
            C[idx] = camel::from_float<T>(hgemm::epilogue(s, (int)(idx % N), idx, bias, act, Z));        \
        }                                                                                                \
    }
