//! GPU benchmark of conv2d: every step of the conv2d ladder against cuDNN through PyTorch
//! (`bench/torch/conv_torch.py`, timed the same way in the same run) at LeNet-5's two
//! convolutions with batch 256 (1→6, 5×5, padding 2 on 28×28; 6→16, 5×5 on 14×14) and at
//! ResNet's 64→64, 3×3, padding 1 on 56×56 with batch 128.
//!
//! Passes: `forward` (with bias), `forward+relu` (bias and ReLU; fused into the epilogue at
//! step 2, a second kernel in PyTorch eager), and `backward` (the input and weight gradients;
//! PyTorch's row is `aten.convolution_backward` for the input, weight and bias gradients, the
//! bias being a small reduction).
//!
//! Timing: launches back to back between one pair of CUDA events, as many as take about 2 ms
//! (3 to 100), the median over `--reps` batches, per launch. Kernels are called through their
//! camel-cuda launchers (no tensor overhead).
//!
//! `conv_bench [--torch torch.txt] [--reps N] [--parts]` — prints a Markdown table; the PyTorch
//! file holds `"<shape> <pass>\t<ms>"` lines (`python3 bench/torch/conv_torch.py > torch.txt`).
//! `--parts` adds the rows `backward dx` and `backward dW`: each gradient alone.

use camel_cuda::kernels::conv2d::{self as conv, Conv2dGeom};
use camel_cuda::{Buffer, CudaDevice, Result};

/// A benchmarked convolution: (name, n, c, h, w, o, k, pad), stride 1, one group.
type Shape = (
    &'static str,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
);

const SHAPES: &[Shape] = &[
    ("lenet1", 256, 1, 28, 28, 6, 5, 2),
    ("lenet2", 256, 6, 14, 14, 16, 5, 0),
    ("resnet64", 128, 64, 56, 56, 64, 3, 1),
];

fn geom(
    &(_, n, c, h, w, o, k, p): &(&str, usize, usize, usize, usize, usize, usize, usize),
) -> Conv2dGeom {
    let out = |i| Conv2dGeom::out_len(i, k, 1, p, 1).expect("the kernel fits");
    Conv2dGeom {
        n,
        c,
        h,
        w,
        o,
        kh: k,
        kw: k,
        sh: 1,
        sw: 1,
        ph: p,
        pw: p,
        dh: 1,
        dw: 1,
        groups: 1,
        oh: out(h),
        ow: out(w),
    }
}

/// The pattern-filled inputs of [`camel_bench::pattern_buffer`].
fn buf(dev: &CudaDevice, n: usize, seed: u32) -> Result<Buffer> {
    camel_bench::pattern_buffer(dev, n, seed)
}

/// Median milliseconds per launch of `f` ([`camel_bench::median_ms`], 3 warm-up calls).
fn time(dev: &CudaDevice, reps: usize, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    camel_bench::median_ms(dev, reps, 3, f)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| camel_bench::arg(&args, name);
    let reps = arg("--reps").map_or(20, |s| s.parse().expect("--reps N"));
    let mut passes = vec!["forward", "forward+relu", "backward"];
    if args.iter().any(|a| a == "--parts") {
        passes.extend(["backward dx", "backward dW"]);
    }
    let torch = camel_bench::torch_timings(&args).expect("reading the PyTorch timings");
    let dev = camel_cuda::device(0)?;
    let d = &*dev;
    println!(
        "device: {}; SGEMM step of step 1: {:?}",
        d.name(),
        camel_cuda::config::sgemm_kernel()
    );
    println!();
    println!("| shape | pass | step | camel ms | TFLOP/s | cuDNN ms | camel speed / cuDNN |");
    println!("|---|---|---|---|---|---|---|");
    for s in SHAPES {
        let g = geom(s);
        let x = buf(d, g.n * g.c * g.h * g.w, 1)?;
        let w = buf(d, g.o * g.kg(), 2)?;
        let bias = buf(d, g.o, 3)?;
        let y = buf(d, g.n * g.o * g.pixels(), 4)?;
        let dx = buf(d, g.n * g.c * g.h * g.w, 5)?;
        let dw = buf(d, g.o * g.kg(), 6)?;
        let flops = 2.0 * (g.n * g.o * g.pixels() * g.kg()) as f64;
        for &pass in &passes {
            for k in &conv::STEPS {
                let ms = match pass {
                    "backward" => time(d, reps, &mut || {
                        (k.backward_input)(d, y.ptr(), w.ptr(), dx.ptr(), &g)?;
                        (k.backward_weight)(d, y.ptr(), x.ptr(), dw.ptr(), &g)
                    })?,
                    "backward dx" => time(d, reps, &mut || {
                        (k.backward_input)(d, y.ptr(), w.ptr(), dx.ptr(), &g)
                    })?,
                    "backward dW" => time(d, reps, &mut || {
                        (k.backward_weight)(d, y.ptr(), x.ptr(), dw.ptr(), &g)
                    })?,
                    _ => {
                        let relu = pass == "forward+relu";
                        time(d, reps, &mut || {
                            (k.forward)(d, x.ptr(), w.ptr(), Some(bias.ptr()), y.ptr(), &g, relu)
                        })?
                    }
                };
                let f = if pass == "backward" {
                    2.0 * flops
                } else {
                    flops
                };
                let key = format!("{} {pass}", s.0);
                let (t, ratio) = match torch.get(&key) {
                    Some(t) => (format!("{t:.3}"), format!("{:.2}×", t / ms)),
                    None => ("–".into(), "–".into()),
                };
                let name = camel_cuda::kernels::ladder::Family::Conv2d
                    .steps()
                    .iter()
                    .find(|i| i.step == k.step)
                    .map_or("?", |i| i.name);
                println!(
                    "| {} | {pass} | {} {name} | {ms:.3} | {:.2} | {t} | {ratio} |",
                    s.0,
                    k.step.number(),
                    f / (ms * 1e-3) / 1e12
                );
            }
        }
    }
    Ok(())
}
