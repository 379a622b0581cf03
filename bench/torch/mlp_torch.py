"""PyTorch reference for the MLP training step (784-256-256-10, Adam, eager), timed the same way
as camel's CLI on the same GPU: per-step median of CUDA-event-timed steps. fp32, or with
`--precision bf16` the forward under torch.autocast(bfloat16) (f32 master weights), as
`camel train mlp --precision bf16` trains."""
import argparse, torch, torch.nn as nn
ap = argparse.ArgumentParser()
ap.add_argument("--precision", default="f32", choices=["f32", "bf16"])
args = ap.parse_args()
amp = torch.bfloat16 if args.precision == "bf16" else None
torch.manual_seed(0)
dev = "cuda"
for B in (64, 256):
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(B, 784, device=dev); y = torch.randint(0, 10, (B,), device=dev)
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=amp, enabled=amp is not None):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward(); opt.step()
    for _ in range(30): step()
    torch.cuda.synchronize()
    times = []
    for _ in range(200):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); step(); e.record(); e.synchronize(); times.append(s.elapsed_time(e))
    times.sort()
    print(f"torch MLP 784-256-256-10 Adam {args.precision} B{B}: median {times[len(times)//2]:.4f} ms/step", flush=True)
