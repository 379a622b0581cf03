#!/usr/bin/env bash
# GPU host: build and run the short-row exp lab (dev/labs/exp_lab.cu) for sm_90 (griddepcontrol is Hopper PTX).
# Usage (repository root): OUT=dir bash dev/labs/exp_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -I kernels -arch=sm_90 -o /tmp/explab dev/labs/exp_lab.cu > "$OUT/exp_build.txt" 2>&1 || { cat "$OUT/exp_build.txt"; exit 1; }
/tmp/explab | tee "$OUT/exp_lab.txt"
