// attn_lab.cu — how close do the attention ladder's kernels come to FlashAttention-2, and what does
// each of step 6's changes buy? Runs step 5's forward (kernels/attention/05_async.cu) and step 6's
// (06_fa2.cu), then step 4's backward (mma.cuh) and step 6's, on the same bf16 inputs
// ([B, T, H, D] projections, B = 16384 / T, H = 2048 / D, as attention_bench); checks step 6
// against the earlier step (outputs, log-sum-exp and gradients, with and without dropout) and
// times both (lab_common.cuh's streamed loop). attn_lab.sh times PyTorch's FlashAttention-2 on
// the same shapes in the same run. LAB_BWD=1: the backward only.
#include "lab_common.cuh"
#include "attention/05_async.cu"
#include "attention/06_fa2.cu"

using bf = __nv_bfloat16;
static float bf2f(bf x) { return __bfloat162float(x); }

// `count` tensors of n bf16 values uniform in [-1, 1) (an LCG from `seed`) in one device buffer of
// `total` ≥ count · n values.
static bf* random_bf16(size_t n, int count, size_t total, unsigned seed) {
    std::vector<bf> hx(count * n);
    for (auto& x : hx) {
        seed = seed * 1664525u + 1013904223u;
        x = __float2bfloat16(((seed >> 8) * (1.0f / 16777216.0f)) * 2.0f - 1.0f);
    }
    bf* x = dalloc<bf>(total);
    CK(cudaMemcpy(x, hx.data(), count * n * 2, cudaMemcpyHostToDevice));
    return x;
}

// The arguments of B · H heads of T queries and keys of D features, in [B, T, H, D] projections.
static AttnArgs lab_args(long long B, long long H, long long T, long long D, int causal, float p,
                         unsigned long long seed) {
    AttnArgs a{};
    a.b = B, a.h = H, a.tq = T, a.tk = T;
    a.q_sb = a.k_sb = a.v_sb = T * H * D;
    a.q_sh = a.k_sh = a.v_sh = D;
    a.q_st = a.k_st = a.v_st = H * D;
    a.scale = 1.0f / sqrtf((float)D);
    a.causal = causal;
    a.seed = seed;
    if (p > 0) a.drop_scale = 1.0f / (1.0f - p), a.drop_thr = (unsigned)(p * 4294967296.0);
    return a;
}

typedef void (*Fwd)(const bf*, const bf*, const bf*, bf*, float*, const AttnArgs);

// Step 6 with other key tiles: 32 (fewer score registers a thread, twice the tiles) or 128.
#define LAB_BC(BC, D)                                                                                      \
    __global__ void __launch_bounds__(128) lab6_bc##BC##_d##D(const bf* q, const bf* k, const bf* v, bf* o, \
                                                              float* lse, const AttnArgs a) {            \
        attn_fa2_fwd<bf, D, BC>(reinterpret_cast<const u16*>(q), reinterpret_cast<const u16*>(k),         \
                                reinterpret_cast<const u16*>(v), reinterpret_cast<u16*>(o), lse, a);      \
    }
LAB_BC(32, 64)
LAB_BC(32, 128)
LAB_BC(128, 64)

struct Step {
    const char* name;
    int br, bc;
    Fwd d64, d128;
};

// Step 4's backward kernels (mma.cuh), instantiated here: 04_swizzle.cu's Δ kernel would clash
// with step 6's in one program.
#define LAB_BWD4(D)                                                                                          \
    __global__ void __launch_bounds__(128) lab4_dkdv_d##D(const bf* q, const bf* k, const bf* v,              \
                                                          const bf* dout, const float* lse, const float* dl, \
                                                          bf* dk, bf* dv, const AttnArgs a) {                \
        attn_mma_dkdv<bf, D, true>((const u16*)q, (const u16*)k, (const u16*)v, (const u16*)dout, lse, dl,  \
                                   (u16*)dk, (u16*)dv, a);                                                   \
    }                                                                                                        \
    __global__ void __launch_bounds__(128) lab4_dq_d##D(const bf* q, const bf* k, const bf* v, const bf* dout, \
                                                        const float* lse, const float* dl, bf* dq,            \
                                                        const AttnArgs a) {                                   \
        attn_mma_dq<bf, D, true>((const u16*)q, (const u16*)k, (const u16*)v, (const u16*)dout, lse, dl,    \
                                 (u16*)dq, a);                                                                \
    }
