#!/usr/bin/env python3
"""Step 7's backward at head dim 64 in the whole attention table (three warpgroups a block)
beside step 6's fused backward, FlashAttention-2 and cuDNN from the same call, and the block of
two warpgroups (barrier/attn_bench.md, an earlier call on the same machine), TFLOP/s.
Usage: python3 summarize.py whole_table.md barrier/attn_bench.md > summary.md"""
import sys


def load(path):
    tf = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 9 and c[3] == "backward":
            d, t, mask, _, impl, dtype, _, tflops, _ = c
            tf[(d, t, mask, impl, dtype)] = float(tflops)
    return tf


new, two = load(sys.argv[1]), load(sys.argv[2])
print("| T | mask | two warpgroups bf16 (earlier call) | three bf16 | three f16 | step 6 bf16 "
      "| FA2 bf16 | cuDNN bf16 | three bf16 / step 6 | three bf16 / FA2 | three bf16 / cuDNN |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for mask in ("full", "causal"):
    for t in ("512", "1024", "2048", "4096", "8192", "16384"):
        k = lambda impl, dt: ("64", t, mask, impl, dt)
        b, f = new[k("camel 7 wgmma", "bf16")], new[k("camel 7 wgmma", "f16")]
        s6 = new[k("camel 6 fa2", "bf16")]
        fa, cu = new[k("FA2", "bf16")], new[k("cuDNN", "bf16")]
        w2 = two[k("camel 7 wgmma", "bf16")]
        print(f"| {t} | {mask} | {w2:.0f} | {b:.0f} | {f:.0f} | {s6:.0f} | {fa:.0f} | {cu:.0f} "
              f"| {b / s6:.2f}× | {b / fa:.2f}× | {b / cu:.2f}× |")
