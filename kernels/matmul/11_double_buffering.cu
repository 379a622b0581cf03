// SGEMM step 11 — double buffering: step 10 with two shared-memory buffers. While the warps
// multiply the current K-slice, the next slice's global loads are already in flight into
// registers; they are written to the other buffer afterwards, so each slice needs one barrier
// instead of two and the global-memory latency hides behind the FMAs. Tile shapes: the
// autotuner's winners per shape (tuned_11.cuh).
// What it measures: docs/kernels/matmul.md.
#include "gemm_tile.cuh"
#include "tuned_11.cuh"
