#!/usr/bin/env bash
# GPU host: build and run the attention forward lab (dev/labs/attn_lab.cu), then time PyTorch's
# FlashAttention-2 forward (bf16) on the same shapes in the same run.
# Usage (repository root): OUT=dir bash dev/labs/attn_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -std=c++17 -I kernels -arch=sm_90 -o /tmp/attnlab dev/labs/attn_lab.cu > "$OUT/attn_build.txt" 2>&1 || { cat "$OUT/attn_build.txt"; exit 1; }
/tmp/attnlab | tee "$OUT/attn_lab.txt"
python3 - <<'PY' | tee "$OUT/attn_lab_torch.txt"
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def med_us(f, per):
    """Median µs per call of f over 20 batches of `per` calls between CUDA events."""
    for _ in range(3): f()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    v = []
    for _ in range(20):
        s.record()
        for _ in range(per): f()
        e.record(); torch.cuda.synchronize(); v.append(s.elapsed_time(e) * 1000 / per)
    return sorted(v)[10]


def operands(d, t, grad):
    b, h = max(1, 16384 // t), 2048 // d
    x = [torch.rand(b, t, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2) * 2 - 1 for _ in range(3)]
    return b, h, [y.requires_grad_() for y in x] if grad else x


print("d\tT\tcausal\tFA2 us\tTFLOP/s")
for d, t, causal in [(128, 4096, 1), (128, 4096, 0), (64, 4096, 1), (64, 4096, 0), (128, 1024, 1), (64, 1024, 1), (128, 16384, 1)]:
    b, h, (q, k, v) = operands(d, t, False)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        us = med_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)), 10)
    print(f"{d}\t{t}\t{causal}\t{us:.1f}\t{4*b*h*t*t*d*(0.5 if causal else 1)/us*1e-6:.1f}")
print("d\tT\tcausal\tFA2 backward us\tTFLOP/s (2.5x fwd)")
for d, t, causal in [(128, 4096, 1), (128, 4096, 0), (64, 4096, 1), (64, 4096, 0), (128, 1024, 1)]:
    b, h, (q, k, v) = operands(d, t, True)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        g = torch.rand_like(o)
        us = med_us(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True), 5)
    print(f"{d}\t{t}\t{causal}\t{us:.1f}\t{2.5*4*b*h*t*t*d*(0.5 if causal else 1)/us*1e-6:.1f}")
PY
