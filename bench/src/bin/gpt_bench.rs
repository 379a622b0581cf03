//! GPT-mini training-step benchmark against PyTorch (`bench/torch/gpt_torch.py`, the same model
//! written nanoGPT-style, eager fp32, timed the same way).
//!
//! One step = zero_grad, forward, cross-entropy, backward, gradient clipping at 1.0 and an
//! AdamW step (weight decay 0.1 on the matrices), on a fixed random batch of token ids, in
//! training mode (dropout on). After warm-up steps, each step is timed alone between two CUDA
//! events (wall clock on the CPU); the median is printed with tokens per second
//! (batch × block / step time) and the peak device memory since the process started (the small
//! size runs first, so each size's figure is its own). The memory figure is `peak_requested` of
//! `MemoryStats`: the bytes live buffers asked for, each rounded up to 512, which is what
//! PyTorch's `torch.cuda.max_memory_allocated` counts. Neither counts cached free blocks; camel's
//! `peak` counts whole size-class blocks (up to 12.5% above the request) and goes to stderr.
//!
//! Sizes: `small` (4 layers, 4 heads, 128 wide, block 128, batch 64, dropout 0) and `recipe`
//! (6 layers, 6 heads, 384 wide, block 256, batch 64, dropout 0.2).
//!
//! `--precision bf16|f16` runs the forward in an autocast scope (matrix products in that dtype
//! on f32 master weights; f16 with dynamic loss scaling), as `camel train gpt --precision …`
//! does; compare it with `gpt_torch.py` at the same precision.
//!
//! `--attention naive` runs the naive attention where the fused kernel would apply (the path
//! each size takes goes to stderr).
//!
//! `gpt_bench [--device cuda|cpu] [--sizes small,recipe] [--steps N] [--warmup N]
//! [--precision f32|bf16|f16] [--attention fused|naive] [--async-thin on|off] [--hgemm-blocks N]
//! [--torch FILE]` prints a CSV `size,impl,device,step_ms,tokens_per_s,peak_mib` (the format of
//! gpt_torch.py); with `--torch FILE` (gpt_torch.py's output) it then prints a Markdown table
//! of both and the ratios (PyTorch time / camel time: above 1 means camel is faster; camel's
//! peak memory / PyTorch's).

use camel_models::gpt::{GptConfig, GptMini};
use camel_models::train::backward_step;
use camel_nn::{autocast_guard, DType, Device, Module, Tensor};
use camel_optim::{decay_groups, Adam, GradScaler, Optimizer};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

/// Token count of Tiny Shakespeare's vocabulary.
const VOCAB: usize = 65;

struct Size {
    name: &'static str,
    config: GptConfig,
    batch: usize,
}

fn sizes() -> Vec<Size> {
    vec![
        Size {
            name: "small",
            config: GptConfig::small(VOCAB),
            batch: 64,
        },
        Size {
            name: "recipe",
            config: GptConfig::shakespeare_char(VOCAB),
            batch: 64,
        },
    ]
}

/// One row of the CSV.
#[derive(Clone, Debug)]
struct Row {
    size: String,
    step_ms: f64,
    tokens_per_s: f64,
    peak_mib: f64,
}

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

fn bench(
    size: &Size,
    device: Device,
    warmup: usize,
    steps: usize,
    precision: Option<DType>,
) -> BenchResult<Row> {
    let cfg = &size.config;
    let model = GptMini::with_seed(cfg, 0, device)?;
    model.train();
    let probe = Tensor::zeros(&[1, 1, cfg.n_embd], device)?;
    let path = {
        let _scope = autocast_guard(precision)?;
        model.attention_path(&probe)
    };
    eprintln!(
        "# {}: attention {}",
        size.name,
        path.map_or_else(|| "none".to_string(), |p| p.to_string())
    );
    let groups = decay_groups(model.named_parameters(), 0.1);
    let mut opt = Adam::adamw_groups(groups, 1e-3)?.betas(0.9, 0.99)?;
    let params = model.parameters();
    let mut scaler = match precision {
        Some(DType::F16) => Some(GradScaler::new(device)?),
        _ => None,
    };
    let (b, t) = (size.batch, cfg.block_size);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let mut ids =
        |n: usize| -> Vec<i64> { (0..n).map(|_| rng.gen_range(0..VOCAB as i64)).collect() };
    let x = Tensor::from_vec_i64(ids(b * t), &[b, t], device)?;
    let y = Tensor::from_vec_i64(ids(b * t), &[b, t], device)?;
    let mut step = || -> BenchResult<()> {
        opt.zero_grad();
        let loss = {
            let _scope = autocast_guard(precision)?;
            GptMini::loss(&model.logits(&x)?, &y)?
        };
        backward_step(&loss, &mut opt, scaler.as_mut(), Some((&params, 1.0)))?;
        Ok(())
    };
    for _ in 0..warmup {
        step()?;
    }
    let mut times = Vec::with_capacity(steps);
    let cuda = match device {
        Device::Cuda(i) => Some(camel_cuda::device(i)?),
        Device::Cpu => None,
    };
    if let Some(d) = &cuda {
        d.synchronize()?;
    }
    for _ in 0..steps {
        match &cuda {
            Some(d) => {
                let a = d.record_event()?;
                step()?;
                let e = d.record_event()?;
                d.synchronize()?;
                times.push(f64::from(a.elapsed_ms(&e)?));
            }
            None => {
                let t0 = std::time::Instant::now();
                step()?;
                times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let ms = times[times.len() / 2];
    let mib = |b: usize| b as f64 / (1u64 << 20) as f64;
    let stats = cuda.map(|d| d.memory_stats());
    let peak = stats.map_or(0.0, |m| mib(m.peak_requested));
    if let Some(m) = stats {
        eprintln!(
            "# {}: peak {:.1} MiB requested, {:.1} MiB in size-class blocks",
            size.name,
            mib(m.peak_requested),
            mib(m.peak)
        );
    }
    Ok(Row {
        size: size.name.to_string(),
        step_ms: ms,
        tokens_per_s: (b * t) as f64 / (ms / 1e3),
        peak_mib: peak,
    })
}

/// Rows of `impl_name` in a CSV of gpt_torch.py / gpt_bench, by size.
fn read_rows(text: &str, impl_name: &str) -> HashMap<String, Row> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            if f.len() != 6 || f[1] != impl_name {
                return None;
            }
            Some((
                f[0].to_string(),
                Row {
                    size: f[0].to_string(),
                    step_ms: f[3].parse().ok()?,
                    tokens_per_s: f[4].parse().ok()?,
                    peak_mib: f[5].parse().ok()?,
                },
            ))
        })
        .collect()
}

