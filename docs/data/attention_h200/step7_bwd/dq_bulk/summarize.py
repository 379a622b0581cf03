#!/usr/bin/env python3
"""Step 7's backward at head dim 128 with dQ added by bulk copies from shared memory (this
folder's attention_bench output) beside FlashAttention-2 and cuDNN from the same call, and the
kernel that added dQ from registers (the whole table of an earlier call on the same machine),
TFLOP/s.
Usage: python3 summarize.py attn_bench.md whole_table.md > summary.md"""
import sys


def load(path):
    tf = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 9 and c[3] == "backward":
            d, t, mask, _, impl, dtype, _, tflops, _ = c
            tf[(d, t, mask, impl, dtype)] = float(tflops)
    return tf


new, old = load(sys.argv[1]), load(sys.argv[2])
print("| T | mask | registers bf16 (earlier call) | bulk bf16 | bulk f16 | FA2 bf16 | cuDNN bf16 "
      "| bulk bf16 / FA2 | bulk bf16 / cuDNN | bulk f16 / cuDNN |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for mask in ("full", "causal"):
    for t in ("512", "1024", "2048", "4096", "8192", "16384"):
        k = lambda impl, dt: ("128", t, mask, impl, dt)
        b, f = new[k("camel 7 wgmma", "bf16")], new[k("camel 7 wgmma", "f16")]
        fa, cu = new[k("FA2", "bf16")], new[k("cuDNN", "bf16")]
        r = old[k("camel 7 wgmma", "bf16")]
        print(f"| {t} | {mask} | {r:.0f} | {b:.0f} | {f:.0f} | {fa:.0f} | {cu:.0f} "
              f"| {b / fa:.2f}× | {b / cu:.2f}× | {f / cu:.2f}× |")
