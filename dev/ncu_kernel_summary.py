#!/usr/bin/env python3
"""Kernel time of a few training steps by kernel, from ncu CSVs.

Usage: ncu_kernel_summary.py STEPS LABEL=FILE.csv[.xz] ...

Each FILE is `ncu --metrics gpu__time_duration.sum --csv --page raw --print-units base` over a
program that runs STEPS steps. Prints a Markdown table of the time per step of all kernels, of
the GEMMs (with their transposes and split-K reductions) and of the copies, then the GEMM
kernels of each run by name and grid.
"""
import collections
import csv
import lzma
import sys


def rows(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as fh:
        lines = [l for l in fh if l.startswith('"')]
    r = list(csv.reader(lines))
    hdr = r[0]
    ki, ti, gi = (hdr.index(c) for c in ("Kernel Name", "gpu__time_duration.sum", "Grid Size"))
    for row in r[1:]:
        try:
            yield row[ki], row[gi], float(row[ti].replace(",", ""))
        except ValueError:
            continue  # the units row


def is_gemm(name):
    return any(s in name for s in ("gemm", "xmma", "splitKreduce", "transpose"))


def main():
    steps = float(sys.argv[1])
    runs = [a.split("=", 1) for a in sys.argv[2:]]
    per = 1e6 * steps  # ns → ms per step
    print("| run | all kernels ms | GEMM ms (incl. transposes, split-K reductions) | copies ms |")
    print("|---|---|---|---|")
    gemms = {}
    for label, path in runs:
        tot = gem = cp = 0.0
        agg = collections.defaultdict(lambda: [0, 0.0])
        for name, grid, t in rows(path):
            tot += t
            if is_gemm(name):
                gem += t
                agg[(name[:60], grid)][0] += 1
                agg[(name[:60], grid)][1] += t
            if "copy" in name.lower() or "Cat" in name:
                cp += t
        gemms[label] = agg
        print(f"| {label} | {tot / per:.2f} | {gem / per:.2f} | {cp / per:.2f} |")
    for label, _ in runs:
        print(f"\n## GEMM kernels, {label}\n")
        print("| ms per step | launches per step | µs each | grid | kernel |\n|---|---|---|---|---|")
        for (name, grid), (n, t) in sorted(gemms[label].items(), key=lambda x: -x[1][1])[:16]:
            print(f"| {t / per:.3f} | {n / steps:.0f} | {t / n / 1e3:.1f} | {grid} | `{name}` |")


if __name__ == "__main__":
    main()
