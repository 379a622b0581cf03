#!/usr/bin/env bash
# GPU host: build and run the SGEMM lab, cuBLAS FP32 beside it, and ncu on both (4096³).
# Usage (repository root): OUT=dir bash dev/labs/sgemm_lab.sh
set -u
OUT=${OUT:-lab-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvcc -O3 -arch=sm_90 -Xptxas -v -I kernels -o /tmp/lab dev/labs/sgemm_lab.cu > "$OUT/ptxas.txt" 2>&1 || { cat "$OUT/ptxas.txt"; exit 1; }
/tmp/lab | tee "$OUT/lab.txt"
# the same kernels JIT-compiled by the driver from compute_80 PTX, as the library loads them
if [ "${PTX80:-1}" = 1 ]; then nvcc -O3 -gencode arch=compute_80,code=compute_80 -I kernels -o /tmp/lab_ptx dev/labs/sgemm_lab.cu && /tmp/lab_ptx | sed "s/^/ptx80 /" | tee "$OUT/lab_ptx.txt"; fi
python3 - <<'PY' | tee "$OUT/cublas.txt"
import torch
torch.backends.cuda.matmul.allow_tf32 = False
for n in (2048, 4096, 8192):
    a = torch.rand(n, n, device="cuda") * 2 - 1; b = torch.rand(n, n, device="cuda") * 2 - 1
    c = torch.empty(n, n, device="cuda")
    for lay, x, y in (("nn", a, b), ("nt", a, b.t()), ("tn", a.t(), b)):
        for _ in range(3): torch.mm(x, y, out=c)
        ts = []
        for _ in range(15):
            e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
            e0.record(); torch.mm(x, y, out=c); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1))
        ts.sort(); m = ts[len(ts)//2]
        print(f"cublas_fp32_{lay}           {n:5d}  {m:8.3f} ms  {2*n**3/(m*1e-3)/1e9:8.0f} GFLOP/s")
PY
if [ "${NCU:-1}" = 1 ]; then
  R="barrier short_scoreboard long_scoreboard mio_throttle math_pipe_throttle not_selected selected wait dispatch_stall no_instruction lg_throttle branch_resolving imc_miss misc"
  MS=$(for r in $R; do printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' $r; done)
  S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats --metrics ${MS%,}"
  ncu $S /tmp/lab once > "$OUT/ncu_lab.txt" 2>&1
  ncu $S -k regex:"gemm|xmma|Kernel" --launch-skip 2 --launch-count 1 python3 -c "
import torch
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.rand(4096, 4096, device='cuda'); b = torch.rand(4096, 4096, device='cuda')
for _ in range(4): c = a @ b
torch.cuda.synchronize()" > "$OUT/ncu_cublas.txt" 2>&1
  grep -E "^  [a-zA-Z_].*\(|Registers Per|Block Size|Grid Size|Shared Memory Config|Achieved Occupancy|Theoretical Occ|Issue Slots Busy|Issued Warp Per|No Eligible|Compute \(SM\) Throughput|Duration|SM Frequency|Stall|Warp Cycles Per Issued|Executed Ipc|Static Shared|Dynamic Shared|stalled" "$OUT/ncu_lab.txt" "$OUT/ncu_cublas.txt" | cut -c1-200
fi
