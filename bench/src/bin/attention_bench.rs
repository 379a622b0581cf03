//! GPU benchmark of fused attention: every step of the attention ladder against PyTorch's
//! `scaled_dot_product_attention` (`bench/torch/attention_torch.py`, timed the same way in the
//! same run). Steps 1–2 are f32, and their reference is SDPA in f32 (the memory-efficient
//! backend, the one PyTorch runs for f32); step 3 runs in bf16 and f16, and its reference is
//! FlashAttention-2 in the same dtype. cuDNN's attention in bf16 (the FlashAttention-3 class of
//! kernel) is shown beside them, as the bar of the Hopper steps to come.
//!
//! Shapes: head dims 64 and 128, `T` from 512 to 16384 with 16384 tokens a batch
//! (`B = 16384 / T`) and `2048 / d` heads (FlashAttention's benchmark), causal and not, forward
//! and backward (the backward alone: dq, dk, dv from a saved forward). FLOPs: `4·B·H·T²·d` a
//! forward (half when causal), 2.5 times that a backward.
//!
//! Timing: launches back to back between one pair of CUDA events (as many as take about 2 ms,
//! 3 to 100), the median over `--reps` batches, per launch, through the camel-cuda launchers.
//!
//! `attention_bench [--torch torch.txt] [--reps N] [--min-t T] [--max-t T] [--dims 64,128]
//! [--step1-max-t T]` — prints a
//! Markdown table, a row per implementation and dtype (camel's steps, then PyTorch's backends),
//! its speed relative to its reference in the last column (SDPA f32 for f32, FA2 of the same
//! dtype for f16 and bf16); the PyTorch file holds `"<case> <pass> <backend>\t<ms>"` lines
//! (`python3 bench/torch/attention_torch.py > torch.txt`). Step 1 runs up to `--step1-max-t`
//! (default 4096): it is the slow teaching step; `--steps 6,7` runs only those steps. Step 6's
//! backward is timed twice: as the library runs it, and with dq summed in a fixed order
//! (`CAMEL_DETERMINISTIC`). `--dropout p` times every step with dropout `p`
//! inside its kernels (the mask drawn from a fixed seed), against FA2 with SDPA's `dropout_p`
//! (`attention_torch.py REPS MAX_T p`). `--persistent off` launches step 8's forward a block a
//! query tile instead of one block a multiprocessor (`Experiments::attention_blocks`).
//! `--min-t`, `--max-t` and `--dims` narrow the shapes, so that a profiler's first launches of a
//! kernel are the shape wanted.

use camel_cuda::kernels::attention::{self as attn, AttnGeom};
use camel_cuda::kernels::ladder::Family;
use camel_cuda::kernels::shape::Elem;
use camel_cuda::{Buffer, CudaDevice, Result};

/// Median milliseconds per launch of `f` ([`camel_bench::median_ms`], 2 warm-up calls).
fn time(dev: &CudaDevice, reps: usize, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    camel_bench::median_ms(dev, reps, 2, f)
}

/// The PyTorch rows: the key in the timings file, the row's label, its dtype, and the key of
/// its reference.
const REFERENCES: [(&str, &str, &str, &str); 4] = [
    ("efficient_f32", "SDPA (efficient)", "f32", "efficient_f32"),
    ("flash_bf16", "FA2", "bf16", "flash_bf16"),
    ("flash_f16", "FA2", "f16", "flash_f16"),
    ("cudnn_bf16", "cuDNN", "bf16", "flash_bf16"),
];

/// The PyTorch key of the reference of camel's rows in `elem`.
fn reference_key(elem: Elem) -> &'static str {
    match elem {
        Elem::F16 => "flash_f16",
        Elem::BF16 => "flash_bf16",
        _ => "efficient_f32",
    }
}

/// One problem's operands in one element type: q, k, v, o, dout, dq, dk, dv, and the f32
/// log-sum-exp.
struct Operands {
    bufs: Vec<Buffer>,
    lse: Buffer,
}

impl Operands {
    fn new(dev: &CudaDevice, n: usize, rows: usize, elem: Elem) -> Result<Operands> {
        let bufs = (1..=8)
            .map(|seed| match elem {
                Elem::F16 | Elem::BF16 => {
                    camel_bench::pattern_buffer_16(dev, n, seed, elem == Elem::BF16)
                }
                _ => camel_bench::pattern_buffer(dev, n, seed),
            })
            .collect::<Result<Vec<_>>>()?;
        let lse = camel_bench::pattern_buffer(dev, rows, 9)?;
        Ok(Operands { bufs, lse })
    }
}

