//! GPU benchmark of fused attention: every step of the attention ladder against PyTorch's
//! `scaled_dot_product_attention` (`bench/torch/attention_torch.py`, timed the same way in the
//! same run). The steps are f32, so their reference is SDPA in f32 (the memory-efficient
//! backend, the one PyTorch runs for f32); the file also carries SDPA in bf16 through
//! FlashAttention-2 and cuDNN, the bars of the tensor-core steps to come, shown beside them.
//!
//! Shapes: head dims 64 and 128, `T` from 512 to 16384 with 16384 tokens a batch
//! (`B = 16384 / T`) and `2048 / d` heads (FlashAttention's benchmark), causal and not, forward
//! and backward (the backward alone: dq, dk, dv from a saved forward). FLOPs: `4·B·H·T²·d` a
//! forward (half when causal), 2.5 times that a backward.
//!
//! Timing: launches back to back between one pair of CUDA events (as many as take about 2 ms,
//! 3 to 100), the median over `--reps` batches, per launch, through the camel-cuda launchers.
//!
//! `attention_bench [--torch torch.txt] [--reps N] [--max-t T] [--step1-max-t T]` — prints a
//! Markdown table, a row per implementation (camel's steps, then PyTorch's backends), its speed
//! relative to SDPA in f32 in the last column; the PyTorch file holds `"<case> <pass> <backend>\t<ms>"` lines
//! (`python3 bench/torch/attention_torch.py > torch.txt`). Step 1 runs up to `--step1-max-t`
//! (default 4096): it is the slow teaching step.

use camel_cuda::kernels::attention::{self as attn, AttnGeom};
use camel_cuda::kernels::ladder::Family;
use camel_cuda::{Buffer, CudaDevice, Result};
use std::collections::HashMap;

/// The pattern-filled inputs of [`camel_bench::pattern_buffer`].
fn buf(dev: &CudaDevice, n: usize, seed: u32) -> Result<Buffer> {
    camel_bench::pattern_buffer(dev, n, seed)
}

/// Median milliseconds per launch of `f` ([`camel_bench::median_ms`], 2 warm-up calls).
fn time(dev: &CudaDevice, reps: usize, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    camel_bench::median_ms(dev, reps, 2, f)
}

/// The PyTorch rows: the key in the timings file and the row's label.
const REFERENCES: [(&str, &str); 3] = [
    ("efficient_f32", "SDPA f32 (efficient)"),
    ("flash_bf16", "FA2 bf16"),
    ("cudnn_bf16", "cuDNN bf16"),
];

/// Prints one row of the table: its time, TFLOP/s and speed against SDPA in f32.
#[allow(clippy::too_many_arguments)]
fn row(
    d: usize,
    t: usize,
    mask: &str,
    pass: &str,
    imp: &str,
    ms: f64,
    flops: f64,
    f32ref: Option<f64>,
) {
    let ratio = f32ref.map_or("–".into(), |r| format!("{:.2}×", r / ms));
    println!(
        "| {d} | {t} | {mask} | {pass} | {imp} | {ms:.3} | {:.1} | {ratio} |",
        flops / (ms * 1e-3) / 1e12
    );
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let reps = arg("--reps").map_or(10, |s| s.parse().expect("--reps N"));
    let max_t = arg("--max-t").map_or(16384, |s| s.parse().expect("--max-t T"));
    let step1_max_t = arg("--step1-max-t").map_or(4096, |s| s.parse().expect("--step1-max-t T"));
    let torch = match arg("--torch") {
        Some(path) => camel_bench::read_timings(
            &std::fs::read_to_string(&path).expect("reading the PyTorch timings"),
        ),
        None => HashMap::new(),
    };
    let dev = camel_cuda::device(0)?;
    let d = &*dev;
    println!("device: {}", d.name());
    println!();
    println!("| d | T | mask | pass | impl | ms | TFLOP/s | × SDPA f32 |");
    println!("|---|---|---|---|---|---|---|---|");
    for hd in [64usize, 128] {
        let mut t = 512usize;
        while t <= max_t {
            let (b, h) = (16384 / t, 2048 / hd);
            let n = b * h * t * hd;
            let (q, k, v) = (buf(d, n, 1)?, buf(d, n, 2)?, buf(d, n, 3)?);
            let (o, dout) = (buf(d, n, 4)?, buf(d, n, 5)?);
            let (dq, dk, dv) = (buf(d, n, 6)?, buf(d, n, 7)?, buf(d, n, 8)?);
            let lse = buf(d, b * h * t, 9)?;
            for causal in [false, true] {
                let g = AttnGeom {
                    b,
                    h,
                    tq: t,
                    tk: t,
                    d: hd,
                    q: AttnGeom::dense(h, t, hd),
                    k: AttnGeom::dense(h, t, hd),
                    v: AttnGeom::dense(h, t, hd),
                    scale: 1.0 / (hd as f32).sqrt(),
                    causal,
                };
                let mask = if causal { "causal" } else { "full" };
                let fwd_flops = 4.0 * (b * h) as f64 * (t * t) as f64 * hd as f64
                    / if causal { 2.0 } else { 1.0 };
                // the backward reads the forward's log-sum-exp: run it once first
                (attn::STEPS[1].forward)(d, &g, q.ptr(), k.ptr(), v.ptr(), o.ptr(), lse.ptr())?;
                let flops_of = |pass: &str| {
                    if pass == "forward" {
                        fwd_flops
                    } else {
                        2.5 * fwd_flops
                    }
                };
                for pass in ["forward", "backward"] {
                    let case = format!("d{hd} T{t} {mask} {pass}");
                    let flops = flops_of(pass);
                    for kern in &attn::STEPS {
                        if kern.step.number() == 1 && (t > step1_max_t || pass == "backward") {
                            continue; // step 1 shares step 2's backward
                        }
                        let ms = if pass == "forward" {
                            time(d, reps, &mut || {
                                (kern.forward)(d, &g, q.ptr(), k.ptr(), v.ptr(), o.ptr(), lse.ptr())
                            })?
                        } else {
                            time(d, reps, &mut || {
                                (kern.backward)(
                                    d,
                                    &g,
                                    q.ptr(),
                                    k.ptr(),
                                    v.ptr(),
                                    o.ptr(),
                                    dout.ptr(),
                                    lse.ptr(),
                                    dq.ptr(),
                                    dk.ptr(),
                                    dv.ptr(),
                                )
                            })?
                        };
                        let name = Family::Attention
                            .steps()
                            .iter()
                            .find(|i| i.step == kern.step)
                            .map_or("?", |i| i.name);
                        let f32ref = torch.get(&format!("{case} efficient_f32")).copied();
                        row(
                            hd,
                            t,
                            mask,
                            pass,
                            &format!("camel {} {name}", kern.step.number()),
                            ms,
                            flops,
                            f32ref,
                        );
                    }
                    for (key, label) in REFERENCES {
                        if let Some(&ms) = torch.get(&format!("{case} {key}")) {
                            let f32ref = torch.get(&format!("{case} efficient_f32")).copied();
                            row(hd, t, mask, pass, label, ms, flops, f32ref);
                        }
                    }
                }
            }
            t *= 2;
        }
    }
    Ok(())
}
