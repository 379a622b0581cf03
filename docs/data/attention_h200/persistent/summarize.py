#!/usr/bin/env python3
"""Step 8's forward launched a block a query tile (`--persistent off`) and one block a
multiprocessor (`--persistent on`), from the four attention_bench outputs of one call
(`off_1.md`, `on_1.md`, `off_2.md`, `on_2.md`, run in that order, `--steps 8 --reps 6`, PyTorch's
timings of the same call): TFLOP/s in bf16 (the mean of the two runs of each), the ratio on / off
in bf16 and in f16, and each against cuDNN's bf16 forward in that call (the mean of its four
readings).
Usage: python3 summarize.py DIR > DIR/summary.md (DIR: ., static or early_take)"""
import sys


def load(path):
    tf = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 9 and c[0].isdigit():
            d, t, mask, pas, impl, dtype, _, tflops, _ = c
            tf[(d, t, mask, pas, impl, dtype)] = float(tflops)
    return tf


def mean(xs):
    return sum(xs) / len(xs)


root = sys.argv[1]
on = [load(f"{root}/on_{r}.md") for r in (1, 2)]
off = [load(f"{root}/off_{r}.md") for r in (1, 2)]
print("| d | T | mask | off bf16 | on bf16 | on / off bf16 | on / off f16 | off bf16 / cuDNN "
      "| on bf16 / cuDNN |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for d in ("64", "128"):
    for mask in ("full", "causal"):
        for t in ("512", "1024", "2048", "4096", "8192", "16384"):
            k = lambda dt, im="camel 8 ws": (d, t, mask, "forward", im, dt)
            if any(k("bf16") not in r or k("f16") not in r for r in on + off):
                continue
            a, b = mean([r[k("bf16")] for r in on]), mean([r[k("bf16")] for r in off])
            af, bf = mean([r[k("f16")] for r in on]), mean([r[k("f16")] for r in off])
            cu = mean([r[k("bf16", "cuDNN")] for r in on + off])
            print(f"| {d} | {t} | {mask} | {b:.0f} | {a:.0f} | {a / b:.2f}× | {af / bf:.2f}× "
                  f"| {b / cu:.2f}× | {a / cu:.2f}× |")
