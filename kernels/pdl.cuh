// pdl.cuh — programmatic dependent launch (PDL), the first statement of every camel kernel.
//
// Kernels on one stream run one after the other: normally the GPU starts scheduling a kernel's
// blocks only once the kernel before it has finished and its writes are visible. That gap (the
// last blocks of one kernel draining, the next kernel's launch and ramp) costs about 1–1.5 µs
// per kernel on the H100, which is 3–20 % of a memory-bound kernel of 7–40 µs.
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
// attribute passes the wait at once. `CAMEL_PDL=off` turns PDL off (for A/B timing).
//
// Measured (H100, bench/pdl_lab.cu, streamed back-to-back launches): LayerNorm forward
// 16384×768 36.7 → 35.7 µs, softmax 65536×65 15.0 → 13.6 µs, cross-entropy 16384×65 (mean
// fused) 7.0 → 5.6 µs, a float4 copy of 2 × 50 MB 36.5 → 34.9 µs.
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CAMEL_PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define CAMEL_PDL_WAIT() \
    do {                 \
    } while (0)
#endif
