#!/usr/bin/env bash
# GPU host: build and run the LayerNorm lab (dev/labs/layernorm_lab.cu), as the library loads its
# kernels (compute_80 PTX, JIT-compiled by the driver) and natively for sm_90.
# Usage (repository root): OUT=dir bash dev/labs/layernorm_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -I kernels -gencode arch=compute_80,code=compute_80 -o /tmp/lnlab dev/labs/layernorm_lab.cu > "$OUT/build.txt" 2>&1 || { cat "$OUT/build.txt"; exit 1; }
/tmp/lnlab | tee "$OUT/lab_ptx80.txt"
if [ "${SM90:-0}" = 1 ]; then
  nvcc -O3 -I kernels -arch=sm_90 -Xptxas -v -o /tmp/lnlab90 dev/labs/layernorm_lab.cu > "$OUT/ptxas.txt" 2>&1 && /tmp/lnlab90 | tee "$OUT/lab_sm90.txt"
fi
