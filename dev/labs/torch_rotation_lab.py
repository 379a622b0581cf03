"""Does PyTorch's figure at small sizes owe something to L2? memory_torch.py (like any plain
PyTorch call) lets each call allocate its output, and the caching allocator hands back the block
the previous call freed: the output is written to the same 17 MB every time, which stays in the
H100's 50 MB L2, while bench_memory rotates its outputs with its inputs. This lab times the same
ops both ways (inputs rotated in both; the output fresh from the allocator, or rotated through
as many preallocated buffers with out=), by memory_torch.py's streamed method.

Run on the GPU host: python3 dev/labs/torch_rotation_lab.py

What it showed (H100, 2026-11-22, µs; two calls, the second's figures first):
  65536×65    softmax          16.04 from the allocator, 16.60 rotated out=  (15.84 / 16.38)
              log_softmax      14.56, 15.36                                  (14.41 / 15.20)
              softmax_bwd      37.21, 36.94
              log_softmax_bwd  19.97, 20.48
  16384×1024  every op within 0.3 % either way (134–201 MB a call: more than L2 holds).
At 65536×65 the allocator's reused output is worth 0.5–0.8 µs (4–5 %) to PyTorch's forwards and
0.5 µs to its log-softmax backward. camel's step 3 (bench_memory, outputs rotated;
docs/data/bench_memory_h100_lnbwd4.txt) ran both forwards in 15.1 µs and the log-softmax
backward in 20.9. Against PyTorch with its outputs rotated too: log-softmax 1.01–1.02× forward
and 0.98× backward, softmax 1.08–1.10× forward, where memory_torch.py's figures gave log-softmax
0.96× both ways.
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
