// Gradient clipping by global norm (PyTorch's clip_grad_norm_), over every gradient of a model
// with the multi-tensor table of the optimizer steps (optim/optim.cuh; `p` is the gradient, the
// other pointers are unused). Three launches whatever the number of tensors (more only past
// MT_PARAM_MAX tensors), and no host read:
//   1. grad_sumsq_f32: each block sums the squares of its chunk in f32 and writes its partial
//      sum to partial[b] (one slot per block of every table, in table order);
//   2. grad_norm_finish_f32: one block adds the partials in a fixed order (each thread a fixed
//      stride, then a fixed tree), so the norm is the same bits on every run; it writes the
//      norm and the scale min(1, max_norm / (norm + 1e-6)), NaN when the norm is NaN;
//   3. grad_scale_f32: every gradient multiplied in place by the scale read from the device;
//      blocks return at once when the scale is 1 (nothing to clip).
// A NaN or inf gradient element gives a NaN or inf norm, and a NaN scale or a zero scale that
// turns the inf elements into NaN: the gradients show it, as PyTorch's do.

#include "optim/optim.cuh"

#define GN_THREADS 256        // block size of steps 1 and 3 (the launcher's)
#define GN_FINISH_THREADS 1024  // the one block of step 2

extern "C" __global__ void __launch_bounds__(GN_THREADS)
    grad_sumsq_f32(const __grid_constant__ MultiTable tab, int count, float* __restrict__ partial,
                   long long nblocks) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (b >= nblocks) return;  // the grid's rounding: the whole block leaves together
    const MultiTensor* ts = tab.t;
    const MultiTensor t = ts[find_tensor(ts, count, b)];
    const long long start = (b - t.first_block) * MT_CHUNK;
    const long long end = min(t.n, start + MT_CHUNK);
    float acc = 0.0f;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        const float g = t.p[i];
        acc += g * g;
    }
    acc = camel::block_sum(acc, scratch);
    if (threadIdx.x == 0) partial[b] = acc;
}

extern "C" __global__ void __launch_bounds__(GN_FINISH_THREADS)
    grad_norm_finish_f32(const float* __restrict__ partial, long long nblocks, float max_norm,
                         float* __restrict__ norm, float* __restrict__ scale) {
    CAMEL_PDL_WAIT();
    __shared__ float scratch[32];
    float acc = 0.0f;
    for (long long i = threadIdx.x; i < nblocks; i += blockDim.x) acc += partial[i];
    acc = camel::block_sum(acc, scratch);
    if (threadIdx.x == 0) {
        const float n = sqrtf(acc);
        const float coef = max_norm / (n + 1e-6f);
        norm[0] = n;
        scale[0] = coef != coef ? coef : fminf(coef, 1.0f);
    }
}

extern "C" __global__ void __launch_bounds__(GN_THREADS)
    grad_scale_f32(const __grid_constant__ MultiTable tab, int count, const float* __restrict__ scale) {
    CAMEL_PDL_WAIT();
    const float s = *scale;
    if (s == 1.0f) return;
    const long long b = blockIdx.x + (long long)blockIdx.y * gridDim.x;
    const MultiTensor* ts = tab.t;
    const MultiTensor t = ts[find_tensor(ts, count, b)];
    const long long start = (b - t.first_block) * MT_CHUNK;
    if (start >= t.n) return;
    const long long end = min(t.n, start + MT_CHUNK);
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) t.p[i] *= s;
}
