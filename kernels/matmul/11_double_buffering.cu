// SGEMM step 11 — double buffering: step 10 with two shared-memory buffers. While the warps
// multiply the current K-slice, the next slice's global loads are already in flight into
// registers; they are written to the other buffer afterwards, so each slice needs one barrier
// instead of two and the global-memory latency hides behind the FMAs. Tile shapes: the
// autotuner's winners per shape (tuned_11.cuh).
// Measured (H200): 40.1 TFLOP/s at 4096³, 40.3 at 8192³ (0.78–0.79× cuBLAS FP32), the best
// FP32 step and the library default; winner 128×128×8, 64×32 warp tiles, 8×8 per lane.
#include "gemm_tile.cuh"
#include "tuned_11.cuh"
