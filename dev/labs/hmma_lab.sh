#!/usr/bin/env bash
# GPU host: build and run the mma.sync HGEMM lab (dev/labs/hmma_lab.cu).
# Usage (repository root): OUT=dir bash dev/labs/hmma_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -std=c++17 -I kernels -I kernels/matmul -gencode arch=compute_90,code=sm_90 -Xptxas -v -o /tmp/hmmalab dev/labs/hmma_lab.cu > "$OUT/hmma_build.txt" 2>&1 || { cat "$OUT/hmma_build.txt"; exit 1; }
/tmp/hmmalab | tee "$OUT/hmma_lab.txt"
