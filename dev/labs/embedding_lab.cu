// Embedding-backward lab: which pipeline scatters 349525 tokens × 768 into GPT-2's 50257 rows
// fastest, against the library's step 3 (kernels/embedding/) in one program, as llm.c keeps
// dev/cuda: kernels, validation against the library, timing. Not part of the library.
//
// Versions (uniform, skewed, sparse and sorted indices):
//   step 3   the library's step 3: count, scan, fill, zero, a gather that adds chunk-crossing
//            groups with atomics
//   P        preprocessing: count returns each token's rank in its row, one scan launch, the
//            long groups' rows zeroed in the scan
//   G        gather, group-aligned: a warp owns the groups that start in its chunk and stores
//            each row plainly; only groups longer than LONG tokens are added atomically
//   S4       the library's step 4: the preprocessing in one launch of resident blocks with
//            counters left zero, one int2 entry a grouped token, gather G on those entries
//   knobs    NW float4 a lane, U loads in flight, __ldcs loads, LONG 64 / 128 / 256
//
// Timing: lab_common.cuh's streamed method (the 1.07 GB gradient and 154 MB output exceed the
// L2, so one buffer set). What it found and where it went: dev/labs/README.md.
//
// Build and run on the GPU host:  OUT=dir bash dev/labs/embedding_lab.sh
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#include "../kernels/embedding/01_thread_per_element.cu"  // the library's kernels (steps 1–3)
#include "../kernels/embedding/02_warp_per_row.cu"
#include "../kernels/embedding/03_grouped_rows.cu"
#include "../kernels/embedding/04_grouped_one_launch.cu"
#include "lab_common.cuh"


constexpr int LAB_CHUNK = 32;

// ---------------------------------------------------------------------------------------------
// P1: count with ranks. rank[i] = the token's place among the tokens of its row (arrival order).
__global__ void lab_count_rank(const long long* __restrict__ idx, long long n, long long V, int* __restrict__ counts,
                               int* __restrict__ rank, long long* err) {
    GRID_STRIDE_LOOP(i, n) {
        const long long r = idx[i];
        if (r < 0 || r >= V) {
            record_index_error(err, CAMEL_OP_EMBEDDING_BWD, r, V);
        } else {
            rank[i] = atomicAdd(&counts[r], 1);
        }
    }
}

// P2: the scan in one launch. Block b takes ticket t (so tiles start in order), scans its 4096
// counts, publishes its total as flags[t] = 1 << 32 | total, and adds the totals of tiles < t
// (spinning on their flags: those blocks hold earlier tickets, so they are running). counts,
// flags and the ticket are zero on entry (one memset). Rows with more than LONG tokens are zeroed
// here (the gather adds into them with atomics).
template <int LONG>
__global__ void __launch_bounds__(1024) lab_scan1(const int* __restrict__ counts, int* __restrict__ start,
                                                   unsigned long long* flags, int* ticket, long long V, long long D,
                                                   float* __restrict__ out) {
    __shared__ int warp_sums[32];
    __shared__ int s_tile;
    if (threadIdx.x == 0) s_tile = atomicAdd(ticket, 1);
    __syncthreads();
    const int t = s_tile;
    const long long r0 = (long long)t * 4096 + 4 * threadIdx.x;
    int c[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) c[q] = r0 + q < V ? counts[r0 + q] : 0;
    int total;
    int run = emb_block_scan(c[0] + c[1] + c[2] + c[3], warp_sums, total);
    if (threadIdx.x == 0) atomicExch(&flags[t], (1ull << 32) | (unsigned)total);
    int s = 0;
    for (int i = threadIdx.x; i < t; i += 1024) {
        unsigned long long f;
        do {
            f = atomicAdd(&flags[i], 0ull);
        } while ((f >> 32) == 0);
        s += (int)(unsigned)f;
    }
    __syncthreads();  // warp_sums is reused by block_sum
    const int offset = camel::block_sum(s, warp_sums);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        if (r0 + q < V) start[r0 + q] = run + offset;
        run += c[q];
    }
    const long long tiles = (V + 4095) / 4096;
    if (t == tiles - 1 && threadIdx.x == 0) start[V] = offset + total;
    // long rows: the whole warp zeroes each
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        unsigned m = __ballot_sync(0xffffffffu, r0 + q < V && c[q] > LONG);
        while (m) {
            const int src = __ffs(m) - 1;
            m &= m - 1;
            const long long r = (long long)t * 4096 + 4 * ((threadIdx.x & ~31) + src) + q;
            for (long long d = lane; d < D; d += 32) out[r * D + d] = 0.0f;
        }
    }
}

