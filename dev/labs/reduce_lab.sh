#!/usr/bin/env bash
# GPU host: build and run the reduction lab (dev/labs/reduce_lab.cu) as the library loads its
# kernels (compute_80 PTX, JIT-compiled by the driver).
# Usage (repository root): OUT=dir bash dev/labs/reduce_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvcc -O3 -I kernels -gencode arch=compute_80,code=compute_80 -o /tmp/redlab dev/labs/reduce_lab.cu > "$OUT/build_reduce.txt" 2>&1 || { cat "$OUT/build_reduce.txt"; exit 1; }
/tmp/redlab | tee "$OUT/reduce_lab.txt"
