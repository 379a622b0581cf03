#!/usr/bin/env python3
"""The backward rows at head dim 128 of one attention_bench output, one row a shape: step 7's
backward (the Hopper one) beside step 6's, FlashAttention-2 and cuDNN (TFLOP/s, all from the
same call), and step 7's ratios to them.
Usage: python3 summarize.py attn_bench.md > summary.md"""
import sys

tf = {}
for line in open(sys.argv[1]):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 9 and c[3] == "backward":
        d, t, mask, _, impl, dtype, _, tflops, _ = c
        tf[(d, t, mask, impl, dtype)] = float(tflops)
print("| d | T | mask | step 7 bf16 | step 7 f16 | step 6 bf16 | FA2 bf16 | cuDNN bf16 "
      "| step 7 bf16 / FA2 | step 7 bf16 / cuDNN | step 7 f16 / cuDNN |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for d in ("128",):
    for mask in ("full", "causal"):
        for t in ("512", "1024", "2048", "4096", "8192", "16384"):
            g = lambda impl, dt: tf[(d, t, mask, impl, dt)]
            s7b, s7f, s6b = g("camel 7 wgmma", "bf16"), g("camel 7 wgmma", "f16"), g("camel 6 fa2", "bf16")
            fa, cu = g("FA2", "bf16"), g("cuDNN", "bf16")
            print(f"| {d} | {t} | {mask} | {s7b:.0f} | {s7f:.0f} | {s6b:.0f} | {fa:.0f} | {cu:.0f} "
                  f"| {s7b / fa:.2f}× | {s7b / cu:.2f}× | {s7f / cu:.2f}× |")
