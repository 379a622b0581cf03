"""The timing of the GPU benchmark scripts that compare one call at a time (conv_torch.py,
attention_torch.py), the same as their Rust programs': `warmup` calls, then back-to-back calls
between one pair of CUDA events (as many as take about 2 ms, 3 to 100), the median over `reps`
batches, per call, in milliseconds."""
import torch


def med(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    batch = max(3, min(100, int(2.0 / max(a.elapsed_time(b), 1e-3)) + 1))
    v = []
    for _ in range(reps):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        v.append(a.elapsed_time(b) / batch)
    v.sort()
    return v[len(v) // 2]
