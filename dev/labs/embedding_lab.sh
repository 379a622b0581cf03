#!/usr/bin/env bash
# GPU host: build and run the embedding-backward lab (dev/labs/embedding_lab.cu), as the library
# loads its kernels (compute_80 PTX, JIT-compiled by the driver).
# Usage (repository root): OUT=dir bash dev/labs/embedding_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -I kernels -gencode arch=compute_80,code=compute_80 -o /tmp/emblab dev/labs/embedding_lab.cu > "$OUT/build.txt" 2>&1 || { cat "$OUT/build.txt"; exit 1; }
/tmp/emblab | tee "$OUT/emb_lab.txt"