LAB_BWD4(64)
LAB_BWD4(128)

// Step 6's backward with other tiles: dK/dV walking query tiles of 32, dQ walking key tiles of 32
// or 128.
#define LAB_DKDV6(BQ, D)                                                                                   \
    __global__ void __launch_bounds__(128) lab6_dkdv_q##BQ##_d##D(                                           \
        const bf* q, const bf* k, const bf* v, const bf* dout, const float* lse, const float* dl, bf* dk,  \
        bf* dv, const AttnArgs a) {                                                                         \
        attn_fa2_dkdv<bf, D, false, false, BQ>((const u16*)q, (const u16*)k, (const u16*)v, (const u16*)dout, \
                                               lse, dl, (u16*)dk, (u16*)dv, nullptr, a);                   \
    }
#define LAB_DQ6(BC, D)                                                                                     \
    __global__ void __launch_bounds__(128) lab6_dq_c##BC##_d##D(const bf* q, const bf* k, const bf* v,       \
                                                                const bf* dout, const float* lse,          \
                                                                const float* dl, bf* dq, const AttnArgs a) { \
        attn_fa2_dq<bf, D, false, BC>((const u16*)q, (const u16*)k, (const u16*)v, (const u16*)dout, lse, dl,    \
                               (u16*)dq, a);                                                                \
    }
LAB_DKDV6(32, 64)
LAB_DKDV6(32, 128)
LAB_DQ6(32, 64)
LAB_DQ6(32, 128)
LAB_DQ6(128, 64)

typedef void (*Dkdv)(const bf*, const bf*, const bf*, const bf*, const float*, const float*, bf*, bf*,
                     const AttnArgs);
typedef void (*Dq)(const bf*, const bf*, const bf*, const bf*, const float*, const float*, bf*, const AttnArgs);

struct BwdStep {
    const char* name;
    int bk, smem_dkdv_rows, lse_words, br, smem_dq_rows;  // shared memory: rows of D 16-bit values
    // (a null kernel: the variant skips that head dim)
    Dkdv dkdv64, dkdv128;
    Dq dq64, dq128;
};

