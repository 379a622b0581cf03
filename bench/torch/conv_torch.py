#!/usr/bin/env python3
"""cuDNN (through PyTorch) timings of the convolutions in bench/src/bin/conv_bench.rs, same
shapes, same timing: back-to-back calls between one pair of CUDA events (as many as take about
2 ms, 3 to 100), the median over the batches, per call. Prints "<shape> <pass>\t<ms>" lines,
which `conv_bench --torch FILE` reads to report the ratio measured on the same GPU.

FP32 throughout: TF32 is off for cuDNN and cuBLAS (camel's conv2d ladder is FP32), and
cudnn.benchmark picks cuDNN's fastest algorithm for each shape.
Usage: python3 bench/torch/conv_torch.py [reps] > torch.txt"""
import sys
import torch
import torch.nn.functional as F

import event_timing  # bench/torch/event_timing.py: the timing loop

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.benchmark = True
dev = "cuda"
torch.manual_seed(0)

# (name, n, c, h, w, o, k, pad), as conv_bench's SHAPES
SHAPES = [
    ("lenet1", 256, 1, 28, 28, 6, 5, 2),
    ("lenet2", 256, 6, 14, 14, 16, 5, 0),
    ("resnet64", 128, 64, 56, 56, 64, 3, 1),
]


def med(fn):
    return event_timing.med(fn, reps, warmup=3)


print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} cudnn {torch.backends.cudnn.version()}", file=sys.stderr)
with torch.no_grad():
    for name, n, c, h, w, o, k, p in SHAPES:
        x = torch.rand(n, c, h, w, device=dev) - 0.5
        wt = torch.rand(o, c, k, k, device=dev) - 0.5
        b = torch.rand(o, device=dev) - 0.5
        y = F.conv2d(x, wt, b, padding=p)
        gy = torch.rand_like(y) - 0.5
        print(f"{name} forward\t{med(lambda: F.conv2d(x, wt, b, padding=p)):.5f}")
        print(f"{name} forward+relu\t{med(lambda: F.relu(F.conv2d(x, wt, b, padding=p))):.5f}")

        def bwd():
            torch.ops.aten.convolution_backward(
                gy, x, wt, [o], [1, 1], [p, p], [1, 1], False, [0, 0], 1, [True, True, True]
            )

        print(f"{name} backward\t{med(bwd):.5f}")
