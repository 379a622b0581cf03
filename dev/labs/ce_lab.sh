#!/usr/bin/env bash
# GPU host: build and run the cross-entropy lab (dev/labs/ce_lab.cu) as the library loads its
# kernels (compute_80 PTX, JIT-compiled by the driver).
# Usage (repository root): OUT=dir bash dev/labs/ce_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvcc -O3 -std=c++17 -I kernels -gencode arch=compute_80,code=compute_80 -o /tmp/celab dev/labs/ce_lab.cu > "$OUT/build_ce.txt" 2>&1 || { cat "$OUT/build_ce.txt"; exit 1; }
/tmp/celab | tee "$OUT/ce_lab.txt"