// P3: fill without atomics.
__global__ void lab_fill_rank(const long long* __restrict__ idx, const int* __restrict__ rank, long long n, long long V,
                              const int* __restrict__ start, int* __restrict__ order, int* __restrict__ rows) {
    GRID_STRIDE_LOOP(i, n) {
        const long long r = idx[i];
        if (r >= 0 && r < V) {
            const int p = start[r] + rank[i];
            order[p] = (int)i;
            rows[p] = (int)r;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// G: group-aligned gather. Warps [0, zw) zero the empty rows (32 rows a warp); the others are
// (chunk, column block of 128) as in step 3. A warp's positions are [B, E):
//   B = the chunk's first position if a group starts there or the group it continues is long,
//       else the first start inside the chunk (none: the warp has nothing to do);
//   E = the end of the last group starting in the chunk, or the chunk's end where that group is
//       long.
// A row is stored plainly when its group has at most LONG tokens, else added atomically.
template <int U, bool CS>
__device__ __forceinline__ float4 lab_ld4(const float* p) {
    return CS ? __ldcs(reinterpret_cast<const float4*>(p)) : *reinterpret_cast<const float4*>(p);
}

template <int LONG, int U, bool CS>
__global__ void __launch_bounds__(256) lab_gather_grp(const float* __restrict__ g, const int* __restrict__ start,
                                                       const int* __restrict__ order, const int* __restrict__ rows,
                                                       long long V, long long D, long long zw,
                                                       float* __restrict__ out) {
    const long long wid = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (wid < zw) {  // zero the empty rows among 32
        const long long r = wid * 32 + lane;
        const bool empty = r < V && start[r] == start[r + 1];
        unsigned m = __ballot_sync(0xffffffffu, empty);
        while (m) {
            const int src = __ffs(m) - 1;
            m &= m - 1;
            float4* o = reinterpret_cast<float4*>(out + (wid * 32 + src) * D);
            for (long long d = lane; d < D / 4; d += 32) o[d] = make_float4(0, 0, 0, 0);
        }
        return;
    }
    const long long w = wid - zw;
    const long long nb = (D / 4 + 31) / 32;
    const long long c = w / nb, cb = w % nb;
    const int total = start[V];
    const int p0 = (int)(c * LAB_CHUNK);
    if (p0 >= total) return;
    const int pc = min(p0 + LAB_CHUNK, total);  // chunk end
    const int p = p0 + lane;
    const int my_r = p < pc ? rows[p] : -1;
    int prev = __shfl_up_sync(0xffffffffu, my_r, 1);
    if (lane == 0) prev = p0 > 0 ? rows[p0 - 1] : -1;
    const unsigned starts = __ballot_sync(0xffffffffu, p < pc && my_r != prev);
    // the group at p0, and the last group starting in the chunk
    const int r_first = __shfl_sync(0xffffffffu, my_r, 0);
    int B, E;
    {
        const int s0 = start[r_first], e0 = start[r_first + 1];
        const bool first_long = e0 - s0 > LONG;
        if ((starts & 1u) || first_long) {
            B = p0;
        } else if (starts) {
            B = p0 + __ffs(starts) - 1;
        } else {
            return;  // inside a short group that started before
        }
        if (starts) {
            const int last = 31 - __clz(starts);
            const int r_last = __shfl_sync(0xffffffffu, my_r, last);
            const int sl = start[r_last], el = start[r_last + 1];
            E = el - sl > LONG ? pc : el;
        } else {
            E = pc;  // a long group covers the chunk
        }
    }
    const long long col = (cb * 32 + lane) * 4;
    const bool act = col < D;
    float4 acc = make_float4(0, 0, 0, 0);
    int row = -1;
    auto flush = [&]() {
        if (!act || row < 0) return;
        float* o = out + (long long)row * D + col;
        if (start[row + 1] - start[row] <= LONG) {
            *reinterpret_cast<float4*>(o) = acc;
        } else {
            atomicAdd(o, acc.x), atomicAdd(o + 1, acc.y), atomicAdd(o + 2, acc.z), atomicAdd(o + 3, acc.w);
        }
    };
    for (int j0 = B; j0 < E; j0 += 32) {
        const int cnt = min(32, E - j0);
        const int bp = lane < cnt ? order[j0 + lane] : 0, br = lane < cnt ? rows[j0 + lane] : -1;
        for (int j = 0; j < cnt; j += U) {
            float4 v[U];
            int rr[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int pp = __shfl_sync(0xffffffffu, bp, (j + u) & 31);
                rr[u] = __shfl_sync(0xffffffffu, br, (j + u) & 31);
                v[u] = act && j + u < cnt ? lab_ld4<U, CS>(g + (long long)pp * D + col) : make_float4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (j + u < cnt) {
                    if (rr[u] != row) {
                        flush();
                        acc = make_float4(0, 0, 0, 0);
                        row = rr[u];
                    }
                    acc.x += v[u].x, acc.y += v[u].y, acc.z += v[u].z, acc.w += v[u].w;
                }
            }
        }
    }
    flush();
}

// ---------------------------------------------------------------------------------------------

static double streamed(const std::function<void()>& launch) {
    return lab_streamed([&](int) { launch(); }, 1, lab_per(10));
}

static long long grid_1d(long long n) { return std::min<long long>((n + 255) / 256, 65535); }

struct Work {
    long long n, V, D;
    const float* g;
    const long long* idx;
    int *counts, *start, *cursor, *order, *rows, *tile_sums, *rank;
    unsigned long long* flags;  // after counts: tiles flags, then the ticket
    long long* err;
    size_t counts_bytes;  // counts + flags + ticket, zeroed by one memset
};

static Work make_work(long long n, long long V, long long D, const float* g, const long long* idx) {
    Work w{n, V, D, g, idx};
    const long long tiles = (V + 4095) / 4096;
    const long long vpad = (V + 1) & ~1ll;  // 8-byte alignment for the flags
    w.counts_bytes = vpad * 4 + ((V + 1023) / 1024) * 8 + 8;  // counts, flags (tiles of 1024 or 4096), ticket
    char* c = dalloc<char>(w.counts_bytes);
    w.counts = (int*)c;
    w.flags = (unsigned long long*)(c + vpad * 4);
    w.start = dalloc<int>(V + 1);
    w.cursor = dalloc<int>(V);
    w.order = dalloc<int>(std::max(n, 1ll));
    w.rows = dalloc<int>(std::max(n, 1ll));
    w.rank = dalloc<int>(std::max(n, 1ll));
    w.tile_sums = dalloc<int>(tiles);
    w.err = dalloc<long long>(4);
    CK(cudaMemset(w.err, 0, 32));
    return w;
}

// the library's step 3, as index_add_rows_sorted_f32 launches it
static void lib3_pre(const Work& w) {
    const long long tiles = (w.V + 4095) / 4096;
    CK(cudaMemsetAsync(w.counts, 0, w.V * 4));
    embedding_bwd_count<<<grid_1d(w.n), 256>>>(w.idx, w.n, w.V, w.counts, w.err);
    embedding_bwd_scan_tiles<<<tiles, 1024>>>(w.counts, w.start, w.tile_sums, w.V);
    embedding_bwd_scan_offsets<<<tiles, 1024>>>(w.tile_sums, w.start, w.cursor, w.V);
    embedding_bwd_fill<<<grid_1d(w.n), 256>>>(w.idx, w.n, w.V, w.cursor, w.order, w.rows);
}
static void lib3_zero(const Work& w, float* out) {
    embedding_bwd_zero<<<(w.V + 7) / 8, 256>>>(w.start, w.V, w.D, out);
}
static void lib3_gather(const Work& w, float* out) {
    const long long warps = (w.n + EMB_CHUNK - 1) / EMB_CHUNK * ((w.D / 4 + 31) / 32);
    embedding_bwd_gather_vec_f32<<<(warps + 7) / 8, 256>>>(w.g, w.start, w.order, w.rows, w.V, w.D, out);
}
static void lib3(const Work& w, float* out) {
    lib3_pre(w);
    lib3_zero(w, out);
    lib3_gather(w, out);
}

template <int LONG>
static void new_pre(const Work& w, float* out) {
    const long long tiles = (w.V + 4095) / 4096;
    CK(cudaMemsetAsync(w.counts, 0, w.counts_bytes));
    lab_count_rank<<<grid_1d(w.n), 256>>>(w.idx, w.n, w.V, w.counts, w.rank, w.err);
    lab_scan1<LONG><<<tiles, 1024>>>(w.counts, w.start, w.flags, (int*)(w.flags + tiles), w.V, w.D, out);
    lab_fill_rank<<<grid_1d(w.n), 256>>>(w.idx, w.rank, w.n, w.V, w.start, w.order, w.rows);
}
// S4: the library's step 4 (F2 + G2 with the warp-aggregated count and NW = 1, which won here),
// launched as index_add_rows_grouped_f32 does; its zero counters are the lab's g_zero.
static int* g_zero = nullptr;
static int2* g_ent = nullptr;
static int g_s4_blocks = 0;
static void s4_pre(const Work& w, float* out) {
    embedding_bwd4_group<<<g_s4_blocks, 256>>>(w.idx, w.n, w.V, w.D, g_zero, w.rank, w.start, g_ent, out, w.err);
}
static void s4_gather(const Work& w, float* out) {
    const long long zw = (w.V + 31) / 32;
    const long long warps = zw + (w.n + EMB_CHUNK - 1) / EMB_CHUNK * ((w.D / 4 + 31) / 32);
    embedding_bwd4_gather_vec_f32<<<(warps + 7) / 8, 256>>>(w.g, w.start, g_ent, w.V, w.D, zw, out);
}
// the separate kernels of P, one at a time (their inputs are left by a full run)
static void p_count(const Work& w) {
    CK(cudaMemsetAsync(w.counts, 0, w.counts_bytes));
    lab_count_rank<<<grid_1d(w.n), 256>>>(w.idx, w.n, w.V, w.counts, w.rank, w.err);
}
template <int LONG, int U, bool CS>
static void new_gather(const Work& w, float* out) {
    const long long zw = (w.V + 31) / 32;
    const long long warps = zw + (w.n + LAB_CHUNK - 1) / LAB_CHUNK * ((w.D / 4 + 31) / 32);
    lab_gather_grp<LONG, U, CS><<<(warps + 7) / 8, 256>>>(w.g, w.start, w.order, w.rows, w.V, w.D, zw, out);
}

static std::vector<long long> rand_idx(long long n, long long V, unsigned long long seed) {
    std::vector<long long> v(n);
    unsigned long long s = seed + 12345;
    for (auto& e : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        e = (long long)((s >> 33) % (unsigned long long)V);
    }
    return v;
}

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
    const long long D = 768, V = 50257, N = (1ll << 28) / 768;
    {
        int a = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&a, embedding_bwd4_group, 256, 0));
        g_s4_blocks = a * prop.multiProcessorCount;
        const long long zn = (V + 1) / 2 * 2 + 2 * ((V + 1023) / 1024) + 2;
        g_zero = dalloc<int>(zn);
        g_ent = dalloc<int2>(N);
        CK(cudaMemset(g_zero, 0, zn * 4));
        printf("step 4 preprocessing: %d resident blocks of 256 (%d per SM)\n", g_s4_blocks, a);
    }

    const size_t BIG = 1ull << 28;
    double copy_bw;
    {
        float *bs = dalloc<float>(BIG), *bd = dalloc<float>(BIG);
        CK(cudaMemset(bs, 0, BIG * 4));
        const double t = streamed([&] { CK(cudaMemcpyAsync(bd, bs, BIG * 4, cudaMemcpyDeviceToDevice)); });
        copy_bw = 2.0 * BIG * 4 / t / 1e3;
        printf("copy 2^28: %.1f us, %.0f GB/s\n", t, copy_bw);
        CK(cudaFree(bs));
        CK(cudaFree(bd));
    }

    float* g = dalloc<float>(N * D);
    {
        std::vector<float> h(N * D);
        srand(1);
        for (auto& e : h) e = (float)rand() / RAND_MAX * 2.0f - 1.0f;
        CK(cudaMemcpy(g, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
    float *ref = dalloc<float>(V * D), *out = dalloc<float>(V * D);
    long long* didx = dalloc<long long>(N);

    auto report = [&](const char* name, double us, double bytes) {
        printf("%-58s %8.1f us  %6.0f GB/s  %5.1f %% of copy\n", name, us, bytes / us / 1e3,
               100.0 * bytes / us / 1e3 / copy_bw);
    };
    auto check = [&](const char* name, long long V_) {
        CK(cudaDeviceSynchronize());
        const double d = max_diff(ref, out, V_ * D, true);
        // relative past 1; the skewed case's row of 104857 tokens (sums near 190 of terms whose
        // magnitudes add to 52000, in orders the atomics choose) differs by up to ~5e-4
        printf("  %s: max |diff| vs step 3 = %.3g%s\n", name, d, d > 2e-3 ? "  !! DIFFERS" : "");
    };

    // idx distributions: uniform (the bench's), skewed (30 % of tokens on row 7, rows 100..199
    // empty), sparse (2^24 / 768 tokens: the backend's threshold), sorted (the uniform indices
    // sorted: the gather reads g in order, its bound)
    struct Case {
        const char* name;
        long long n;
        std::vector<long long> idx;
    };
    std::vector<Case> cases;
    cases.push_back({"uniform", N, rand_idx(N, V, 10)});
    {
        auto v = rand_idx(N, V, 11);
        for (long long i = 0; i < N; ++i) {
            if (i % 10 < 3) v[i] = 7;
            if (v[i] >= 100 && v[i] < 200) v[i] += 100;
        }
        cases.push_back({"skewed", N, v});
    }
    cases.push_back({"sparse", (1ll << 24) / 768, rand_idx((1ll << 24) / 768, V, 12)});
    {
        auto v = rand_idx(N, V, 10);
        std::sort(v.begin(), v.end());
        cases.push_back({"sorted", N, v});
    }

    for (auto& cs : cases) {
        const long long n = cs.n;
        CK(cudaMemcpy(didx, cs.idx.data(), n * 8, cudaMemcpyHostToDevice));
        Work w = make_work(n, V, D, g, didx);
        const double bytes = 4.0 * n * D + 8.0 * n + 4.0 * V * D;
        printf("\n== %s: %lld tokens x %lld into %lld rows (%.0f MB to move)\n", cs.name, n, D, V, bytes / 1e6);
        CK(cudaMemset(ref, 0xff, V * D * 4));
        lib3(w, ref);
        CK(cudaDeviceSynchronize());
        report("S3 library step 3 (memset, 6 kernels)", streamed([&] { lib3(w, out); }), bytes);
        report("  S3 pre (memset, count, scan x2, fill)", streamed([&] { lib3_pre(w); }), bytes);
        report("  S3 zero", streamed([&] { lib3_zero(w, out); }), bytes);
        report("  S3 gather", streamed([&] { lib3_gather(w, out); }), bytes);

        report("  P pre (memset, count+rank, scan1, fill)", streamed([&] { new_pre<128>(w, out); }), bytes);
        report("    P memset + count+rank", streamed([&] { p_count(w); }), bytes);
        new_pre<128>(w, out);
        report("    P fill", streamed([&] {
                   lab_fill_rank<<<grid_1d(w.n), 256>>>(w.idx, w.rank, w.n, w.V, w.start, w.order, w.rows);
               }),
               bytes);
        report("  memset alone", streamed([&] { CK(cudaMemsetAsync(w.counts, 0, w.counts_bytes)); }), bytes);
        // library gather on the new preprocessing (needs the zero kernel)
        {
            CK(cudaMemset(out, 0xff, V * D * 4));
            new_pre<128>(w, out);
            lib3_zero(w, out);
            lib3_gather(w, out);
            check("P + S3 zero + S3 gather", V);
            report("P + S3 zero + S3 gather", streamed([&] {
                       new_pre<128>(w, out);
                       lib3_zero(w, out);
                       lib3_gather(w, out);
                   }),
                   bytes);
        }
        auto variant = [&](const char* name, const std::function<void()>& gather_only,
                           const std::function<void()>& whole) {
            CK(cudaMemset(out, 0xff, V * D * 4));
            whole();
            check(name, V);
            char nm[96];
            snprintf(nm, sizeof nm, "%s", name);
            report(nm, streamed(whole), bytes);
            snprintf(nm, sizeof nm, "  %s: gather alone", name);
            report(nm, streamed(gather_only), bytes);
        };
        variant("PG LONG=128 U=4", [&] { new_gather<128, 4, false>(w, out); },
                [&] {
                    new_pre<128>(w, out);
                    new_gather<128, 4, false>(w, out);
                });
        report("  S4 pre (library step 4: one launch, no memset)", streamed([&] { s4_pre(w, out); }), bytes);
        variant("S4 library step 4", [&] { s4_gather(w, out); },
                [&] {
                    s4_pre(w, out);
                    s4_gather(w, out);
                });
        {  // the zero counters are zero again after a launch
            CK(cudaDeviceSynchronize());
            const long long zn = (V + 1) / 2 * 2 + 2 * ((V + 1023) / 1024) + 2;
            std::vector<int> hz(zn);
            CK(cudaMemcpy(hz.data(), g_zero, zn * 4, cudaMemcpyDeviceToHost));
            long long nz = 0;
            for (int x : hz) nz += x != 0;
            if (nz) printf("  !! step 4 left %lld of its zero counters non-zero\n", nz);
        }
        long long e[4];
        CK(cudaMemcpy(e, w.err, 32, cudaMemcpyDeviceToHost));
        if (e[0]) printf("  !! index error recorded\n");
    }

    // same-size copy for the uniform case
    {
        const double bytes = 4.0 * N * D + 8.0 * N + 4.0 * V * D;
        float *s = dalloc<float>((size_t)(bytes / 8)), *d = dalloc<float>((size_t)(bytes / 8));
        const double t = streamed([&] { CK(cudaMemcpyAsync(d, s, (size_t)(bytes / 2), cudaMemcpyDeviceToDevice)); });
        report("\nsame-size copy (uniform case's bytes)", t, bytes);
    }
    return 0;
}
