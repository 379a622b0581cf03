#!/usr/bin/env python3
"""The persistent kernel on one block a multiprocessor (132, `ab_<kind>_def_<round>.csv`, the
launcher's choice before) against 128 blocks (`--hgemm-blocks 128`, `ab_<kind>_128_<round>.csv`,
what the balanced choice runs at these shapes), with cuBLAS (`torch_*.csv`), two alternated
rounds in one call. Cells: the mean GFLOP/s of the rounds (thousands); the ratios divide those.
Shapes the persistent kernel does not run (64-wide tiles split along K) are left out.
Usage: python3 summarize.py . > summary.md"""
import csv
import glob
import os
import sys

REFS = {"bf16": ("bf16", "cublas_bf16"), "f16": ("f16", "cublas_f16"), "tf32": ("f32", "cublas_tf32")}
# M, K, N where the persistent kernel runs
SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (8192, 128, 512),
          (16384, 384, 1536), (16384, 1536, 384)]


def rows(path):
    with open(path) as f:
        for r in csv.reader(f):
            if r and not r[0].startswith("#") and r[0] != "impl":
                yield r


def means(pattern, impl=None):
    acc = {}
    for path in glob.glob(pattern):
        for r in rows(path):
            if impl is None or r[0] == impl:
                acc.setdefault((int(r[2]), int(r[3]), int(r[4])), []).append(float(r[6]))
    return {s: sum(x) / len(x) for s, x in acc.items()}


folder = sys.argv[1]
print("| M×K×N | dtype | 132 blocks (GFLOP/s) | 128 blocks (GFLOP/s) | 128 / 132 "
      "| 132 / cuBLAS | 128 / cuBLAS |")
print("|---|---|---:|---:|---:|---:|---:|")
for kind, (torch, impl) in REFS.items():
    a = means(os.path.join(folder, f"ab_{kind}_def_*.csv"))
    b = means(os.path.join(folder, f"ab_{kind}_128_*.csv"))
    ref = means(os.path.join(folder, f"torch_{torch}_*.csv"), impl)
    for s in SHAPES:
        print(f"| {s[0]}×{s[1]}×{s[2]} | {kind} | {a[s] / 1e3:.0f}k | {b[s] / 1e3:.0f}k "
              f"| {b[s] / a[s]:.3f} | {a[s] / ref[s]:.3f} | {b[s] / ref[s]:.3f} |")
