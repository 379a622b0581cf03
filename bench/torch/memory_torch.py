#!/usr/bin/env python3
"""PyTorch timings of the ops in bench/src/bin/bench_memory.rs, same sizes, same
timing. Prints "<op> <size>\t<streamed ms>\t<one-launch ms>" lines, which
`bench_memory --torch FILE` reads to report the ratio to PyTorch measured on the same GPU.

Streamed (what the ratio uses), as in bench_memory: before each batch the GPU sleeps
(torch.cuda._sleep) while Python queues it, a few unmeasured calls bring L2 to its steady state,
then a batch of back-to-back calls runs between one pair of CUDA events (as many as take
BATCH_SPAN_MS, judged by one call's time alone, within BATCH_MIN..BATCH_MAX, as bench_memory);
the median over the batches, per call. Inputs smaller than ROTATE_BYTES are rotated through
several copies so that each call reads DRAM, not L2. A '#' line reports a batch that the GPU
reached before Python had queued it.
One launch: each call alone between its events, the GPU idle before it (the earlier method).

Usage: memory_torch.py [REPS] [--only word1,word2]"""
import math
import time
import sys
import torch
import torch.nn.functional as F

args = sys.argv[1:]
# `--only w1,w2`: time only the ops whose name contains one of the words (as bench_memory's)
only = None
if "--only" in args:
    i = args.index("--only")
    only = args[i + 1].split(",")
    del args[i:i + 2]
reps = int(args[0]) if args else 20
dev = "cuda"
torch.manual_seed(0)
BATCH_SPAN_MS, BATCH_MIN, BATCH_MAX = 2.0, 10, 200
ROTATE_BYTES = 256 << 20


def sets(footprint):
    """Copies to rotate through when one call touches `footprint` bytes (as bench_memory)."""
    return max(1, min(64, math.ceil(ROTATE_BYTES / max(1, footprint))))


def cycles_per_ms():
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(10_000_000)
    b.record()
    b.synchronize()
    return 10_000_000 / a.elapsed_time(b)


CYCLES_PER_MS = cycles_per_ms()


