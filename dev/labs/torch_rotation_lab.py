"""PyTorch rotation lab: does PyTorch's figure at small sizes owe something to L2?
bench/torch/memory_torch.py, like any plain PyTorch call, lets each call allocate its output,
and the caching allocator hands back the block the previous call freed, so the output is
written to the same memory every time; bench_memory rotates its outputs with its inputs.

Versions (softmax, log-softmax and their backwards at 65536×65 and 16384×1024; inputs rotated
in both; memory_torch.py's streamed timing):
  allocator   the output fresh from the caching allocator (memory_torch.py's way)
  rotated     the output rotated through as many preallocated buffers, with out=

What it found: dev/labs/README.md.

Run on the GPU host: python3 dev/labs/torch_rotation_lab.py
"""
import math
import torch

dev = "cuda"
BATCH, REPS, ROTATE = 10, 20, 256 << 20


def streamed(fn, k):
    for i in range(3 * k):
        fn(i % k)
    torch.cuda.synchronize()
    v = []
    for r in range(REPS):
        torch.cuda._sleep(20_000_000)  # ~10 ms: the batch is queued before the GPU reaches it
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for j in range(max(BATCH, k)):
            fn((r + j) % k)
        b.record()
        b.synchronize()
        v.append(a.elapsed_time(b) * 1e3 / max(BATCH, k))
    v.sort()
    return v[len(v) // 2]


for r, c in [(65536, 65), (16384, 1024)]:
    k = max(1, min(64, math.ceil(ROTATE / (8 * r * c))))
    xs = [torch.rand(r, c, device=dev) * 4 - 2 for _ in range(k)]
    outs = [torch.empty(r, c, device=dev) for _ in range(k)]
    mb = 8 * r * c / 1e6
    for name, f, f_out in [
        ("softmax", lambda x: torch.softmax(x, -1), torch.ops.aten._softmax.out),
        ("log_softmax", lambda x: torch.log_softmax(x, -1), torch.ops.aten._log_softmax.out),
    ]:
        fresh = streamed(lambda i: f(xs[i]), k)
        rot = streamed(lambda i: f_out(xs[i], -1, False, out=outs[i]), k)
        same = streamed(lambda i: f_out(xs[i], -1, False, out=outs[0]), k)
        print(f"{name} {r}x{c} ({k} sets, {mb:.0f} MB a call): output from the allocator "
              f"{fresh:.2f} us ({mb * 1e3 / fresh:.0f} GB/s), rotated out= {rot:.2f} us "
              f"({mb * 1e3 / rot:.0f} GB/s), one out= buffer {same:.2f} us", flush=True)
    gs = [torch.rand(r, c, device=dev) * 4 - 2 for _ in range(k)]
    for name, fwd, bwd, bwd_out in [
        ("softmax_bwd", torch.softmax, torch.ops.aten._softmax_backward_data,
         torch.ops.aten._softmax_backward_data.out),
        ("log_softmax_bwd", torch.log_softmax, torch.ops.aten._log_softmax_backward_data,
         torch.ops.aten._log_softmax_backward_data.out),
    ]:
        ys = [fwd(v, -1) for v in xs]
        fresh = streamed(lambda i: bwd(gs[i], ys[i], -1, torch.float32), k)
        # the out= argument is named grad_input for softmax and out for log-softmax
        try:
            bwd_out(gs[0], ys[0], -1, torch.float32, grad_input=outs[0])
            rot = streamed(lambda i: bwd_out(gs[i], ys[i], -1, torch.float32, grad_input=outs[i]), k)
        except (TypeError, RuntimeError):
            rot = streamed(lambda i: bwd_out(gs[i], ys[i], -1, torch.float32, out=outs[i]), k)
        mb3 = 12 * r * c / 1e6
        print(f"{name} {r}x{c} ({k} sets, {mb3:.0f} MB a call): output from the allocator "
              f"{fresh:.2f} us ({mb3 * 1e3 / fresh:.0f} GB/s), rotated out= {rot:.2f} us "
              f"({mb3 * 1e3 / rot:.0f} GB/s)", flush=True)
        del ys
    del xs, outs, gs
    torch.cuda.empty_cache()
