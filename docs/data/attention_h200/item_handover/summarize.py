#!/usr/bin/env python3
"""Step 8's forward in two builds timed in one call, each twice (`attention_bench --steps 8
--reps 6`, the builds alternated): TFLOP/s of each build in bf16 (the mean of its two runs) and
the ratio of the second build to the first in bf16 and in f16.
Usage: python3 summarize.py DIR BEFORE AFTER > DIR/summary.md
(reads DIR/bench_BEFORE_1.md, _2.md and DIR/bench_AFTER_1.md, _2.md)"""
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


root, before, after = sys.argv[1:4]
b_runs = [load(f"{root}/bench_{before}_{r}.md") for r in (1, 2)]
a_runs = [load(f"{root}/bench_{after}_{r}.md") for r in (1, 2)]
print(f"| d | T | mask | {before} bf16 | {after} bf16 | {after} / {before} bf16 "
      f"| {after} / {before} f16 |")
print("|---|---|---|---:|---:|---:|---:|")
for d in ("64", "128"):
    for mask in ("full", "causal"):
        for t in ("512", "1024", "2048", "4096", "8192", "16384"):
            k = lambda dt: (d, t, mask, "forward", "camel 8 ws", dt)
            if any(k("bf16") not in r or k("f16") not in r for r in a_runs + b_runs):
                continue
            b, a = mean([r[k("bf16")] for r in b_runs]), mean([r[k("bf16")] for r in a_runs])
            bf, af = mean([r[k("f16")] for r in b_runs]), mean([r[k("f16")] for r in a_runs])
            print(f"| {d} | {t} | {mask} | {b:.0f} | {a:.0f} | {a / b:.2f}× | {af / bf:.2f}× |")
