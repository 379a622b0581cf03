// attn_lab.cu — how close does the attention ladder's forward come to FlashAttention-2, and what
// does each of step 6's changes over step 5 buy? Runs step 5 (kernels/attention/05_async.cu) and
// step 6 (06_fa2.cu) on the same bf16 inputs ([B, T, H, D] projections, B = 16384 / T,
// H = 2048 / D, as attention_bench), checks step 6 against step 5 (output and log-sum-exp, with
// and without dropout) and times both (lab_common.cuh's streamed loop). attn_lab.sh times
// PyTorch's FlashAttention-2 on the same shapes in the same run.
#include "lab_common.cuh"
#include "attention/05_async.cu"
#include "attention/06_fa2.cu"

using bf = __nv_bfloat16;
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

static float bf2f(bf x) { return __bfloat162float(x); }

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
    const int only = getenv("LAB_CASE") ? atoi(getenv("LAB_CASE")) : -1;  // one case (for a profiler)
    int ci = -1;
    printf("d\tT\tcausal\tp\tstep\tus\tTFLOP/s\tmax|dO| vs step5\tmax|dlse|\n");
    for (const Case& c : cases) {
        if (++ci, only >= 0 && ci != only) continue;
        const long long T = c.t, D = c.d, B = std::max(1LL, 16384 / T), H = 2048 / D;
        const size_t n = B * T * H * D;
        std::vector<bf> hx(3 * n);
        unsigned st = 12345;
        for (auto& x : hx) {
            st = st * 1664525u + 1013904223u;
            x = __float2bfloat16(((st >> 8) * (1.0f / 16777216.0f)) * 2.0f - 1.0f);
        }
        bf* x = dalloc<bf>(3 * n);
        CK(cudaMemcpy(x, hx.data(), 3 * n * 2, cudaMemcpyHostToDevice));
        bf *q = x, *k = x + n, *v = x + 2 * n;
        AttnArgs a{};
        a.b = B, a.h = H, a.tq = T, a.tk = T;
        a.q_sb = a.k_sb = a.v_sb = T * H * D;
        a.q_sh = a.k_sh = a.v_sh = D;
        a.q_st = a.k_st = a.v_st = H * D;
        a.scale = 1.0f / sqrtf((float)D);
        a.causal = c.causal;
        a.seed = 0x1234567887654321ULL;
        if (c.p > 0) a.drop_scale = 1.0f / (1.0f - c.p), a.drop_thr = (unsigned)(c.p * 4294967296.0);
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
    return 0;
}
