#!/usr/bin/env bash
# GPU host: build and run the short-row pipelining lab (dev/labs/pipe_lab.cu) for sm_90 (griddepcontrol is Hopper PTX).
# Usage (repository root): OUT=dir bash dev/labs/pipe_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -I kernels -arch=sm_90 -o /tmp/pipelab dev/labs/pipe_lab.cu > "$OUT/pipe_build.txt" 2>&1 || { cat "$OUT/pipe_build.txt"; exit 1; }
/tmp/pipelab | tee "$OUT/pipe_lab.txt"
