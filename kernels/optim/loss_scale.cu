// Dynamic loss scaling (PyTorch's GradScaler), with every decision on the device: the host never
// reads whether a step overflowed. A scaled step is three launches around the optimizer's:
//   1. grad_unscale_f32: every gradient (the multi-tensor table of optim.cuh; `p` is the
//      gradient) multiplied in place by 1 / scale, and found_inf set to 1 when any unscaled
//      element is inf or NaN (only ever set here, so the blocks need no order);
//   2. the optimizer's update, guarded by found_inf and skipped (optim.cuh: guard_skip,
//      guard_bias);
//   3. loss_scale_update_f32: one thread backs the scale off and counts a skipped step on an
//      overflow, or doubles it after growth_interval finite steps in a row, then clears found_inf.

#include "optim/optim.cuh"

#define LS_THREADS 256  // block size of grad_unscale_f32 (the launcher's)

extern "C" __global__ void __launch_bounds__(LS_THREADS)
    grad_unscale_f32(const __grid_constant__ MultiTable tab, int count, const float* __restrict__ scale,
                     float* __restrict__ found_inf) {
    CAMEL_PDL_WAIT();
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const MultiTensor* ts = tab.t;
    const MultiTensor t = ts[find_tensor(ts, count, b)];
    const long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;  // the whole block leaves together
    const long long end = min(t.n, start + MT_CHUNK);
    const float inv = 1.0f / *scale;
    bool bad = false;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        const float g = t.p[i] * inv;
        t.p[i] = g;
        bad |= !isfinite(g);
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1.0f;
}

extern "C" __global__ void loss_scale_update_f32(float* __restrict__ scale, float* __restrict__ growth_tracker,
                                                 float* __restrict__ found_inf, float* __restrict__ skipped,
                                                 float growth_factor, float backoff_factor, int growth_interval) {
    CAMEL_PDL_WAIT();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (*found_inf != 0.0f) {
        *scale *= backoff_factor;
        *growth_tracker = 0.0f;
        *skipped += 1.0f;
    } else {
        float finite_steps = *growth_tracker + 1.0f;
        if (finite_steps >= (float)growth_interval) {
            const float grown = *scale * growth_factor;
            if (isfinite(grown)) *scale = grown;  // a scale that would overflow stays
            finite_steps = 0.0f;
        }
        *growth_tracker = finite_steps;
    }
    *found_inf = 0.0f;
}