// Step 4's and step 6's backward on the same inputs (the forward's output and log-sum-exp from
// step 6, a random dO): their gradients compared, each timed with its Δ kernel.
static void backward_lab(int per) {
    const BwdStep steps[] = {
        {"bwd4", 64, 2 * 64 + 2 * 32, 3 * 32, 64, 4 * 64, lab4_dkdv_d64, lab4_dkdv_d128, lab4_dq_d64, lab4_dq_d128},
        {"bwd6", 64, 2 * 64 + 4 * 64, 6 * 64, 64, 2 * 64 + 4 * 64, attn06_bwd_dkdv_d64_bf16,
         attn06_bwd_dkdv_d128_bf16, attn06_bwd_dq_d64_bf16, attn06_bwd_dq_d128_bf16},
        {"bwd6_q32", 64, 2 * 64 + 4 * 32, 6 * 32, 64, 2 * 64 + 4 * 64, lab6_dkdv_q32_d64, lab6_dkdv_q32_d128,
         attn06_bwd_dq_d64_bf16, attn06_bwd_dq_d128_bf16},
        {"bwd6_c32", 64, 2 * 64 + 4 * 64, 6 * 64, 64, 2 * 64 + 4 * 32, attn06_bwd_dkdv_d64_bf16,
         attn06_bwd_dkdv_d128_bf16, lab6_dq_c32_d64, lab6_dq_c32_d128},
        {"bwd6_c128", 64, 2 * 64 + 4 * 64, 6 * 64, 64, 2 * 64 + 4 * 128, attn06_bwd_dkdv_d64_bf16, nullptr,
         lab6_dq_c128_d64, nullptr},
    };
    for (const BwdStep& s : steps) {
        for (Dkdv f : {s.dkdv64, s.dkdv128})
            if (f) CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
        for (Dq f : {s.dq64, s.dq128})
            if (f) CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
    }
    CK(cudaFuncSetAttribute(attn06_fwd_d128_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
    CK(cudaFuncSetAttribute(attn06_fwd_d64_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
    struct Case { int d, t, causal; float p; };
    // without dropout: step 6's attn06p kernels apply the mask (the library's tests cover them)
    const Case cases[] = {{128, 4096, 1, 0}, {128, 4096, 0, 0}, {64, 4096, 1, 0}, {64, 4096, 0, 0},
                          {128, 1000, 1, 0}, {64, 127, 0, 0}};
    printf("\nd\tT\tcausal\tp\tstep\tus\tTFLOP/s (2.5x fwd)\tmax|d dq|\tmax|d dk|\tmax|d dv|\tmax|dk|\n");
    for (const Case& c : cases) {
        const long long T = c.t, D = c.d, B = std::max(1LL, 16384 / T), H = 2048 / D;
        const size_t n = B * T * H * D;
        bf* x = random_bf16(n, 4, 8 * n, 777);
        bf *q = x, *k = x + n, *v = x + 2 * n, *dout = x + 3 * n, *o = x + 4 * n, *dq = x + 5 * n, *dk = x + 6 * n,
           *dv = x + 7 * n;
        float* lse = dalloc<float>(B * H * T);
        float* dl = dalloc<float>(B * H * T);
        const AttnArgs a = lab_args(B, H, T, D, c.causal, c.p, 99);
        (D == 64 ? attn06_fwd_d64_bf16 : attn06_fwd_d128_bf16)<<<B * H * ((T + 127) / 128), 128,
                                                                 (128 + 4 * 64) * D * 2>>>(q, k, v, o, lse, a);
        CK(cudaDeviceSynchronize());
        std::vector<bf> ref;
        for (const BwdStep& s : steps) {
            CK(cudaMemset(dq, 0xff, 3 * n * 2));
            const int smem_dkdv = s.smem_dkdv_rows * D * 2 + s.lse_words * 4, smem_dq = s.smem_dq_rows * D * 2;
            Dkdv fk = D == 64 ? s.dkdv64 : s.dkdv128;
            Dq fq = D == 64 ? s.dq64 : s.dq128;
            if (!fk || !fq) continue;
            auto go = [&](int) {
                attn_bwd_delta_bf16<<<(B * H * T + 7) / 8, 256>>>(o, dout, dl, B, H, T, (int)D);
                fk<<<B * H * ((T + s.bk - 1) / s.bk), 128, smem_dkdv>>>(q, k, v, dout, lse, dl, dk, dv, a);
                fq<<<B * H * ((T + s.br - 1) / s.br), 128, smem_dq>>>(q, k, v, dout, lse, dl, dq, a);
            };
            go(0);
            CK(cudaDeviceSynchronize());
            CK(cudaGetLastError());
            std::vector<bf> h(3 * n);
            CK(cudaMemcpy(h.data(), dq, 3 * n * 2, cudaMemcpyDeviceToHost));
            double e[3] = {0, 0, 0}, big = 0;
            if (ref.empty()) ref = h;
            for (int w = 0; w < 3; ++w)
                for (size_t i = 0; i < n; ++i) {
                    const double d = fabs(bf2f(h[w * n + i]) - bf2f(ref[w * n + i]));
                    e[w] = d == d ? std::max(e[w], d) : INFINITY;
                    if (w == 1) big = std::max(big, (double)fabs(bf2f(h[w * n + i])));
                }
            const int reps = T >= 4096 ? per / 2 : 2 * per;
            const double us = lab_streamed(go, 1, reps);
            const double us_kv = lab_streamed([&](int) {
                fk<<<B * H * ((T + s.bk - 1) / s.bk), 128, smem_dkdv>>>(q, k, v, dout, lse, dl, dk, dv, a);
            }, 1, reps);
            const double us_q = lab_streamed([&](int) {
                fq<<<B * H * ((T + s.br - 1) / s.br), 128, smem_dq>>>(q, k, v, dout, lse, dl, dq, a);
            }, 1, reps);
            const double flop = 2.5 * 4.0 * B * H * T * T * D * (c.causal ? 0.5 : 1.0);
            printf("%d\t%d\t%d\t%.2f\t%s\t%.1f\t%.1f\t%.3g\t%.3g\t%.3g\t%.3g\tdkdv %.1f us, dq %.1f us\n", c.d, c.t,
                   c.causal, c.p, s.name, us, flop / us * 1e-6, e[0], e[1], e[2], big, us_kv, us_q);
        }
        CK(cudaFree(x));
        CK(cudaFree(lse));
        CK(cudaFree(dl));
    }
}


int main() {
    const Step steps[] = {
        {"step5", 64, 64, attn05_fwd_d64_bf16, attn05_fwd_d128_bf16},
        {"step6", 128, 64, attn06_fwd_d64_bf16, attn06_fwd_d128_bf16},
        {"step6_bc32", 128, 32, lab6_bc32_d64, lab6_bc32_d128},
        {"step6_bc128", 128, 128, lab6_bc128_d64, nullptr},
    };
    for (const Step& s : steps)
        for (Fwd f : {s.d64, s.d128})
            if (f) CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
    struct Case { int d, t, causal; float p; };
    const Case cases[] = {{128, 4096, 1, 0}, {128, 4096, 0, 0}, {64, 4096, 1, 0}, {64, 4096, 0, 0},
                          {128, 1024, 1, 0}, {64, 1024, 1, 0}, {128, 16384, 1, 0}, {128, 1000, 1, 0},
                          {64, 127, 0, 0}, {128, 4096, 1, 0.1f}, {64, 333, 1, 0.2f}};
    const int per = lab_per(10);
    if (getenv("LAB_BWD")) {  // the backward only
        backward_lab(per);
        return 0;
    }
    const int only = getenv("LAB_CASE") ? atoi(getenv("LAB_CASE")) : -1;  // one case (for a profiler)
    int ci = -1;
    printf("d\tT\tcausal\tp\tstep\tus\tTFLOP/s\tmax|dO| vs step5\tmax|dlse|\n");
    for (const Case& c : cases) {
        if (++ci, only >= 0 && ci != only) continue;
        const long long T = c.t, D = c.d, B = std::max(1LL, 16384 / T), H = 2048 / D;
        const size_t n = B * T * H * D;
        bf* x = random_bf16(n, 3, 3 * n, 12345);
        bf *q = x, *k = x + n, *v = x + 2 * n;
        const AttnArgs a = lab_args(B, H, T, D, c.causal, c.p, 0x1234567887654321ULL);
        std::vector<bf> o_ref;
        std::vector<float> l_ref;
        for (const Step& s : steps) {
            bf* o = dalloc<bf>(n);
            float* lse = dalloc<float>(B * H * T);
            CK(cudaMemset(o, 0xff, n * 2));
            const int grid = B * H * ((T + s.br - 1) / s.br);
            const int smem = (s.br + 4 * s.bc) * D * 2;
            Fwd f = D == 64 ? s.d64 : s.d128;
            if (!f) continue;
            auto go = [&](int) { f<<<grid, 128, smem>>>(q, k, v, o, lse, a); };
            go(0);
            CK(cudaDeviceSynchronize());
            std::vector<bf> ho(n);
            std::vector<float> hl(B * H * T);
            CK(cudaMemcpy(ho.data(), o, n * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hl.data(), lse, hl.size() * 4, cudaMemcpyDeviceToHost));
            double dO = 0, dl = 0;
            if (o_ref.empty()) {
                o_ref = ho, l_ref = hl;
            } else {
                for (size_t i = 0; i < n; ++i) {
                    const double e = fabs(bf2f(ho[i]) - bf2f(o_ref[i]));
                    dO = e == e ? std::max(dO, e) : INFINITY;
                }
                for (size_t i = 0; i < hl.size(); ++i) {
                    const double e = fabs(hl[i] - l_ref[i]);
                    dl = e == e ? std::max(dl, e) : INFINITY;
                }
            }
            const double us = only >= 0 ? 0.0 : lab_streamed(go, 1, T >= 4096 ? per : 4 * per);
            const double flop = 4.0 * B * H * T * T * D * (c.causal ? 0.5 : 1.0);
            printf("%d\t%d\t%d\t%.2f\t%s\t%.1f\t%.1f\t%.3g\t%.3g\n", c.d, c.t, c.causal, c.p, s.name, us,
                   flop / us * 1e-6, dO, dl);
            CK(cudaFree(o));
            CK(cudaFree(lse));
        }
        CK(cudaFree(x));
    }
    backward_lab(per);
    return 0;
}
