#!/usr/bin/env python3
"""Steps 7 and 8 before and after the one-instruction exponential, from two attention_bench
outputs of the same call (`--steps 7,8`, HEAD's binary and this one's, run back to back): the
forward of step 8 and the backward of step 7 (which steps 7 and 8 run), bf16 TFLOP/s, the ratio
after / before, and the speed after against cuDNN in that call. Rows that only one run reached
are left out.
Usage: python3 summarize.py before_2.md after_2.md > summary.md"""
import sys


def load(path):
    tf = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 9 and c[0].isdigit():
            d, t, mask, pas, impl, dtype, _, tflops, _ = c
            tf[(d, t, mask, pas, impl, dtype)] = float(tflops)
    return tf


before, after = load(sys.argv[1]), load(sys.argv[2])
print("| pass | d | T | mask | before bf16 | after bf16 | after / before | after f16 / before f16 "
      "| after bf16 / cuDNN |")
print("|---|---|---|---|---:|---:|---:|---:|---:|")
for pas, impl in (("forward", "camel 8 ws"), ("backward", "camel 7 wgmma")):
    for d in ("64", "128"):
        for mask in ("full", "causal"):
            for t in ("512", "1024", "2048", "4096", "8192", "16384"):
                k = lambda im, dt: (d, t, mask, pas, im, dt)
                if k(impl, "bf16") not in before or k(impl, "f16") not in after:
                    continue
                b, a = before[k(impl, "bf16")], after[k(impl, "bf16")]
                bf, af = before[k(impl, "f16")], after[k(impl, "f16")]
                cu = after[k("cuDNN", "bf16")]
                print(f"| {pas} | {d} | {t} | {mask} | {b:.0f} | {a:.0f} | {a / b:.2f}× | {af / bf:.2f}× "
                      f"| {a / cu:.2f}× |")
