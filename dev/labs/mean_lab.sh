#!/usr/bin/env bash
# GPU host: build and run the mean lab (dev/labs/mean_lab.cu) for sm_90 (griddepcontrol
# and the L2 bulk prefetch are Hopper PTX).
# Usage (repository root): OUT=dir bash dev/labs/mean_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvcc -O3 -std=c++17 -I kernels -arch=sm_90 -o /tmp/meanlab dev/labs/mean_lab.cu > "$OUT/mean_build.txt" 2>&1 || { cat "$OUT/mean_build.txt"; exit 1; }
for r in 16384 65536 4096 long; do /tmp/meanlab $r; done | tee "$OUT/mean_lab.txt"
