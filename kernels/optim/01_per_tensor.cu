// Optimizer updates, step 1: one launch per parameter tensor, grid-stride, in place. The plain
// form: a model of T tensors costs T launches, and the small ones (biases, LayerNorm gains) leave
// the GPU idle between them. `found_inf` and `skipped` guard the update (optim.cuh), null when
// unguarded.

#include "optim/optim.cuh"

extern "C" __global__ void sgd_f32(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ buf,
                                   long long n, float lr, float momentum, float wd,
                                   const float* __restrict__ found_inf) {
    CAMEL_PDL_WAIT();
    if (guard_skip(found_inf)) return;
    GRID_STRIDE_LOOP(i, n) {
        float gi = g[i] + wd * p[i];
        if (momentum != 0.0f) {
            float b = momentum * buf[i] + gi;
            buf[i] = b;
            gi = b;
        }
        p[i] -= lr * gi;
    }
}

extern "C" __global__ void adam_f32(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                                    float* __restrict__ v, long long n, float lr, float beta1, float beta2,
                                    float eps, float wd, int decoupled, float bc1, float bc2,
                                    const float* __restrict__ found_inf, const float* __restrict__ skipped,
                                    float step) {
    CAMEL_PDL_WAIT();
    if (guard_skip(found_inf)) return;
    guard_bias(skipped, step, beta1, beta2, bc1, bc2);
    GRID_STRIDE_LOOP(i, n) {
        float pi = p[i], gi = g[i];
        if (decoupled) pi -= lr * wd * pi;
        else gi += wd * pi;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    }
}
