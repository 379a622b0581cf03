#!/usr/bin/env bash
# GPU host: build and run the Hopper attention lab (dev/labs/attn_wgmma_sm90a_lab.cu) for sm_90a
# (wgmma, TMA: Hopper-only PTX; links libcuda for cuTensorMapEncodeTiled), then time PyTorch's
# FlashAttention-2 and cuDNN forwards at the same shapes in the same call
# (bench/torch/attention_torch.py's timing and shapes, d = 128, no mask, bf16).
# Usage (repository root, or dist/gpu): OUT=dir bash dev/labs/attn_wgmma_sm90a_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
here="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -std=c++17 -I kernels -I kernels/matmul -gencode arch=compute_90a,code=sm_90a -o /tmp/attnwgmma dev/labs/attn_wgmma_sm90a_lab.cu -lcuda > "$OUT/attn_wgmma_build.txt" 2>&1 || { cat "$OUT/attn_wgmma_build.txt"; exit 1; }
/tmp/attnwgmma | tee "$OUT/attn_wgmma_lab.txt"
PYTHONPATH="$here/bench/torch" python3 - <<'PY' | tee "$OUT/attn_wgmma_torch.txt"
import torch, torch.nn.functional as F
import event_timing
from torch.nn.attention import SDPBackend, sdpa_kernel
d = 128
for t in (1024, 2048, 4096, 8192, 16384):
    b, h = 16384 // t, 2048 // d
    for name, backend in (("flash_bf16", SDPBackend.FLASH_ATTENTION), ("cudnn_bf16", SDPBackend.CUDNN_ATTENTION)):
        q, k, v = (torch.rand(b, h, t, d, device="cuda", dtype=torch.bfloat16) - 0.5 for _ in range(3))
        with sdpa_kernel(backend), torch.no_grad():
            ms = event_timing.med(lambda: F.scaled_dot_product_attention(q, k, v), 20, warmup=2)
        print(f"d{d} T{t:<6d} full forward  {name}  {ms:8.4f} ms  {4 * b * h * t * t * d / ms / 1e9:6.1f} TFLOP/s")
PY
