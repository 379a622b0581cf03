#!/usr/bin/env python3
"""Step 8's forward with and without the FMA-pipe exponentials, from the attention_bench outputs
of one call (`--steps 8`, HEAD's binary and the variant's, alternated twice): bf16 and f16
TFLOP/s of each run and the ratio variant / HEAD, for the rows both runs of a pair reached.
Usage: python3 summarize.py > summary.md (in this folder)"""


def load(path):
    tf = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 9 and c[0].isdigit() and c[3] == "forward" and c[4].startswith("camel"):
            tf[(c[0], c[1], c[2], c[5])] = float(c[7])
    return tf


runs = [(load(f"before_{r}.md"), load(f"after_{r}.md")) for r in (1, 2)]
print("| d | T | mask | dtype | HEAD, run 1 | variant, run 1 | variant / HEAD, run 1 "
      "| HEAD, run 2 | variant, run 2 | variant / HEAD, run 2 |")
print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
keys = sorted(set(runs[1][0]) & set(runs[1][1]), key=lambda k: (int(k[0]), k[2], int(k[1]), k[3]))
for k in keys:
    cells = []
    for before, after in runs:
        if k in before and k in after:
            cells += [f"{before[k]:.0f}", f"{after[k]:.0f}", f"{after[k] / before[k]:.2f}×"]
        else:
            cells += ["", "", ""]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | " + " | ".join(cells) + " |")
