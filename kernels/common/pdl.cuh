// pdl.cuh — programmatic dependent launch (PDL), the first statement of every camel kernel.
//
// Kernels on one stream run one after the other: normally the GPU starts scheduling a kernel's
// blocks only once the kernel before it has finished and its writes are visible. That gap (the
// last blocks of one kernel draining, the next kernel's launch and ramp) is a sizeable part of
// a short memory-bound kernel's time (docs/kernels/softmax.md).
//
// With PDL (Hopper, compute capability 9.0 on) camel_cuda launches a kernel with the attribute
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: the GPU may schedule its blocks as soon
// as every block of the kernel before has exited, and the kernel itself waits, with
// `griddepcontrol.wait`, until the kernel before has completed and its memory is visible. The
// wait is the very first statement, before any load or store, so a kernel never reads what the
// one before is still writing, nor overwrites what it is still reading: stream order holds as
// with a plain launch. Only the launch and the start of the blocks overlap the tail.
//
// The wait exists in PTX for sm_90 on, so build-kernels compiles every kernel twice:
// kernels/ptx/<file>.ptx (compute_80: the macro is empty, launched plainly on every GPU) and
// kernels/ptx/sm90/<file>.ptx (compute_90: the wait is there, launched with PDL on compute
// capability 9.0 and later). build-kernels fails if a kernel of the sm90 PTX lacks the wait, and
// camel_cuda launches with PDL only the kernels whose PTX has it. A kernel launched without the
// attribute passes the wait at once. config::Experiments::pdl off launches plainly.
//
// dev/labs/pdl_lab.cu measures back-to-back launches with and without it.
//
// Prefetch and early trigger (a few kernels: softmax step 3 backward, its forward for short rows,
// cross-entropy steps 3 and 4 for short rows, LayerNorm backward step 4). Such a kernel enters
// with
//     thread 0: camel::l2_prefetch_rows(its block's first rows)  -- before the wait
//     CAMEL_PDL_WAIT();
//     CAMEL_PDL_TRIGGER();                                        -- right after it
// The trigger (griddepcontrol.launch_dependents) lets the next kernel be scheduled as soon as
// every block of this one has passed its wait, instead of once they have all exited: its first
// blocks then sit on the SMs this kernel's last blocks leave free, and, if it is one of these
// kernels, ask L2 for their rows while this one finishes. The prefetch is a hint that loads
// nothing into the SM: L2 is where every SM's stores land, so a line fetched early still holds
// what the kernel before writes into it later, and the kernel's own loads (after the wait) read
// the current data. The trigger after the wait (not before) keeps it one kernel deep: a kernel
// two launches ahead cannot fill the SMs with waiting blocks. It pays only where a block's rows
// are few and short: kernels with large blocks of rows (the LayerNorm forward) keep the plain
// wait, and the trigger pays only together with the prefetch (the family pages in docs/kernels/
// have the measurements; dev/labs/pdl_lab.cu is the lab).
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CAMEL_PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define CAMEL_PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define CAMEL_PDL_WAIT() \
    do {                 \
    } while (0)
#define CAMEL_PDL_TRIGGER() \
    do {                    \
    } while (0)
#endif

namespace camel {

// Asks L2 to fetch the 16-byte-aligned part of [p, p + bytes) from DRAM (cp.async.bulk.prefetch,
// 64 KiB an instruction); one thread calls it. Nothing below sm_90 (the compute_80 build).
__device__ __forceinline__ void l2_prefetch(const void* p, long long bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned long long a = (unsigned long long)p, e = a + (unsigned long long)(bytes > 0 ? bytes : 0);
    a = (a + 15) & ~15ull;  // inward: never outside the range asked for
    e &= ~15ull;
    for (; a < e; a += 65536) {
        const unsigned n = (unsigned)(e - a < 65536 ? e - a : 65536);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"(n) : "memory");
    }
#else
    (void)p;
    (void)bytes;
#endif
}

// l2_prefetch of rows [r0, r0 + n) (clipped to the matrix) of a row-major [rows, cols] matrix.
template <typename T>
__device__ __forceinline__ void l2_prefetch_rows(const T* p, long long r0, long long n, long long rows,
                                                 long long cols) {
    const long long r1 = r0 + n < rows ? r0 + n : rows;
    // qualified: for a 16-bit T, argument-dependent lookup would also find any global l2_prefetch
    if (r0 < r1) camel::l2_prefetch(p + r0 * cols, (r1 - r0) * cols * (long long)sizeof(T));
}

}  // namespace camel
