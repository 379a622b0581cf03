#!/usr/bin/env python3
"""PyTorch timings of the ops in crates/camel-models/examples/bench_memory.rs, same sizes, same
timing (CUDA events, 3 warm-ups, median of N). Prints "<op> <size>\t<ms>" lines, which
`bench_memory --torch FILE` reads to report the ratio to PyTorch measured on the same GPU."""
import sys
import torch
import torch.nn.functional as F

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
dev = "cuda"
torch.manual_seed(0)


def med(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def out(name, ms):
    print(f"{name}\t{ms:.6f}", flush=True)


n = 1 << 28
x = torch.rand(n, device=dev) * 4 - 2
y = torch.rand(n, device=dev) * 4 - 2
z = torch.empty(n, device=dev)
out("copy 2^28", med(lambda: z.copy_(x)))
out("relu 2^28", med(lambda: torch.relu(x)))
out("scale 2^28", med(lambda: torch.mul(x, 0.37, out=z)))
out("gelu 2^28", med(lambda: F.gelu(x, approximate="tanh")))
out("add 2^28", med(lambda: torch.add(x, y, out=z)))
out("mul 2^28", med(lambda: torch.mul(x, y, out=z)))
out("gelu_bwd 2^28", med(lambda: torch.ops.aten.gelu_backward(y, x, approximate="tanh")))
out("sum 2^28", med(lambda: x.sum()))
out("max 2^28", med(lambda: x.max()))
x2 = x.view(65536, 4096)
out("sum_last 65536x4096", med(lambda: x2.sum(-1)))
out("max_last 65536x4096", med(lambda: x2.amax(-1)))
del x, y, z, x2
torch.cuda.empty_cache()

for r, c in [(16384, 1024), (4096, 4096), (65536, 65)]:
    xs = torch.rand(r, c, device=dev) * 4 - 2
    gs = torch.rand(r, c, device=dev) * 4 - 2
    ys = torch.softmax(xs, -1)
    out(f"softmax {r}x{c}", med(lambda: torch.softmax(xs, -1)))
    out(f"softmax_bwd {r}x{c}", med(lambda: torch.ops.aten._softmax_backward_data(gs, ys, -1, torch.float32)))
    out(f"log_softmax {r}x{c}", med(lambda: torch.log_softmax(xs, -1)))
    ls = torch.log_softmax(xs, -1)
    out(f"log_softmax_bwd {r}x{c}",
        med(lambda: torch.ops.aten._log_softmax_backward_data(gs, ls, -1, torch.float32)))

r, c = 16384, 768
xs = torch.rand(r, c, device=dev) * 4 - 2
gs = torch.rand(r, c, device=dev) * 4 - 2
w = torch.rand(c, device=dev)
bb = torch.rand(c, device=dev)
_, mean, rstd = torch.ops.aten.native_layer_norm(xs, [c], w, bb, 1e-5)
out("layernorm 16384x768", med(lambda: torch.ops.aten.native_layer_norm(xs, [c], w, bb, 1e-5)))
out("layernorm_bwd 16384x768",
    med(lambda: torch.ops.aten.native_layer_norm_backward(gs, xs, [c], mean, rstd, w, bb, [True, True, True])))

for r, c in [(16384, 65), (4096, 50257)]:
    xs = (torch.rand(r, c, device=dev) * 4 - 2).requires_grad_(True)
    t = torch.randint(0, c, (r,), device=dev)
    out(f"cross_entropy {r}x{c}", med(lambda: F.cross_entropy(xs, t)))
    loss = F.cross_entropy(xs, t)
    out(f"cross_entropy_bwd {r}x{c}", med(lambda: torch.autograd.grad(loss, xs, retain_graph=True)))
    del xs, loss
torch.cuda.empty_cache()

v, dim = 50257, 768
tokens = (1 << 28) // dim
table = torch.rand(v, dim, device=dev)
idx = torch.randint(0, v, (tokens,), device=dev)
out(f"embedding {tokens}x{dim}", med(lambda: F.embedding(idx, table)))
g = torch.rand(tokens, dim, device=dev)
out(f"embedding_bwd {tokens}x{dim}", med(lambda: torch.ops.aten.embedding_dense_backward(g, idx, v, -1, False)))
del table, idx, g
torch.cuda.empty_cache()

params = [torch.rand(1_000_000, device=dev) for _ in range(10)]
for p in params:
    p.grad = torch.rand_like(p)
opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
out("adam 10M", med(lambda: opt.step()))
opt = torch.optim.SGD(params, lr=1e-4, momentum=0.9, foreach=True)
out("sgd_momentum 10M", med(lambda: opt.step()))
opt = torch.optim.SGD(params, lr=1e-4, momentum=0.0, foreach=True)
out("sgd 10M", med(lambda: opt.step()))
