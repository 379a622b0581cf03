#!/usr/bin/env python3
"""Warp-stall samples of one kernel from Nsight Compute's source page (CSV of the SASS):
the totals by stall reason and the instructions with the most samples.
Usage: ncu --import R.ncu-rep --page source --csv --print-source sass > s.csv
       python3 stalls.py s.csv [N] > stalls.txt"""
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
cols = rows[head]
reasons = [c for c in cols if c.startswith("stall_") and "(Not Issued)" not in c]
at = {c: cols.index(c) for c in cols}
insts = []
for r in rows[head + 1:]:
    if len(r) != len(cols):
        continue
    n = lambda c: int(float(r[at[c]] or 0))
    by = {c[6:]: n(c) for c in reasons}
    insts.append((n("Warp Stall Sampling (All Samples)"), r[at["Address"]], r[at["Source"]], by))
total = sum(i[0] for i in insts)
print(f"total samples: {total}\n\nby stall reason:")
sums = {k: sum(i[3][k] for i in insts) for k in insts[0][3]}
for k, v in sorted(sums.items(), key=lambda kv: -kv[1])[:8]:
    print(f"  {k:20} {v:6d} {100 * v / total:5.1f}%")
print(f"\nthe {top} instructions with the most samples (address, samples, SASS, top reason):")
for s, addr, src, by in sorted(insts, key=lambda i: -i[0])[:top]:
    k, v = max(by.items(), key=lambda kv: kv[1])
    print(f"  {addr[-5:]} {s:6d}  {src.strip()[:60]:60} {k} {v}")
