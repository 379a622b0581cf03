#!/usr/bin/env bash
# GPU host: build and run the step-17 epilogue and cluster lab (dev/labs/wgmma_sm90a_lab.cu) for
# sm_90a (wgmma, TMA multicast: Hopper-only PTX); links libcuda for cuTensorMapEncodeTiled.
# Usage (repository root): OUT=dir bash dev/labs/wgmma_sm90a_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -std=c++17 -I kernels -I kernels/matmul -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmmalab dev/labs/wgmma_sm90a_lab.cu -lcuda > "$OUT/wgmma_build.txt" 2>&1 || { cat "$OUT/wgmma_build.txt"; exit 1; }
/tmp/wgmmalab | tee "$OUT/wgmma_lab.txt"
