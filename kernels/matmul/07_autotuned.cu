// SGEMM steps 7–9 — autotuned block tiling: step 6's kernel as a template over BM, BN, BK, TM
// and TN. `cargo xtask gemm-search` compiles every valid configuration (with
// CAMEL_GEMM_SEARCH, from a generated search_space.cuh), `gemm_tune` times them on the GPU at
// the benchmark shapes and writes the winners to tuned_07.cuh (and tuned_10/11.cuh for the
// warp-tiled steps) and to crates/camel-cuda/src/kernels/matmul_tuned.rs, which picks the
// winner of the nearest tuned shape at run time. What the search found is in docs/kernels/matmul.md.
#include "gemm_tile.cuh"

#ifdef CAMEL_GEMM_SEARCH
#include "search_space.cuh"
#else
#include "tuned_07.cuh"
#endif