/// Prints one row of the table: its time, TFLOP/s and speed against its reference.
#[allow(clippy::too_many_arguments)]
fn row(
    d: usize,
    t: usize,
    mask: &str,
    pass: &str,
    imp: &str,
    dtype: &str,
    ms: f64,
    flops: f64,
    reference: Option<f64>,
) {
    let ratio = reference.map_or("–".into(), |r| format!("{:.2}×", r / ms));
    println!(
        "| {d} | {t} | {mask} | {pass} | {imp} | {dtype} | {ms:.3} | {:.1} | {ratio} |",
        flops / (ms * 1e-3) / 1e12
    );
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| camel_bench::arg(&args, name);
    let reps = arg("--reps").map_or(10, |s| s.parse().expect("--reps N"));
    let min_t = arg("--min-t").map_or(512, |s| s.parse().expect("--min-t T"));
    let max_t = arg("--max-t").map_or(16384, |s| s.parse().expect("--max-t T"));
    let dims: Vec<usize> = arg("--dims").map_or(vec![64, 128], |s| {
        s.split(',')
            .map(|x| x.trim().parse().expect("--dims 64,128"))
            .collect()
    });
    let step1_max_t = arg("--step1-max-t").map_or(4096, |s| s.parse().expect("--step1-max-t T"));
    let dropout: f32 = arg("--dropout").map_or(0.0, |s| s.parse().expect("--dropout p"));
    // `--steps 6,7`: only those steps of the ladder (the references always run)
    let steps: Option<Vec<usize>> = arg("--steps").map(|s| {
        s.split(',')
            .map(|x| x.trim().parse().expect("--steps N,M,…"))
            .collect()
    });
    if let Some(p) = arg("--persistent") {
        let mut x = camel_cuda::config::experiments();
        x.attention_blocks = match p.as_str() {
            "on" => None,
            "off" => Some(usize::MAX),
            _ => panic!("--persistent on|off"),
        };
        camel_cuda::config::set_experiments(x);
    }
    let torch = camel_bench::torch_timings(&args).expect("reading the PyTorch timings");
    let dev = camel_cuda::device(0)?;
    let d = &*dev;
    if dropout > 0.0 {
        println!(
            "device: {}; dropout {dropout} inside the kernels (FA2: SDPA's dropout_p)",
            d.name()
        );
    } else {
        println!("device: {}", d.name());
    }
    println!();
    println!("| d | T | mask | pass | impl | dtype | ms | TFLOP/s | × reference |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for hd in dims {
        // T doubles from 512: the first at least --min-t
        let mut t = 512usize;
        while t < min_t {
            t *= 2;
        }
        while t <= max_t {
            let (b, h) = (16384 / t, 2048 / hd);
            let n = b * h * t * hd;
            let operands = [Elem::F32, Elem::BF16, Elem::F16]
                .into_iter()
                .map(|e| Ok((e, Operands::new(d, n, b * h * t, e)?)))
                .collect::<Result<Vec<_>>>()?;
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
                    dropout,
                    seed: 1,
                };
                let mask = if causal { "causal" } else { "full" };
                let fwd_flops = 4.0 * (b * h) as f64 * (t * t) as f64 * hd as f64
                    / if causal { 2.0 } else { 1.0 };
                for pass in ["forward", "backward"] {
                    let case = format!("d{hd} T{t} {mask} {pass}");
                    let flops = if pass == "forward" {
                        fwd_flops
                    } else {
                        2.5 * fwd_flops
                    };
                    for kern in &attn::STEPS {
                        if kern.step.number() == 1 && (t > step1_max_t || pass == "backward") {
                            continue; // step 1 shares step 2's backward
                        }
                        if steps
                            .as_ref()
                            .is_some_and(|s| !s.contains(&(kern.step.number() as usize)))
                        {
                            continue;
                        }
                        for &elem in kern.dtypes {
                            let Some((_, x)) = operands.iter().find(|(e, _)| *e == elem) else {
                                continue;
                            };
                            let p: Vec<_> = x.bufs.iter().map(|b| b.ptr()).collect();
                            let [q, k, v, o, dout, dq, dk, dv] = p[..] else {
                                unreachable!()
                            };
                            let lse = x.lse.ptr();
                            // the backward reads the forward's output and log-sum-exp
                            (kern.forward)(d, &g, elem, q, k, v, o, lse)?;
                            let ms = if pass == "forward" {
                                time(d, reps, &mut || {
                                    (kern.forward)(d, &g, elem, q, k, v, o, lse)
                                })?
                            } else {
                                time(d, reps, &mut || {
                                    (kern.backward)(d, &g, elem, q, k, v, o, dout, lse, dq, dk, dv)
                                })?
                            };
                            let name = Family::Attention
                                .steps()
                                .iter()
                                .find(|i| i.step == kern.step)
                                .map_or("?", |i| i.name);
                            let reference = torch
                                .get(&format!("{case} {}", reference_key(elem)))
                                .copied();
                            row(
                                hd,
                                t,
                                mask,
                                pass,
                                &format!("camel {} {name}", kern.step.number()),
                                elem.suffix(),
                                ms,
                                flops,
                                reference,
                            );
                            // step 6's backward again with dq summed in a fixed order
                            if pass == "backward" && kern.step.number() == 6 {
                                let ms = camel_cuda::config::with_deterministic(true, || {
                                    time(d, reps, &mut || {
                                        (kern.backward)(
                                            d, &g, elem, q, k, v, o, dout, lse, dq, dk, dv,
                                        )
                                    })
                                })?;
                                row(
                                    hd,
                                    t,
                                    mask,
                                    pass,
                                    &format!("camel 6 {name} fixed order"),
                                    elem.suffix(),
                                    ms,
                                    flops,
                                    reference,
                                );
                            }
                        }
                    }
                    for (key, label, dtype, reference) in REFERENCES {
                        if let Some(&ms) = torch.get(&format!("{case} {key}")) {
                            let r = torch.get(&format!("{case} {reference}")).copied();
                            row(hd, t, mask, pass, label, dtype, ms, flops, r);
                        }
                    }
                }
            }
            t *= 2;
        }
    }
    Ok(())
}
