#!/usr/bin/env bash
# GPU host: the SGEMM lab's model shapes (`lab shapes`) and cuBLAS FP32 (PyTorch, TF32 off) at
# the same shapes, timed the same way: batches of launches with the L2 warm, then single launches
# after a 256 MiB memset that flushes the L2 (as gemm_bench and bench/torch/gemm_torch.py time them).
# Usage (repository root): OUT=dir [LAB_SHAPES=nn|small] [FLUSH_ONLY=1] bash dev/labs/sgemm_shapes.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvcc -O3 -arch=sm_90 -Xptxas -v -I kernels -o /tmp/lab dev/labs/sgemm_lab.cu > "$OUT/ptxas.txt" 2>&1 || { cat "$OUT/ptxas.txt"; exit 1; }
[ "${FLUSH_ONLY:-0}" = 1 ] || /tmp/lab shapes | tee "$OUT/shapes.txt"
/tmp/lab shapes-flush | tee "$OUT/shapes_flush.txt"
python3 - <<'PY' | tee "$OUT/shapes_cublas.txt"
import torch
torch.backends.cuda.matmul.allow_tf32 = False
F = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
import os
SHAPES = ((8192, 128, 512), (16384, 1536, 384), (16384, 384, 1536), (2048, 2048, 2048),
          (4096, 4096, 4096), (8192, 8192, 8192))
if os.environ.get("LAB_SHAPES") == "small":
    SHAPES = ((64, 784, 256), (256, 784, 256))
if os.environ.get("LAB_SHAPES") == "nn":
    SHAPES = ((8192, 128, 512), (16384, 1536, 384), (8192, 768, 768), (4096, 2048, 512),
              (16384, 128, 384), (2048, 4096, 768))
for flush in ((True,) if os.environ.get("FLUSH_ONLY") == "1" else (False, True)):
    for m, k, n in SHAPES:
        a = torch.rand(m, k, device="cuda") * 2 - 1; b = torch.rand(k, n, device="cuda") * 2 - 1
        c = torch.empty(m, n, device="cuda")
        per = 1 if flush or m * n * k >= 1e10 else 20
        reps = 7 if m * n * k > 1e11 else 15
        for _ in range(3 * per): torch.mm(a, b, out=c)
        ev = []
        for r in range(reps):
            if flush: F.fill_(r)
            e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(per): torch.mm(a, b, out=c)
            e1.record(); ev.append((e0, e1))
        torch.cuda.synchronize()
        ts = sorted(e0.elapsed_time(e1) / per for e0, e1 in ev); t = ts[len(ts) // 2]
        tag = "  (L2 flushed)" if flush else ""
        print(f"{'cublas_fp32':32s} {m:5d}x{k}x{n}  {t*1e3:8.1f} us  {2*m*n*k/(t*1e-3)/1e9:8.0f} GFLOP/s{tag}")
PY
