"""PyTorch reference for `camel train lenet`: LeNet-5 (conv 1->6 k5 pad 2, ReLU, max-pool 2,
conv 6->16 k5, ReLU, max-pool 2, 400-120-84-10) trained with Adam (lr 1e-3), batch 64, eager,
on MNIST normalized as camel does ((x/255 - 0.1307) / 0.3081). `--precision bf16|f16` trains
under torch.autocast with f32 master weights (f16 with torch.amp.GradScaler), as
`camel train lenet --precision` does; the default is fp32 (TF32 off).

The epoch is timed as camel's CLI times it: wall clock over one epoch, every batch gathered from
host memory by a shuffled index and copied to the device, the running loss read every 50
steps. The figure is milliseconds per step. On the GPU a second row times the step alone
(batch already on the device; CUDA events, median of 200 after 30 warm-up steps), the most
favourable figure for PyTorch.

    python3 bench/torch/lenet_torch.py --device cuda --epochs 8        # accuracy and ms/step
    python3 bench/torch/lenet_torch.py --device cuda --epochs 8 --precision bf16
    taskset -c 0 python3 bench/torch/lenet_torch.py --device cpu --threads 1 --epochs 1

MNIST is read from $CAMEL_DATA_DIR/mnist (the four idx .gz files)."""
import argparse, gzip, os, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(root):
    def images(name):
        x = idx(os.path.join(root, name)).astype(np.float32)
        return torch.from_numpy(((x / 255.0 - 0.1307) / 0.3081)[:, None, :, :].copy())

    def labels(name):
        return torch.from_numpy(idx(os.path.join(root, name)).astype(np.int64))

    return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (CPU)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)
    root = os.path.join(os.environ.get("CAMEL_DATA_DIR", "datasets"), "mnist")
    xtr, ytr, xte, yte = load(root)
    model = LeNet5().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    amp_dtype = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[a.precision]
    scaler = torch.amp.GradScaler(dev.type, enabled=a.precision == "f16")

    def autocast():
        return torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None)

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    print(f"# torch {torch.__version__}, device {a.device}, threads {torch.get_num_threads()}, "
          f"batch {a.batch_size}, precision {a.precision}", flush=True)
    g = torch.Generator().manual_seed(a.seed)
    best = 0.0
    for epoch in range(1, a.epochs + 1):
        model.train()
        perm = torch.randperm(xtr.shape[0], generator=g)
        sync()
        t0 = time.perf_counter()
        steps, running = 0, torch.zeros((), device=dev)
        for i in range(0, xtr.shape[0], a.batch_size):
            b = perm[i:i + a.batch_size]
            x, y = xtr[b].to(dev), ytr[b].to(dev)
            loss = train_step(x, y)
            running += loss.detach().float()
            steps += 1
            if steps % 50 == 0:
                running.item()
        sync()
        secs = time.perf_counter() - t0
        model.eval()
        correct = 0
        with torch.no_grad(), autocast():
            for i in range(0, xte.shape[0], 1000):
                correct += (model(xte[i:i + 1000].to(dev)).argmax(1).cpu() == yte[i:i + 1000]).sum().item()
        acc = correct / xte.shape[0]
        best = max(best, acc)
        print(f"epoch {epoch}/{a.epochs}: train loss {running.item() / steps:.4f}  test acc "
              f"{acc * 100:.2f}%  time {secs:.2f}s ({secs * 1e3 / steps:.3f} ms/step)", flush=True)
    print(f"best test acc {best * 100:.2f}%", flush=True)
    if dev.type == "cuda":
        x, y = xtr[:a.batch_size].to(dev), ytr[:a.batch_size].to(dev)
        model.train()

        def step():
            train_step(x, y)

        for _ in range(30):
            step()
        sync()
        times = []
        for _ in range(200):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); step(); e.record(); e.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        print(f"step alone (batch on the device): median {times[len(times) // 2]:.4f} ms/step",
              flush=True)


if __name__ == "__main__":
    main()
