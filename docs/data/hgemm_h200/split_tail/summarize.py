#!/usr/bin/env python3
"""The persistent kernel's split tail (commit 1dd5bf8, reverted) against the same build with it
off, and cuBLAS, in one call: two rounds alternating on, off, PyTorch (bf16, f16) and one for
TF32. Each cell is the mean GFLOP/s of the rounds (thousands); the ratios divide those means.
Usage: python3 summarize.py . > summary.md"""
import csv
import glob
import os
import sys

REFS = {"bf16": "cublas_bf16", "f16": "cublas_f16", "tf32": "cublas_tf32"}


def rows(path):
    with open(path) as f:
        for r in csv.reader(f):
            if r and not r[0].startswith("#") and r[0] != "impl":
                yield r


def mean(xs):
    return sum(xs) / len(xs)


folder = sys.argv[1]
print("| M×K×N | dtype | off (GFLOP/s) | on (GFLOP/s) | on / off | off / cuBLAS | on / cuBLAS |")
print("|---|---|---:|---:|---:|---:|---:|")
for kind in ("bf16", "f16", "tf32"):
    runs = {"on": {}, "off": {}, "ref": {}}
    for variant in ("on", "off"):
        for path in glob.glob(os.path.join(folder, f"{variant}_{kind}_*.csv")):
            for r in rows(path):
                runs[variant].setdefault((r[2], r[3], r[4]), []).append(float(r[6]))
    torch = "f32" if kind == "tf32" else kind
    for path in glob.glob(os.path.join(folder, f"torch_{torch}_*.csv")):
        for r in rows(path):
            if r[0] == REFS[kind]:
                runs["ref"].setdefault((r[2], r[3], r[4]), []).append(float(r[6]))
    for s in sorted(runs["on"], key=lambda s: int(s[0])):
        on, off, ref = mean(runs["on"][s]), mean(runs["off"][s]), mean(runs["ref"][s])
        print(f"| {s[0]}×{s[1]}×{s[2]} | {kind} | {off / 1e3:.0f}k | {on / 1e3:.0f}k | {on / off:.3f} "
              f"| {off / ref:.3f} | {on / ref:.3f} |")
