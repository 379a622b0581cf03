"""PyTorch reference for camel's GPT-mini training step (bench/src/bin/gpt_bench.rs): the same
model written nanoGPT-style (token + learned position embeddings, pre-LN blocks with a naive
causal attention, GELU MLP, final LayerNorm, untied bias-free LM head), AdamW with weight decay on
the matrices only, gradient clipping at 1.0, eager; fp32, or with `--precision bf16|f16` the
forward under torch.autocast in that dtype (f32 master weights; f16 with a GradScaler).

One step = zero_grad, forward, cross-entropy, backward, clip_grad_norm_, AdamW step, on a fixed
random batch of token ids. Each step is timed alone between two CUDA events (wall clock on the
CPU) after warm-up steps; the median is printed, with tokens per second (batch x block / step
time) and the peak device memory of the allocator (torch.cuda.max_memory_allocated) per size.

Sizes (the same as gpt_bench):
  small   4 layers, 4 heads, 128 wide, block 128, batch 64, dropout 0.0
  recipe  6 layers, 6 heads, 384 wide, block 256, batch 64, dropout 0.2

Output: a CSV (also what `gpt_bench --torch FILE` reads):
  size,impl,device,step_ms,tokens_per_s,peak_mib

Usage: python3 gpt_torch.py [--device cuda|cpu] [--sizes small,recipe] [--steps N] [--warmup N]
                            [--attn naive|sdpa] [--precision f32|bf16|f16] [--threads N]
                            [--out FILE]
"""
import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {
    "small": dict(n_layer=4, n_head=4, n_embd=128, block_size=128, batch_size=64, dropout=0.0),
    "recipe": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=64, dropout=0.2),
}
VOCAB = 65


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout, attn):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.n_embd, self.dropout, self.attn = n_head, n_embd, dropout, attn
        mask = torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
        self.register_buffer("bias", mask)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.attn == "sdpa":
            y = F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.dropout if self.training else 0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd, dropout):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout, attn):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout, attn)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, dropout, attn):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(
            [Block(n_embd, n_head, block_size, dropout, attn) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, VOCAB, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith(".bias") and not name.startswith("ln") and ".ln_" not in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def bench(size, cfg, args):
    dev = args.device
    torch.manual_seed(0)
    model = GPT(cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["block_size"], cfg["dropout"],
                args.attn).to(dev)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    extra = {"fused": True} if dev == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), **extra)
    B, T = cfg["batch_size"], cfg["block_size"]
    x = torch.randint(0, VOCAB, (B, T), device=dev)
    y = torch.randint(0, VOCAB, (B, T), device=dev)

    amp = {"bf16": torch.bfloat16, "f16": torch.float16}.get(args.precision)
    scaler = torch.amp.GradScaler(dev) if args.precision == "f16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=amp, enabled=amp is not None):
            loss = model(x, y)
        if scaler is None:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()

    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        if dev == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    ms = times[len(times) // 2]
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev == "cuda" else 0.0
    return ms, B * T / (ms / 1e3), peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--sizes", default="small,recipe")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--attn", default="naive", choices=["naive", "sdpa"])
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (CPU)")
    ap.add_argument("--out", default=None, help="also write the CSV here")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    name = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    lines = [f"# device: {name}; torch {torch.__version__}; attention {args.attn}; "
             f"precision {args.precision}; "
             f"median of {args.steps} steps after {args.warmup}",
             "size,impl,device,step_ms,tokens_per_s,peak_mib"]
    print("\n".join(lines), flush=True)
    for size in args.sizes.split(","):
        ms, tps, peak = bench(size, SIZES[size], args)
        line = f"{size},torch,{args.device},{ms:.4f},{tps:.0f},{peak:.1f}"
        print(line, flush=True)
        lines.append(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
