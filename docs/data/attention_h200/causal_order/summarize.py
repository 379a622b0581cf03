#!/usr/bin/env python3
"""Step 8 in two builds timed in one call, each twice (`attention_bench --steps 8 --reps 6`, the
builds alternated), with PyTorch's cuDNN and FlashAttention-2 timed in the same call: for the
causal rows whose kernels changed (the forward at both head dims, the backward at d = 64), TFLOP/s
of each build in bf16 (the mean of its two runs), the ratio of the second build to the first in
bf16 and f16, and the second build's bf16 TFLOP/s against cuDNN's and FlashAttention-2's. A last
line gives the range of the second build over the first in the rows the order leaves alone.
Usage: python3 summarize.py DIR BEFORE AFTER > DIR/summary.md
(reads DIR/bench_BEFORE_1.md, _2.md, DIR/bench_AFTER_1.md, _2.md and DIR/attn_torch.txt)"""
import sys


def load(path):
    run = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 9 and c[0].isdigit():
            d, t, mask, pas, impl, dtype, ms, tflops, _ = c
            run[(d, t, mask, pas, impl, dtype)] = (float(ms), float(tflops))
    return run


def mean(xs):
    return sum(xs) / len(xs)


root, before, after = sys.argv[1:4]
b_runs = [load(f"{root}/bench_{before}_{r}.md") for r in (1, 2)]
a_runs = [load(f"{root}/bench_{after}_{r}.md") for r in (1, 2)]
torch = {}
for line in open(f"{root}/attn_torch.txt"):
    key, ms = line.rsplit("\t", 1)
    torch[key] = float(ms)


def cell(runs, k, i):
    return mean([r[k][i] for r in runs])


def flops(d, t, mask, pas):
    """The benchmark's count: 4·B·H·T²·d with B = 16384 / T and H = 2048 / d, half of it with
    the mask, 2.5 times it for the backward."""
    f = 4.0 * 16384 * 2048 * int(t)
    return f * (0.5 if mask == "causal" else 1.0) * (2.5 if pas == "backward" else 1.0)


print(f"| d | T | pass | {before} bf16 | {after} bf16 | {after} / {before} bf16 "
      f"| {after} / {before} f16 | {after} bf16 / cuDNN | {after} bf16 / FA2 |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
ratios = []
for pas in ("forward", "backward"):
    for d in ("64", "128"):
        for mask in ("full", "causal"):
            for t in ("512", "1024", "2048", "4096", "8192", "16384"):
                k = lambda dt: (d, t, mask, pas, "camel 8 ws", dt)
                if any(k(dt) not in r for r in a_runs + b_runs for dt in ("bf16", "f16")):
                    continue
                b, a = cell(b_runs, k("bf16"), 1), cell(a_runs, k("bf16"), 1)
                bf, af = cell(b_runs, k("f16"), 1), cell(a_runs, k("f16"), 1)
                if mask == "full" or (pas == "backward" and d == "128"):
                    ratios += [a / b, af / bf]
                    continue
                # PyTorch's times as TFLOP/s (the bench's ms have three decimals, its TFLOP/s four
                # digits, so the ratios use the TFLOP/s)
                tk = f"d{d} T{t} {mask} {pas}"
                tf = lambda ms: flops(d, t, mask, pas) / (ms * 1e-3) / 1e12
                cudnn, fa2 = tf(torch[f"{tk} cudnn_bf16"]), tf(torch[f"{tk} flash_bf16"])
                print(f"| {d} | {t} | {pas} | {b:.0f} | {a:.0f} | {a / b:.2f}× | {af / bf:.2f}× "
                      f"| {a / cudnn:.2f}× | {a / fa2:.2f}× |")
print()
print(f"Rows the order leaves alone (no mask, and the backward at d = 128), {after} / {before}: "
      f"{min(ratios):.2f}–{max(ratios):.2f}× over {len(ratios)} rows (bf16 and f16).")
