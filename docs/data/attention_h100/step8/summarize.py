#!/usr/bin/env python3
"""The forward rows of one attention_bench output as one row a shape: steps 7 and 8 beside
FlashAttention-2 and cuDNN (TFLOP/s, all from the same call), and step 8's ratios to them.
Usage: python3 summarize.py attn_bench.md > summary.md"""
import sys

tf = {}
for line in open(sys.argv[1]):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 9 and c[3] == "forward":
        d, t, mask, _, impl, dtype, _, tflops, _ = c
        tf[(d, t, mask, impl, dtype)] = float(tflops)
print("| d | T | mask | step 8 bf16 | step 8 f16 | step 7 bf16 | FA2 bf16 | cuDNN bf16 "
      "| step 8 bf16 / cuDNN | step 8 f16 / cuDNN | step 8 bf16 / FA2 |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for d in ("64", "128"):
    for mask in ("full", "causal"):
        for t in ("512", "1024", "2048", "4096", "8192", "16384"):
            g = lambda impl, dt: tf[(d, t, mask, impl, dt)]
            s8b, s8f, s7b = g("camel 8 ws", "bf16"), g("camel 8 ws", "f16"), g("camel 7 wgmma", "bf16")
            fa, cu = g("FA2", "bf16"), g("cuDNN", "bf16")
            print(f"| {d} | {t} | {mask} | {s8b:.0f} | {s8f:.0f} | {s7b:.0f} | {fa:.0f} | {cu:.0f} "
                  f"| {s8b / cu:.2f}× | {s8f / cu:.2f}× | {s8b / fa:.2f}× |")
