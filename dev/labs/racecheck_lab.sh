#!/usr/bin/env bash
# GPU host: build the racecheck lab (dev/labs/racecheck_lab.cu) and run each protocol plainly and
# under compute-sanitizer's racecheck.
# Usage (repository root): OUT=dir bash dev/labs/racecheck_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvcc -O3 -arch=sm_90 -o /tmp/racechecklab dev/labs/racecheck_lab.cu > "$OUT/racecheck_build.txt" 2>&1 || { cat "$OUT/racecheck_build.txt"; exit 1; }
for p in 0 1 2; do
  /tmp/racechecklab $p
  compute-sanitizer --tool racecheck /tmp/racechecklab $p 2>&1 | grep -E "RACECHECK SUMMARY|Race reported" | head -3
done | tee "$OUT/racecheck_lab.txt"