def med(fn, k=1, name=""):
    """(streamed ms, one-launch ms) of fn(i), i the buffer set in 0..k."""

    for i in range(max(k, 3)):
        fn(i % k)
    torch.cuda.synchronize()
    single, host = [], []
    for r in range(reps):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t0 = time.perf_counter()
        fn(r % k)
        host.append((time.perf_counter() - t0) * 1e3)
        b.record()
        b.synchronize()
        single.append(a.elapsed_time(b))
    single.sort()
    per_call = max(single[len(single) // 2], 1e-6)
    batch = max(k, min(BATCH_MAX, max(BATCH_MIN, math.ceil(BATCH_SPAN_MS / per_call))))
    host.sort()
    # the GPU sleeps four times as long as Python took to queue a batch and its warm-up one call
    # at a time, at least 5 ms (queueing back to back can take longer: allocations)
    sleep_ms = max(5.0, 4 * host[len(host) // 2] * (max(k, 2) + batch))
    stream, starved, queued = [], False, 0.0
    for r in range(reps):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(sleep_ms * CYCLES_PER_MS))
        blocked = torch.cuda.Event()
        blocked.record()
        t0 = time.perf_counter()
        for i in range(max(k, 2)):
            fn((r + i) % k)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for j in range(batch):
            fn((r + j) % k)
        b.record()
        queued = max(queued, (time.perf_counter() - t0) * 1e3)
        starved |= blocked.query()
        b.synchronize()
        stream.append(a.elapsed_time(b) / batch)
    if starved:
        print(f"# {name}: a batch started before it was queued (GPU slept {sleep_ms:.1f} ms, "
              f"queueing took up to {queued:.1f} ms)", flush=True)
    stream.sort()
    single.sort()
    return stream[len(stream) // 2], single[len(single) // 2]


def out(name, fn, k=1):
    if only is not None and name != "copy 2^28" and not any(w in name.split()[0] for w in only):
        return
    s, o = med(fn, k, name)
    print(f"{name}\t{s:.6f}\t{o:.6f}", flush=True)


def rand(k, *shape):
    return [torch.rand(*shape, device=dev) * 4 - 2 for _ in range(k)]


n = 1 << 28
x = torch.rand(n, device=dev) * 4 - 2
y = torch.rand(n, device=dev) * 4 - 2
z = torch.empty(n, device=dev)
out("copy 2^28", lambda i: z.copy_(x))
out("relu 2^28", lambda i: torch.relu(x))
for r, c in [(16384, 65), (1024, 16384)]:
    k = sets(2 * r * c)
    xs = [v.bfloat16().requires_grad_(True) for v in rand(k, r, c)]
    t = torch.randint(0, c, (r,), device=dev)
    out(f"cross_entropy_bf16 {r}x{c}", lambda i: F.cross_entropy(xs[i], t), k)
    losses = [F.cross_entropy(v, t) for v in xs]
    out(f"cross_entropy_bwd_bf16 {r}x{c}",
        lambda i: torch.autograd.grad(losses[i], xs[i], retain_graph=True), k)
    del xs, losses
    torch.cuda.empty_cache()

out("scale 2^28", lambda i: torch.mul(x, 0.37, out=z))
out("gelu 2^28", lambda i: F.gelu(x, approximate="tanh"))
out("add 2^28", lambda i: torch.add(x, y, out=z))
out("mul 2^28", lambda i: torch.mul(x, y, out=z))
out("gelu_bwd 2^28", lambda i: torch.ops.aten.gelu_backward(y, x, approximate="tanh"))
out("sum 2^28", lambda i: x.sum())
out("max 2^28", lambda i: x.max())
# the mean squared error of 2^24 elements, f32 and bf16 (PyTorch squares each difference in
# f32, rounds it to the dtype and sums in f32), and the gradient of its first operand
nm = 1 << 24
for dt, sfx in [(torch.float32, ""), (torch.bfloat16, "_bf16")]:
    k = sets(3 * nm * (4 if dt == torch.float32 else 2))
    ma, mb = [v.to(dt) for v in rand(k, nm)], [v.to(dt) for v in rand(k, nm)]
    g1 = torch.ones((), device=dev, dtype=dt)
    out(f"mse{sfx} 2^24", lambda i: F.mse_loss(ma[i], mb[i]), k)
    out(f"mse_bwd{sfx} 2^24", lambda i: torch.ops.aten.mse_loss_backward(g1, ma[i], mb[i], 1), k)
    del ma, mb
torch.cuda.empty_cache()

# 16-bit elementwise and the casts that mixed precision runs (f32 -> bf16 and back)
xb, yb, zb = x.to(torch.bfloat16), y.to(torch.bfloat16), torch.empty(n, device=dev, dtype=torch.bfloat16)
xh, zh = x.to(torch.float16), torch.empty(n, device=dev, dtype=torch.float16)
out("add_bf16 2^28", lambda i: torch.add(xb, yb, out=zb))
out("gelu_f16 2^28", lambda i: F.gelu(xh, approximate="tanh"))
out("cast_f32_bf16 2^28", lambda i: zb.copy_(x))
out("cast_bf16_f32 2^28", lambda i: z.copy_(xb))
del xb, yb, zb, xh, zh
x2 = x.view(65536, 4096)
out("sum_last 65536x4096", lambda i: x2.sum(-1))
x2b = x2.bfloat16()
out("sum_last_bf16 65536x4096", lambda i: x2b.sum(-1))
k = sets(2 * 16384 * 1536)
x3b = [v.bfloat16() for v in rand(k, 16384, 1536)]
out("sum_cols_bf16 16384x1536", lambda i: x3b[i].sum(0), k)
del x2b, x3b
out("max_last 65536x4096", lambda i: x2.amax(-1))
del x, y, z, x2
torch.cuda.empty_cache()

for r, c in [(16384, 1024), (4096, 4096), (65536, 65)]:
    k = sets(8 * r * c)
    xs, gs = rand(k, r, c), rand(k, r, c)
    ys = [torch.softmax(v, -1) for v in xs]
    ls = [torch.log_softmax(v, -1) for v in xs]
    out(f"softmax {r}x{c}", lambda i: torch.softmax(xs[i], -1), k)
    out(f"softmax_bwd {r}x{c}",
        lambda i: torch.ops.aten._softmax_backward_data(gs[i], ys[i], -1, torch.float32), k)
    out(f"log_softmax {r}x{c}", lambda i: torch.log_softmax(xs[i], -1), k)
    out(f"log_softmax_bwd {r}x{c}",
        lambda i: torch.ops.aten._log_softmax_backward_data(gs[i], ls[i], -1, torch.float32), k)
    del xs, gs, ys, ls
    torch.cuda.empty_cache()

# softmax of bf16 rows (PyTorch computes in f32 and rounds the output; its backward reads the
# bf16 output)
for r, c in [(16384, 1024), (65536, 65)]:
    k = sets(4 * r * c)
    xs, gs = [v.bfloat16() for v in rand(k, r, c)], [v.bfloat16() for v in rand(k, r, c)]
    ys = [torch.softmax(v, -1) for v in xs]
    ls = [torch.log_softmax(v, -1) for v in xs]
    out(f"softmax_bf16 {r}x{c}", lambda i: torch.softmax(xs[i], -1), k)
    out(f"softmax_bwd_bf16 {r}x{c}",
        lambda i: torch.ops.aten._softmax_backward_data(gs[i], ys[i], -1, torch.bfloat16), k)
    out(f"log_softmax_bf16 {r}x{c}", lambda i: torch.log_softmax(xs[i], -1), k)
    out(f"log_softmax_bwd_bf16 {r}x{c}",
        lambda i: torch.ops.aten._log_softmax_backward_data(gs[i], ls[i], -1, torch.bfloat16), k)
    del xs, gs, ys, ls
    torch.cuda.empty_cache()

# the scaled, causally masked softmax of attention scores as eager PyTorch runs it (scale,
# masked_fill, softmax; backward: softmax backward, masked_fill, scale), GPT-mini's recipe
r, c = 64 * 6 * 256, 256
k = sets(8 * r * c)
xs, gs = rand(k, r, c), rand(k, r, c)
causal = torch.ones(c, c, device=dev, dtype=torch.bool).triu(1)


def masked_softmax(v):
    return torch.softmax((v.view(-1, c, c) * 0.125).masked_fill(causal, float("-inf")), -1)


ys = [masked_softmax(v) for v in xs]
out(f"masked_softmax {r}x{c}", lambda i: masked_softmax(xs[i]), k)
out(f"masked_softmax_bwd {r}x{c}",
    lambda i: torch.ops.aten._softmax_backward_data(gs[i].view(-1, c, c), ys[i], -1, torch.float32)
    .masked_fill(causal, 0.0) * 0.125, k)
del xs, gs, ys
torch.cuda.empty_cache()

# the same in bf16 (PyTorch's softmax of bf16 computes in f32 and rounds; its backward reads the
# bf16 output)
k = sets(4 * r * c)
xs, gs = [v.bfloat16() for v in rand(k, r, c)], [v.bfloat16() for v in rand(k, r, c)]
ys = [masked_softmax(v) for v in xs]
out(f"masked_softmax_bf16 {r}x{c}", lambda i: masked_softmax(xs[i]), k)
out(f"masked_softmax_bwd_bf16 {r}x{c}",
    lambda i: torch.ops.aten._softmax_backward_data(gs[i].view(-1, c, c), ys[i], -1, torch.bfloat16)
    .masked_fill(causal, 0.0) * 0.125, k)
del xs, gs, ys
torch.cuda.empty_cache()

n = 1 << 28
x = torch.rand(n, device=dev)
z = torch.empty(n, device=dev)
out("uniform 2^28", lambda i: z.uniform_())
out("dropout 2^28", lambda i: F.dropout(x, 0.2, training=True))
xb = x.bfloat16()
out("dropout_bf16 2^28", lambda i: F.dropout(xb, 0.2, training=True))
del x, z, xb
torch.cuda.empty_cache()

r, c = 16384, 768
k = sets(8 * r * c)
xs, gs = rand(k, r, c), rand(k, r, c)
w = torch.rand(c, device=dev)
bb = torch.rand(c, device=dev)
stats = [torch.ops.aten.native_layer_norm(v, [c], w, bb, 1e-5)[1:] for v in xs]
out("layernorm 16384x768", lambda i: torch.ops.aten.native_layer_norm(xs[i], [c], w, bb, 1e-5), k)
out("layernorm_bwd 16384x768",
    lambda i: torch.ops.aten.native_layer_norm_backward(gs[i], xs[i], [c], stats[i][0], stats[i][1], w, bb,
                                                        [True, True, True]), k)
del xs, gs, stats
torch.cuda.empty_cache()

xs = [v.bfloat16() for v in rand(sets(4 * r * c), r, c)]
gs = [v.bfloat16() for v in rand(len(xs), r, c)]
wb, bbb = w.bfloat16(), bb.bfloat16()
stats = [torch.ops.aten.native_layer_norm(v, [c], wb, bbb, 1e-5)[1:] for v in xs]
out("layernorm_bf16 16384x768", lambda i: torch.ops.aten.native_layer_norm(xs[i], [c], wb, bbb, 1e-5), len(xs))
out("layernorm_bwd_bf16 16384x768",
    lambda i: torch.ops.aten.native_layer_norm_backward(gs[i], xs[i], [c], stats[i][0], stats[i][1], wb, bbb,
                                                        [True, True, True]), len(xs))
del xs, gs, stats
torch.cuda.empty_cache()

for r, c in [(16384, 65), (4096, 50257)]:
    k = sets(4 * r * c)
    xs = [v.requires_grad_(True) for v in rand(k, r, c)]
    t = torch.randint(0, c, (r,), device=dev)
    out(f"cross_entropy {r}x{c}", lambda i: F.cross_entropy(xs[i], t), k)
    losses = [F.cross_entropy(v, t) for v in xs]
    out(f"cross_entropy_bwd {r}x{c}", lambda i: torch.autograd.grad(losses[i], xs[i], retain_graph=True), k)
    del xs, losses
    torch.cuda.empty_cache()

v, dim = 50257, 768
tokens = (1 << 28) // dim
table = torch.rand(v, dim, device=dev)
idx = torch.randint(0, v, (tokens,), device=dev)
out(f"embedding {tokens}x{dim}", lambda i: F.embedding(idx, table))
g = torch.rand(tokens, dim, device=dev)
out(f"embedding_bwd {tokens}x{dim}", lambda i: torch.ops.aten.embedding_dense_backward(g, idx, v, -1, False))
del table, idx, g
torch.cuda.empty_cache()

k = sets(16 * 10_000_000)
groups = []
for _ in range(k):
    params = [torch.rand(1_000_000, device=dev) for _ in range(10)]
    for p in params:
        p.grad = torch.rand_like(p)
    groups.append(params)
opts = [torch.optim.AdamW(ps, lr=1e-4, fused=True) for ps in groups]
out("adam 10M", lambda i: opts[i].step(), k)
opts = [torch.optim.SGD(ps, lr=1e-4, momentum=0.9, foreach=True) for ps in groups]
out("sgd_momentum 10M", lambda i: opts[i].step(), k)
opts = [torch.optim.SGD(ps, lr=1e-4, momentum=0.0, foreach=True) for ps in groups]
out("sgd 10M", lambda i: opts[i].step(), k)
