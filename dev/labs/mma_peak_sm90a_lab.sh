#!/usr/bin/env bash
# GPU host: build and run the tensor-core ceiling lab (dev/labs/mma_peak_sm90a_lab.cu) for sm_90a
# (wgmma is Hopper-only PTX).
# Usage (repository root): OUT=dir bash dev/labs/mma_peak_sm90a_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -std=c++17 -I kernels -I kernels/matmul -gencode arch=compute_90a,code=sm_90a -o /tmp/mmapeak dev/labs/mma_peak_sm90a_lab.cu > "$OUT/mma_peak_build.txt" 2>&1 || { cat "$OUT/mma_peak_build.txt"; exit 1; }
/tmp/mmapeak | tee "$OUT/mma_peak_lab.txt"
