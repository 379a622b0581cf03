#!/usr/bin/env python3
"""Step 7's backward, before and after moving dQ's bulk add after the next tile's MMAs at head
dim 64: the mean of two alternated runs of each (bench_old_{1,2}.md, bench_new_{1,2}.md, one
call), bf16 TFLOP/s, with the f16 ratio and the ratios to cuDNN and FlashAttention-2 from the
same call (the references' rows of bench_new_1.md, from attn_torch.txt) of the version kept:
the one after at d = 64, the one before at d = 128.
Usage: python3 summarize.py . > summary.md"""
import sys


def load(path):
    tf = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 9 and c[3] == "backward":
            d, t, mask, _, impl, dtype, _, tflops, _ = c
            tf[(d, t, mask, impl, dtype)] = float(tflops)
    return tf


folder = sys.argv[1]
old = [load(f"{folder}/bench_old_{r}.md") for r in (1, 2)]
new = [load(f"{folder}/bench_new_{r}.md") for r in (1, 2)]
mean = lambda runs, k: sum(r[k] for r in runs) / len(runs)
print("| d | T | mask | before bf16 | after bf16 | after / before bf16 | after / before f16 "
      "| kept bf16 / cuDNN | kept bf16 / FA2 |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for d in ("64", "128"):
    for mask in ("full", "causal"):
        for t in ("512", "1024", "2048", "4096", "8192", "16384"):
            k = lambda impl, dt="bf16": (d, t, mask, impl, dt)
            b0, b1 = mean(old, k("camel 7 wgmma")), mean(new, k("camel 7 wgmma"))
            f0, f1 = mean(old, k("camel 7 wgmma", "f16")), mean(new, k("camel 7 wgmma", "f16"))
            cu, fa = new[0][k("cuDNN")], new[0][k("FA2")]
            kept = b1 if d == "64" else b0
            print(f"| {d} | {t} | {mask} | {b0:.0f} | {b1:.0f} | {b1 / b0:.3f}× | {f1 / f0:.3f}× "
                  f"| {kept / cu:.2f}× | {kept / fa:.2f}× |")
