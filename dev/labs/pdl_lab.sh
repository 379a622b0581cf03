#!/usr/bin/env bash
# GPU host: build and run the PDL lab (dev/labs/pdl_lab.cu) for sm_90 (griddepcontrol is Hopper PTX).
# Usage (repository root): OUT=dir bash dev/labs/pdl_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -I kernels -arch=sm_90 -o /tmp/pdllab dev/labs/pdl_lab.cu > "$OUT/pdl_build.txt" 2>&1 || { cat "$OUT/pdl_build.txt"; exit 1; }
/tmp/pdllab | tee "$OUT/pdl_lab.txt"
