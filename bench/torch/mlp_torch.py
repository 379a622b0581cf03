"""PyTorch reference for the MLP training step (784-256-256-10, Adam, eager), timed the same way
as camel's CLI on the same GPU: per-step median of CUDA-event-timed steps. fp32, or with
`--precision bf16|f16` the forward under torch.autocast in that dtype (f32 master weights; f16
with a GradScaler), as `camel train mlp --precision …` trains."""
import argparse, torch, torch.nn as nn
ap = argparse.ArgumentParser()
ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "f16"])
args = ap.parse_args()
amp = {"bf16": torch.bfloat16, "f16": torch.float16}.get(args.precision)
torch.manual_seed(0)
dev = "cuda"
for B in (64, 256):
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(dev) if args.precision == "f16" else None
    x = torch.randn(B, 784, device=dev); y = torch.randint(0, 10, (B,), device=dev)
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=amp, enabled=amp is not None):
            loss = nn.functional.cross_entropy(model(x), y)
        if scaler is None:
            loss.backward(); opt.step()
        else:
            scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
    for _ in range(30): step()
    torch.cuda.synchronize()
    times = []
    for _ in range(200):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); step(); e.record(); e.synchronize(); times.append(s.elapsed_time(e))
    times.sort()
    print(f"torch MLP 784-256-256-10 Adam {args.precision} B{B}: median {times[len(times)//2]:.4f} ms/step", flush=True)
