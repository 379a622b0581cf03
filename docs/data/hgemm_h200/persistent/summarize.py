#!/usr/bin/env python3
"""Tables of step 17's and step 18's persistent kernel against the kernel a block a tile,
GPT-mini's bf16 step with each, and step 17 against cuBLAS in alternated rounds.

Usage: python3 summarize.py DIR [PART]   (run in this folder; DIR is one call's folder; PART,
one of bf16 f16 tf32 gpt squares, prints that table alone; without it, every table DIR has)

DIR holds `gemm_bench` CSVs named ab_<kind>_<variant>_<round>.csv (kind bf16, f16 or tf32;
variant 0 = `--hgemm-blocks 0`, a block a tile; def = the library's choice; all =
`--hgemm-blocks 132`) and PyTorch's `gemm_torch.py` CSVs (torch*.csv, rows cublas_<kind>).
Each cell is the median GFLOP/s over the rounds; the ratios divide those medians.
"""
import csv
import glob
import os
import statistics
import sys

NAMES = {"0": "a block a tile", "def": "default", "all": "132 blocks"}
REFS = {"bf16": "cublas_bf16", "f16": "cublas_f16", "tf32": "cublas_tf32"}


def rows(path):
    with open(path) as f:
        for r in csv.reader(f):
            if r and not r[0].startswith("#") and r[0] != "impl":
                yield r


def shape(r):
    return (int(r[2]), int(r[3]), int(r[4]))


def main(folder, only=None):
    runs = {}  # (kind, variant) -> shape -> [GFLOP/s]
    for path in sorted(glob.glob(os.path.join(folder, "ab_*.csv"))):
        _, kind, variant, _ = os.path.basename(path)[:-4].split("_")
        for r in rows(path):
            runs.setdefault((kind, variant), {}).setdefault(shape(r), []).append(float(r[6]))
    refs = {}
    for path in glob.glob(os.path.join(folder, "torch*.csv")):
        for r in rows(path):
            refs.setdefault(r[0], {})[shape(r)] = float(r[6])
    for kind in ["bf16", "f16", "tf32"]:
        if only not in (None, kind):
            continue
        variants = [v for v in ["0", "def", "all"] if (kind, v) in runs]
        if not variants:
            continue
        ref = refs.get(REFS[kind], {})
        med = {v: {s: statistics.median(x) for s, x in runs[(kind, v)].items()} for v in variants}
        head = [f"{NAMES[v]} (GFLOP/s)" for v in variants]
        head += [f"{NAMES[v]} / a block a tile" for v in variants if v != "0"]
        head += [f"{NAMES[v]} / cuBLAS" for v in variants if ref]
        print(f"\n**{kind}**\n")
        print("| M×K×N | " + " | ".join(head) + " |")
        print("|---|" + "---:|" * len(head))
        for s in med[variants[0]]:
            cells = [f"{med[v][s]:.0f}" for v in variants]
            cells += [f"{med[v][s] / med['0'][s]:.3f}" for v in variants if v != "0"]
            cells += [f"{med[v][s] / ref[s]:.3f}" for v in variants if ref and s in ref]
            print(f"| {s[0]}×{s[1]}×{s[2]} | " + " | ".join(cells) + " |")


def gpt(folder):
    """GPT-mini's bf16 step (`gpt_bench --precision bf16 [--hgemm-blocks 0]`, files
    gpt_<variant>_<round>.md) beside PyTorch's (gpt_torch.csv) from the same call."""
    steps = {}  # (size, variant) -> [ms]
    for path in sorted(glob.glob(os.path.join(folder, "gpt_*_*.md"))):
        _, variant, _ = os.path.basename(path)[:-3].split("_")
        with open(path) as f:
            for r in csv.reader(f):
                if len(r) == 6 and r[1] == "camel":
                    steps.setdefault((r[0], variant), []).append(float(r[3]))
    if not steps:
        return
    torch = {}
    with open(os.path.join(folder, "gpt_torch.csv")) as f:
        for r in csv.reader(f):
            if len(r) == 6 and r[1] != "impl" and not r[0].startswith("#"):
                torch[r[0]] = float(r[3])
    print("\n**GPT-mini, bf16 step (ms)**\n")
    print("| size | a block a tile | default | default / a block a tile (time) | PyTorch | PyTorch / default |")
    print("|---|---|---|---:|---:|---:|")
    for size in ["small", "recipe"]:
        old, new = steps[(size, "0")], steps[(size, "def")]
        m0, m1 = statistics.median(old), statistics.median(new)
        runs = lambda x: ", ".join(f"{v:.3f}" for v in x)
        print(f"| {size} | {runs(old)} | {runs(new)} | {m1 / m0:.3f} | {torch[size]:.3f} | "
              f"{torch[size] / m1:.2f}× |")


def squares(folder):
    """Rounds of `gemm_bench --kernels wgmma --shapes square` (camel_<dtype>_<round>.csv), each
    followed by `gemm_torch.py --shapes square` (torch_<dtype>_<round>.csv): each round's ratio
    and their median."""
    for kind in ["bf16", "f16"]:
        rounds = sorted(glob.glob(os.path.join(folder, f"camel_{kind}_*.csv")))
        if not rounds:
            continue
        ratios, cells = {}, {}
        for path in rounds:
            ref = {shape(r): float(r[6]) for r in rows(path.replace("camel_", "torch_"))}
            for r in rows(path):
                s = shape(r)
                ratios.setdefault(s, []).append(float(r[6]) / ref[s])
                cells.setdefault(s, []).append(f"{float(r[6]) / 1e3:.0f} / {ref[s] / 1e3:.0f}")
        print(f"\n**{kind}, step 17 / cuBLAS, TFLOP/s by round**\n")
        print("| M×K×N | " + " | ".join(f"round {i + 1}" for i in range(len(rounds))) + " | median ratio |")
        print("|---|" + "---:|" * (len(rounds) + 1))
        for s, x in ratios.items():
            each = " | ".join(f"{c} ({q:.3f})" for c, q in zip(cells[s], x))
            print(f"| {s[0]}×{s[1]}×{s[2]} | {each} | {statistics.median(x):.3f} |")


if __name__ == "__main__":
    where = sys.argv[1] if len(sys.argv) > 1 else "."
    part = sys.argv[2] if len(sys.argv) > 2 else None
    if part in (None, "bf16", "f16", "tf32"):
        main(where, part)
    if part in (None, "gpt"):
        gpt(where)
    if part in (None, "squares"):
        squares(where)