fn main() {
    if let Err(e) = run() {
        eprintln!("gpt_bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| camel_bench::arg(&args, name);
    let device: Device = arg("--device")
        .unwrap_or_else(|| "cuda".into())
        .parse()
        .map_err(|e| format!("--device: {e}"))?;
    let steps: usize = arg("--steps").map_or(Ok(50), |s| s.parse())?;
    let precision = match arg("--precision").as_deref() {
        None | Some("f32") => None,
        Some("bf16") => Some(DType::BF16),
        Some("f16") => Some(DType::F16),
        Some(p) => return Err(format!("--precision: {p:?} is not f32, bf16 or f16").into()),
    };
    let warmup: usize = arg("--warmup").map_or(Ok(10), |s| s.parse())?;
    if steps == 0 {
        return Err("--steps must be at least 1".into());
    }
    let fused = match arg("--attention").as_deref() {
        None | Some("fused") => true,
        Some("naive") => false,
        Some(a) => return Err(format!("--attention: {a:?} is not fused or naive").into()),
    };
    if let Some(v) = arg("--async-thin") {
        // for measuring SGEMM step 13's thin-product routes against the tiles they replace
        let mut x = camel_cuda::config::experiments();
        x.async_thin = match v.as_str() {
            "on" => true,
            "off" => false,
            _ => return Err(format!("--async-thin: {v:?} is not on or off").into()),
        };
        camel_cuda::config::set_experiments(x);
    }
    if let Some(v) = arg("--hgemm-blocks") {
        // for measuring the persistent tensor-core GEMM (0: a block a tile) inside the step
        let mut x = camel_cuda::config::experiments();
        x.hgemm_blocks = Some(
            v.parse()
                .map_err(|_| format!("--hgemm-blocks: {v:?} is not a block count"))?,
        );
        camel_cuda::config::set_experiments(x);
    }
    let wanted = arg("--sizes").unwrap_or_else(|| "small,recipe".into());
    let mut all = sizes();
    for s in &mut all {
        s.config.fused_attention = fused;
    }
    let mut chosen = Vec::new();
    for w in wanted.split(',') {
        let s = all
            .iter()
            .find(|s| s.name == w)
            .ok_or_else(|| format!("--sizes: unknown size {w:?} (small, recipe)"))?;
        chosen.push(s);
    }
    let torch = match arg("--torch") {
        Some(p) => Some(read_rows(
            &std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?,
            "torch",
        )),
        None => None,
    };
    let dev_name = match device {
        Device::Cuda(i) => camel_cuda::device(i)?.name(),
        Device::Cpu => format!(
            "cpu ({} threads available)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
    };
    println!(
        "# device: {dev_name}; camel; precision {}; median of {steps} steps after {warmup}",
        precision.map_or("f32", |d| d.name())
    );
    println!("size,impl,device,step_ms,tokens_per_s,peak_mib");
    let dev_word = if device == Device::Cpu { "cpu" } else { "cuda" };
    let mut rows = Vec::new();
    for s in chosen {
        let r = bench(s, device, warmup, steps, precision)?;
        println!(
            "{},camel,{dev_word},{:.4},{:.0},{:.1}",
            r.size, r.step_ms, r.tokens_per_s, r.peak_mib
        );
        rows.push(r);
    }
    if let Some(torch) = torch {
        println!();
        println!("| size | camel ms/step | PyTorch ms/step | speed (PyTorch time / camel time) | camel tokens/s | PyTorch tokens/s | camel peak MiB | PyTorch peak MiB | memory (camel / PyTorch) |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for r in &rows {
            let Some(t) = torch.get(&r.size) else {
                println!(
                    "| {} | {:.3} | – | – | {:.0} | – | {:.1} | – | – |",
                    r.size, r.step_ms, r.tokens_per_s, r.peak_mib
                );
                continue;
            };
            let mem = if t.peak_mib > 0.0 {
                format!("{:.2}", r.peak_mib / t.peak_mib)
            } else {
                "–".into()
            };
            println!(
                "| {} | {:.3} | {:.3} | {:.2}× | {:.0} | {:.0} | {:.1} | {:.1} | {mem} |",
                r.size,
                r.step_ms,
                t.step_ms,
                t.step_ms / r.step_ms,
                r.tokens_per_s,
                t.tokens_per_s,
                r.peak_mib,
                t.peak_mib
            );
        }
    }
    Ok(())
}
