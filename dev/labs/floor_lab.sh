#!/usr/bin/env bash
# GPU host: build and run the small-op floor lab (dev/labs/floor_lab.cu) for sm_90 (griddepcontrol
# and the L2 bulk prefetch are Hopper PTX).
# Usage (repository root): OUT=dir bash dev/labs/floor_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvcc -O3 -std=c++17 -I kernels -arch=sm_90 -o /tmp/floorlab dev/labs/floor_lab.cu > "$OUT/floor_build.txt" 2>&1 || { cat "$OUT/floor_build.txt"; exit 1; }
/tmp/floorlab | tee "$OUT/floor_lab.txt"
