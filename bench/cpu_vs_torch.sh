#!/usr/bin/env bash
# camel's CPU backend against PyTorch's on the same CPU, pinned to the same cores with the same
# thread count (camel's CAMEL_CPU_THREADS, PyTorch's --threads): the GPT-mini small size's
# training step (one core) and one LeNet-5 epoch on MNIST (THREADS cores). The two alternate, two
# rounds each; run it on an otherwise idle machine.
#
# Usage: bench/cpu_vs_torch.sh BUNDLE OUT [THREADS]   (BUNDLE: `cargo xtask dist`'s dist/gpu, or
#        any folder with bin/gpt_bench and bin/camel; OUT: where cpu_gpt.txt and cpu_lenet.txt go;
#        THREADS: 1 by default; MNIST from $CAMEL_DATA_DIR, default datasets/). Run from the
#        repository root.
set -u
G=${1:?bundle folder}; OUT=${2:?output folder}; T=${3:-1}
CORES=3-$((2 + T))
mkdir -p "$OUT"
export CAMEL_DATA_DIR=${CAMEL_DATA_DIR:-$PWD/datasets}
: >"$OUT/cpu_gpt.txt"; : >"$OUT/cpu_lenet.txt"
for round in 1 2; do
  echo "## round $round" >>"$OUT/cpu_gpt.txt"
  taskset -c 2 python3 bench/torch/gpt_torch.py --device cpu --threads 1 --sizes small --steps 5 \
    --warmup 2 --out /tmp/torch_cpu.csv >>"$OUT/cpu_gpt.txt" 2>&1
  taskset -c 2 "$G/bin/gpt_bench" --device cpu --sizes small --steps 5 --warmup 2 \
    --torch /tmp/torch_cpu.csv >>"$OUT/cpu_gpt.txt" 2>&1
done
for round in 1 2; do
  rm -rf /tmp/lenet_cpu
  CAMEL_CPU_THREADS=$T taskset -c $CORES "$G/bin/camel" train lenet --data mnist --device cpu \
    --epochs 1 --seed 0 --out /tmp/lenet_cpu >>"$OUT/cpu_lenet.txt" 2>&1
  taskset -c $CORES python3 bench/torch/lenet_torch.py --device cpu --threads "$T" --epochs 1 \
    >>"$OUT/cpu_lenet.txt" 2>&1
done
grep -E '^\| small' "$OUT/cpu_gpt.txt"; grep -E 'ms/step' "$OUT/cpu_lenet.txt"
