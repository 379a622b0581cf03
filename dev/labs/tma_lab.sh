#!/usr/bin/env bash
# GPU host: build and run the short-row staging lab (dev/labs/tma_lab.cu) for sm_90 (bulk copies and griddepcontrol are Hopper PTX).
# Usage (repository root): OUT=dir bash dev/labs/tma_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -I kernels -arch=sm_90 -o /tmp/tmalab dev/labs/tma_lab.cu > "$OUT/tma_build.txt" 2>&1 || { cat "$OUT/tma_build.txt"; exit 1; }
/tmp/tmalab | tee "$OUT/tma_lab.txt"
