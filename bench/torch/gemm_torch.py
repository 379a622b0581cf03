"""cuBLAS reference for camel's SGEMM ladder (bench/src/bin/gemm_bench.rs): PyTorch `A @ B` at the
same shapes, FP32 (allow_tf32 off: impl cublas_fp32) and TF32 (allow_tf32 on: impl cublas_tf32),
timed the same way: inputs uniform in [-1, 1], one untimed call, warm-up, then up to --reps runs
within --budget-ms, each between two CUDA events with the L2 cache flushed (256 MiB memset)
before it, enqueued back to back; the median is reported. With --dtype f16|bf16: the operands
and C in that dtype (impl cublas_f16 / cublas_bf16), f32 accumulation (PyTorch's reduced-precision
reductions off), the reference of camel's tensor-core ladder (`gemm_bench --dtype`).

usage: python3 bench/torch/gemm_torch.py [--shapes square|model|all] [--dtype f32|f16|bf16]
                                   [--reps N] [--budget-ms MS] [--no-flush] [--out FILE]
CSV columns: impl,step,m,k,n,ms,gflops (step "ref"), after a "# device: <GPU name>" line;
`cargo xtask gemm-report DIR` reads it as DIR/gemm_torch.csv."""
import argparse, statistics, sys

SQUARE = [1024, 2048, 4096, 8192]
MODEL = [(64, 784, 256), (256, 784, 256), (8192, 128, 512), (16384, 384, 1536), (16384, 1536, 384)]  # M, K, N
FLUSH_BYTES = 256 << 20


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", choices=["square", "model", "all"], default="all")
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    ap.add_argument("--reps", type=int, default=50, help="most timed runs per shape (at least 3 run)")
    ap.add_argument("--budget-ms", type=float, default=500.0, help="time budget per shape for the timed runs")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-flush", action="store_true", help="do not flush L2 before each timed run")
    ap.add_argument("--out", help="CSV file to write")
    args = ap.parse_args()

    try:
        import torch
    except ImportError as e:
        sys.exit(f"gemm_torch: PyTorch is not installed ({e})")
    if not torch.cuda.is_available():
        sys.exit("gemm_torch: no CUDA device visible to PyTorch; nothing was measured")

    dev = "cuda"
    name = torch.cuda.get_device_name()
    print(f"device: {name} (torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs)", flush=True)
    shapes = ([(s, s, s) for s in SQUARE] if args.shapes in ("square", "all") else []) + \
             (MODEL if args.shapes in ("model", "all") else [])
    flush = None if args.no_flush else torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=dev)

    def time_ms(fn):
        fn()
        torch.cuda.synchronize()
        est = 0.0
        if args.warmup > 0:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(args.warmup):
                fn()
            e.record()
            e.synchronize()
            est = s.elapsed_time(e) / args.warmup
        reps = max(3, args.reps)
        runs = min(reps, max(3, int(args.budget_ms / est))) if est > 0 else reps
        events = []
        for _ in range(runs):
            if flush is not None:
                flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            events.append((s, e))
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in events), runs

    out = open(args.out, "w") if args.out else None
    if out:
        out.write(f"# device: {name}\nimpl,step,m,k,n,ms,gflops\n")
        out.flush()
    print(f"{'impl':<13} {'step':>4} {'m':>6} {'k':>6} {'n':>6} {'ms':>10} {'GFLOP/s':>10} {'runs':>5}", flush=True)
    table = {}
    if args.dtype == "f32":
        modes = [(False, "cublas_fp32", torch.float32), (True, "cublas_tf32", torch.float32)]
    else:
        dt = torch.float16 if args.dtype == "f16" else torch.bfloat16
        modes = [(False, f"cublas_{args.dtype}", dt)]
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    try:
        for tf32, impl, dt in modes:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            for (m, k, n) in shapes:
                g = torch.Generator(device=dev).manual_seed(0)
                A = (torch.rand(m, k, device=dev, generator=g) * 2 - 1).to(dt)
                B = (torch.rand(k, n, device=dev, generator=g) * 2 - 1).to(dt)
                C = torch.empty(m, n, device=dev, dtype=dt)
                ms, runs = time_ms(lambda: torch.matmul(A, B, out=C))
                gflops = 2 * m * n * k / (ms * 1e6)
                table[(impl, m, k, n)] = gflops
                print(f"{impl:<13} {'ref':>4} {m:>6} {k:>6} {n:>6} {ms:>10.4f} {gflops:>10.1f} {runs:>5}", flush=True)
                if out:
                    out.write(f"{impl},ref,{m},{k},{n},{ms:.6f},{gflops:.3f}\n")
                    out.flush()
                del A, B, C
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        if out:
            out.close()

    print("\nGFLOP/s (median)")
    impls = [impl for _, impl, _ in modes]
    print(f"{'M x K x N':<18} " + " ".join(f"{i:>12}" for i in impls))
    for (m, k, n) in shapes:
        cells = [table.get((i, m, k, n)) for i in impls]
        print(f"{f'{m}x{k}x{n}':<18} " + " ".join(f"{c:>12.1f}" if c else f"{'-':>12}" for c in cells))
    if args.out:
        print(f"wrote {len(modes) * len(shapes)} rows to {args.out}")


if __name__ == "__main__":
    main()
