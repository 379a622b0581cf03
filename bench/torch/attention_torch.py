#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention at the shapes of bench/src/bin/attention_bench.rs,
timed the same way: back-to-back calls between one pair of CUDA events (as many as take about
2 ms, 3 to 100), the median over the batches, per call. Prints "<case> <pass> <backend>\t<ms>"
lines, which `attention_bench --torch FILE` reads to report ratios measured on the same GPU.

Backends: efficient_f32 (the memory-efficient kernel, what SDPA runs for f32: the reference of
camel's f32 steps), flash_bf16 and flash_f16 (FlashAttention-2: the reference of camel's 16-bit
steps) and cudnn_bf16 (cuDNN's attention), each forced with sdpa_kernel. The backward is timed alone: autograd.grad of a saved forward.
With a dropout probability p > 0 (third argument) it times FA2 alone, with SDPA's `dropout_p=p`:
the reference of `attention_bench --dropout p`.
Usage: python3 bench/torch/attention_torch.py [reps] [max_t] [dropout] > torch.txt"""
import sys
import torch
import torch.nn.functional as F

import event_timing  # bench/torch/event_timing.py: the timing loop
from torch.nn.attention import SDPBackend, sdpa_kernel

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
max_t = int(sys.argv[2]) if len(sys.argv) > 2 else 16384
dropout = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
torch.manual_seed(0)


def med(fn):
    return event_timing.med(fn, reps, warmup=2)


BACKENDS = [
    ("efficient_f32", SDPBackend.EFFICIENT_ATTENTION, torch.float32),
    ("flash_bf16", SDPBackend.FLASH_ATTENTION, torch.bfloat16),
    ("flash_f16", SDPBackend.FLASH_ATTENTION, torch.float16),
    ("cudnn_bf16", SDPBackend.CUDNN_ATTENTION, torch.bfloat16),
]
if dropout > 0:
    BACKENDS = [b for b in BACKENDS if b[0].startswith("flash")]

print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}", file=sys.stderr)
for d in (64, 128):
    t = 512
    while t <= max_t:
        b, h = 16384 // t, 2048 // d
        for causal in (False, True):
            mask = "causal" if causal else "full"
            for name, backend, dtype in BACKENDS:
                q, k, v = (torch.rand(b, h, t, d, device=dev, dtype=dtype, requires_grad=True) - 0.5 for _ in range(3))
                q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
                try:
                    with sdpa_kernel(backend):
                        with torch.no_grad():
                            fwd = med(lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=causal))
                        out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=causal)
                        g = torch.rand_like(out) - 0.5
                        bwd = med(lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True))
                except RuntimeError as e:
                    print(f"# d{d} T{t} {mask} {name}: {str(e).splitlines()[0]}", file=sys.stderr)
                    continue
                print(f"d{d} T{t} {mask} forward {name}\t{fwd:.5f}")
                print(f"d{d} T{t} {mask} backward {name}\t{bwd:.5f}", flush=True)
                del q, k, v, out, g
        t *= 2
