#!/usr/bin/env bash
# camel's CPU backend against PyTorch's on the same CPU, one pinned core each (camel's CPU backend
# is single-threaded, so one PyTorch thread is the like-for-like comparison): the GPT-mini small
# size's training step and one LeNet-5 epoch on MNIST. The two alternate, two rounds each; run it
# on an otherwise idle machine.
#
# Usage: bench/cpu_vs_torch.sh BUNDLE OUT   (BUNDLE: `cargo xtask dist`'s dist/gpu, or any folder
#        with bin/gpt_bench and bin/camel; OUT: where cpu_gpt.txt and cpu_lenet.txt go; MNIST from
#        $CAMEL_DATA_DIR, default datasets/). Run from the repository root.
set -u
G=${1:?bundle folder}; OUT=${2:?output folder}
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
  taskset -c 3 "$G/bin/camel" train lenet --data mnist --device cpu --epochs 1 --seed 0 \
    --out /tmp/lenet_cpu >>"$OUT/cpu_lenet.txt" 2>&1
  taskset -c 3 python3 bench/torch/lenet_torch.py --device cpu --threads 1 --epochs 1 \
    >>"$OUT/cpu_lenet.txt" 2>&1
done
grep -E '^\| small' "$OUT/cpu_gpt.txt"; grep -E 'ms/step' "$OUT/cpu_lenet.txt"
