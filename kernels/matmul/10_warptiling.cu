// SGEMM step 10 — warp tiling: between the block tile and the thread tile sits a warp tile.
// The block's BM×BN tile of C is split among its warps; a warp covers its WM×WN tile in
// WMITER×WNITER sub-tiles, each lane holding a TM×TN block of every sub-tile. A warp's
// shared-memory reads then hit few distinct addresses (broadcasts) and a lane's accumulators
// stay in registers. The tile shapes are the autotuner's winners per shape (tuned_10.cuh);
// see docs/kernels/matmul.md for what they are and what they measured.
#include "gemm_tile.cuh"
#include "tuned_10.cuh"
