#!/usr/bin/env python3
"""PyTorch (cuDNN) timings of the image filter that bench/src/bin/filter_bench.rs times, same
image, same filter size, same method. F.conv2d of the [1, 1, N, N] image with a random
(2r+1) x (2r+1) filter, padding r ("conv2d direct"), and the separable form as two 1-D passes
([1, 1, 1, 2r+1] then [1, 1, 2r+1, 1] filters, "conv2d separable").

Method (as filter_bench): the image and outputs rotate through SETS copies, so each call reads
DRAM rather than L2; three untimed calls; then REPS batches of calls back to back between two
CUDA events (a batch spans about 20 ms, at least 3 calls); the median per call.

Prints a table and, with --out FILE, writes "<row>\t<ms>" lines, which
`filter_bench --torch FILE` reads to print the ratios.

usage: filter_torch.py [--size N] [--radius R] [--reps N] [--out FILE]
"""
import argparse
import math
import torch
import torch.nn.functional as F

SETS = 8
BATCH_SPAN_MS = 20.0


def median_ms(fn, reps):
    for i in range(3):
        fn(i % SETS)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn(0)
    b.record()
    b.synchronize()
    batch = max(3, min(1000, math.ceil(BATCH_SPAN_MS / max(a.elapsed_time(b), 1e-3))))
    times = []
    for r in range(reps):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for j in range(batch):
            fn((r + j) % SETS)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / batch)
    times.sort()
    return times[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--radius", type=int, default=8)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--out")
    a = p.parse_args()
    n, r = a.size, a.radius
    k = 2 * r + 1
    dev = "cuda"
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    # no TF32: camel's kernels are plain f32
    torch.backends.cudnn.allow_tf32 = False
    xs = [torch.rand(1, 1, n, n, device=dev) * 2 - 1 for _ in range(SETS)]
    w2 = torch.rand(1, 1, k, k, device=dev) * 2 - 1
    row = torch.rand(1, 1, 1, k, device=dev) * 2 - 1
    col = torch.rand(1, 1, k, 1, device=dev) * 2 - 1

    def direct(i):
        return F.conv2d(xs[i], w2, padding=r)

    def separable(i):
        return F.conv2d(F.conv2d(xs[i], row, padding=(0, r)), col, padding=(r, 0))

    # the two forms agree on a separable filter
    ref = F.conv2d(xs[0], col * row, padding=r)
    err = (separable(0) - ref).abs().max().item()
    with torch.no_grad():
        rows = [("conv2d direct", median_ms(direct, a.reps)), ("conv2d separable", median_ms(separable, a.reps))]
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}; image {n}x{n} f32, radius {r}; separable vs direct max |diff| {err:.2e}")
    print()
    print("| row | ms |")
    print("|---|---|")
    for name, ms in rows:
        print(f"| {name} | {ms:.4f} |")
    if a.out:
        with open(a.out, "w") as f:
            f.write(f"# device: {torch.cuda.get_device_name()}\n")
            for name, ms in rows:
                f.write(f"{name}\t{ms}\n")


if __name__ == "__main__":
    main()
