// cp_async.cuh — cp.async copies from global to shared memory without staging registers, shared by
// the kernels that fill their tiles this way (the 16-bit GEMM steps, attention, the fused filter).
// A copy of fewer source bytes than its size zero-fills the rest of the destination; with 0 bytes
// the source is not read (it need only be a valid address).
#pragma once

namespace camel {

// 16 bytes, `bytes` (0 … 16) of them read from `g`; L1 bypassed (.cg).
__device__ __forceinline__ void cp_async16(void* s, const void* g, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)),
                 "l"(g), "r"(bytes));
}

// 4 bytes, read from `g` when `ok`, else zeros.
__device__ __forceinline__ void cp_async4(void* s, const void* g, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)),
                 "l"(g), "r"(ok ? 4 : 0));
}

// Closes the copies issued since the last commit into one group.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most N of this thread's committed groups are still in flight (the others have
// landed in shared memory). The barrier that follows makes every thread's copies visible and
// keeps the compiler's shared-memory reads after it.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace camel
