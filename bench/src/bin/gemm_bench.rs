//! Times every step of the SGEMM ladder (and the opt-in TF32 step) at square sizes and at the
//! GEMM shapes of the models, and writes `impl,step,m,k,n,ms,gflops` CSV for
//! `cargo xtask gemm-report` (the cuBLAS side comes from `bench/torch/gemm_torch.py`). With
//! `--dtype f16|bf16` it times the tensor-core ladder (steps 14–16) on 16-bit operands instead,
//! its CSV rows named `<step name>_<dtype>` (`gemm_torch.py --dtype` gives the cuBLAS rows).
//!
//! Method: C(m×n) = A(m×k)·B(k×n), row-major, inputs uniform in [−1, 1]. Per (kernel, shape):
//! one untimed launch (loads the module), `--warmup` launches timed together to estimate the
//! run time, then as many timed runs as fit the time budget (`--budget-ms`, at least 3, at most
//! `--reps`), each between two CUDA events, enqueued back to back with the L2 cache flushed
//! (a 256 MiB memset) before each; the median is reported. A sample of C is checked against an
//! f64 CPU reference; a kernel that computes wrong results is reported and left out of the CSV.
//!
//! ```text
//! cargo build --release -p camel-bench --features cuda --bin gemm_bench
//! target/release/gemm_bench --shapes all --out gemm_camel.csv
//! ```
//!
//! The CSV's first line is a `# device: <GPU name>` comment (read by `gemm-report`).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::sync::Arc;

use camel_cuda::kernels::hgemm::{hgemm, HgemmKernel};
use camel_cuda::kernels::matmul::{sgemm, Epilogue, Gemm, SgemmKernel};
use camel_cuda::kernels::shape::Elem;
use camel_cuda::{Buffer, CudaDevice};

const USAGE: &str = "\
gemm_bench: time camel's SGEMM ladder steps on GPU 0.

usage: gemm_bench [options]
  --shapes square|model|all   square: 1024, 2048, 4096, 8192; model: the models' M×K×N shapes
                              (default all)
  --dtype f32|f16|bf16        operand type (default f32: the SGEMM ladder; f16, bf16: the
                              tensor-core ladder, steps 14-16)
  --kernels NAME,NAME         steps to time, by name (default: every step of the dtype's
                              ladder, + tf32 tf32_wgmma for f32); names: naive coalesced smem
                              blocktile1d blocktile2d vectorized autotuned warptiling doublebuffer
                              async tf32 tf32_wgmma
                              (f32); mma swizzle mma_async (f16, bf16)
  --reps N                    most timed runs per (kernel, shape) (default 50; at least 3 run)
  --budget-ms MS              time budget per (kernel, shape) for the timed runs (default 500)
  --warmup N                  warm-up launches after the first one (default 3)
  --all                       also time the slow steps 1-3 at 8192^3 (skipped by default)
  --no-flush                  do not flush the L2 cache before each timed run
  --no-check                  do not check a sample of C against a CPU reference
  --out FILE                  write CSV (impl,step,m,k,n,ms,gflops) to FILE
experiment switches (camel_cuda::config::Experiments; the library runs the defaults):
  --pdl on|off                programmatic dependent launch where the GPU has it (default on)
  --splitk MIN_K,BLOCKS       split-K policy: shortest K per split, blocks per SM (default 32,2)
  --splitk-fused on|off       split-K sums its partials in the GEMM kernel (default on)
  --hgemm-split-below N       the tensor-core GEMM splits K for grids of at most SMs / N tiles (default 4)
  --hgemm-width W             the tensor-core GEMM's tile width where the step has it (default by shape)
  --hgemm-blocks N            step 17's persistent kernel with N blocks, 0: never (default by shape)
  --async-small off|KERNEL    step 13's small-tile kernel: never, or forced (default by shape)
  --async-tn TILE             step 13's TN interior kernel by tile, e.g. 128x256x32
  --async-nn on|off           step 13's NN interior kernels (default on)
  --async-wholek on|off       step 13's whole-K kernels (default on)
  --async-relayout on|off     step 13's re-layout before its TN kernel (default on)
  --async-thin on|off         step 13's routes for a model's thin products (default on)
  -h, --help                  this text";

/// Square sizes (M = K = N).
const SQUARE: [usize; 4] = [1024, 2048, 4096, 8192];
/// GEMM shapes of the models, as (M, K, N): MLP layers at batch 64 and 256, the CNN's and the
/// GPT's projections.
const MODEL: [(usize, usize, usize); 5] = [
    (64, 784, 256),
    (256, 784, 256),
    (8192, 128, 512),
    (16384, 384, 1536),
    (16384, 1536, 384),
];
/// Bytes written before each timed run to evict A, B and C from L2 (50 MiB on H100).
const FLUSH_BYTES: usize = 256 << 20;

/// One timed kernel: an SGEMM step, or a tensor-core step on 16-bit operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    S(SgemmKernel),
    H(HgemmKernel, Elem),
}

impl Kernel {
    /// The CSV's `impl` column.
    fn name(&self) -> String {
        match self {
            Kernel::S(k) => k.name().to_string(),
            Kernel::H(k, e) => format!("{}_{}", k.name(), elem_name(*e)),
        }
    }
    fn step(&self) -> &'static str {
        match self {
            Kernel::S(k) => k.step(),
            Kernel::H(k, _) => k.step(),
        }
    }
    fn launch(
        &self,
        dev: &CudaDevice,
        g: &Gemm,
        a: &Buffer,
        b: &Buffer,
        c: &Buffer,
    ) -> camel_cuda::Result<()> {
        match *self {
            Kernel::S(k) => sgemm(dev, k, g, a.ptr(), b.ptr(), c.ptr()),
            Kernel::H(k, e) => hgemm(
                dev,
                k,
                e,
                g,
                a.ptr(),
                b.ptr(),
                c.ptr(),
                &Epilogue::default(),
            ),
        }
    }
}

fn elem_name(e: Elem) -> &'static str {
    match e {
        Elem::F16 => "f16",
        Elem::BF16 => "bf16",
        _ => "f32",
    }
}

struct Opts {
    shapes: Vec<(usize, usize, usize)>,
    kernels: Vec<Kernel>,
    reps: usize,
    budget_ms: f64,
    warmup: usize,
    all: bool,
    flush: bool,
    check: bool,
    out: Option<String>,
}

fn parse_args(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        shapes: Vec::new(),
        kernels: Vec::new(),
        reps: 50,
        budget_ms: 500.0,
        warmup: 3,
        all: false,
        flush: true,
        check: true,
        out: None,
    };
    let mut shapes = "all".to_string();
    let mut dtype = Elem::F32;
    let mut names: Option<String> = None;
    let mut x = camel_cuda::config::Experiments::default();
    let flag = |name: &'static str, v: String| {
        camel_cuda::config::parse_flag(name, &v).map_err(|e| e.to_string())
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs a value ({what})"))
        };
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--shapes" => shapes = value("square, model or all")?,
            "--kernels" => names = Some(value("comma-separated step names")?),
            "--dtype" => {
                dtype = match value("f32, f16 or bf16")?.as_str() {
                    "f32" => Elem::F32,
                    "f16" => Elem::F16,
                    "bf16" => Elem::BF16,
                    other => return Err(format!("--dtype: `{other}` is not f32, f16 or bf16")),
                }
            }
            "--reps" => {
                o.reps = value("a number")?
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n > 0)
                    .ok_or("--reps needs a positive number")?
            }
            "--budget-ms" => {
                o.budget_ms = value("milliseconds")?
                    .parse()
                    .ok()
                    .filter(|&t: &f64| t >= 0.0)
                    .ok_or("--budget-ms needs a non-negative number")?
            }
            "--warmup" => {
                o.warmup = value("a number")?
                    .parse()
                    .map_err(|_| "--warmup needs a number")?
            }
            "--all" => o.all = true,
            "--no-flush" => o.flush = false,
            "--no-check" => o.check = false,
            "--out" => o.out = Some(value("a file name")?),
            "--pdl" => x.pdl = flag("--pdl", value("on or off")?)?,
            "--splitk-fused" => x.splitk_fused = flag("--splitk-fused", value("on or off")?)?,
            "--async-nn" => x.async_nn = flag("--async-nn", value("on or off")?)?,
            "--async-wholek" => x.async_whole_k = flag("--async-wholek", value("on or off")?)?,
            "--async-relayout" => x.async_relayout = flag("--async-relayout", value("on or off")?)?,
            "--async-thin" => x.async_thin = flag("--async-thin", value("on or off")?)?,
            "--async-tn" => x.async_tn = Some(value("a tile, e.g. 128x256x32")?),
            "--async-small" => {
                let v = value("off or a kernel name")?;
                x.async_small = Some((v != "off").then_some(v));
            }
            "--splitk" => {
                let v = value("MIN_K,BLOCKS")?;
                x.splitk = v
                    .split_once(',')
                    .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
                    .filter(|&(a, b): &(usize, usize)| a >= 32 && b >= 1)
                    .ok_or("--splitk needs MIN_K,BLOCKS with MIN_K >= 32 and BLOCKS >= 1")?;
            }
            "--hgemm-width" => {
                x.hgemm_width = Some(
                    value("64, 128 or 256")?
                        .parse()
                        .map_err(|_| "--hgemm-width needs a tile width")?,
                );
            }
            "--hgemm-blocks" => {
                x.hgemm_blocks = Some(
                    value("a block count")?
                        .parse()
                        .map_err(|_| "--hgemm-blocks needs a block count")?,
                );
            }
            "--hgemm-split-below" => {
                x.hgemm_split_below = value("a count")?
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n >= 1)
                    .ok_or("--hgemm-split-below needs a count >= 1")?;
            }
            other => return Err(format!("unknown argument `{other}` (see --help)")),
        }
    }
    o.kernels = match (&names, dtype) {
        (None, Elem::F32) => SgemmKernel::ALL
            .iter()
            .chain(&SgemmKernel::TF32)
            .map(|&k| Kernel::S(k))
            .collect(),
        (None, e) => HgemmKernel::ALL.iter().map(|&k| Kernel::H(k, e)).collect(),
        (Some(v), e) => v
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| {
                let s = s.trim();
                let k = if e == Elem::F32 {
                    SgemmKernel::from_name(s).map(Kernel::S)
                } else {
                    HgemmKernel::from_name(s).map(|k| Kernel::H(k, e))
                };
                k.ok_or_else(|| format!("unknown {} kernel `{s}` (see --help)", elem_name(e)))
            })
            .collect::<Result<_, _>>()?,
    };
    if o.kernels.is_empty() {
        return Err("--kernels names no kernel".into());
    }
    let square = SQUARE.iter().map(|&s| (s, s, s));
    o.shapes = match shapes.as_str() {
        "square" => square.collect(),
        "model" => MODEL.to_vec(),
        "all" => square.chain(MODEL).collect(),
        other => return Err(format!("--shapes: `{other}` is not square, model or all")),
    };
    camel_cuda::config::set_experiments(x);
    Ok(Some(o))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse_args(&args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("gemm_bench: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gemm_bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One measured (kernel, shape).
struct Row {
    kernel: Kernel,
    shape: (usize, usize, usize),
    ms: f64,
    gflops: f64,
}

fn run(o: &Opts) -> Result<(), String> {
    let dev = camel_cuda::device(0).map_err(|e| {
        format!("{e}\n(gemm_bench needs an NVIDIA GPU with its driver; nothing was measured)")
    })?;
    let (major, minor) = dev.compute_capability();
    let name = dev.name();
    println!(
        "device: {name} (sm_{major}{minor}, {:.1} GiB)",
        dev.total_memory() as f64 / (1u64 << 30) as f64
    );
    let mut csv = match &o.out {
        Some(path) => {
            let f = File::create(path).map_err(|e| format!("creating {path}: {e}"))?;
            let mut w = BufWriter::new(f);
            writeln!(w, "# device: {name}\nimpl,step,m,k,n,ms,gflops")
                .and_then(|_| w.flush())
                .map_err(|e| format!("writing {path}: {e}"))?;
            Some(w)
        }
        None => None,
    };
    let flush = if o.flush {
        Some(
            dev.alloc(FLUSH_BYTES)
                .map_err(|e| format!("allocating the L2 flush buffer: {e}"))?,
        )
    } else {
        None
    };

    println!(
        "{:<13} {:>4} {:>6} {:>6} {:>6} {:>10} {:>10} {:>5}",
        "impl", "step", "m", "k", "n", "ms", "GFLOP/s", "runs"
    );
    let mut rows = Vec::new();
    let mut unavailable: Vec<Kernel> = Vec::new();
    let half = match o.kernels[0] {
        Kernel::H(_, e) => Some(e),
        Kernel::S(_) => None,
    };
    for &(m, k, n) in &o.shapes {
        // 16-bit runs: the inputs rounded to the dtype, so the reference sees what the GPU sees
        let (a, b) = match half {
            Some(e) => (
                round16(e, &uniform(1, m * k)),
                round16(e, &uniform(2, k * n)),
            ),
            None => (uniform(1, m * k), uniform(2, k * n)),
        };
        let alloc = |what: &str, r: camel_cuda::Result<Buffer>| {
            r.map_err(|e| format!("{what} for {m}x{k}x{n}: {e}"))
        };
        let (da, db) = match half {
            Some(e) => (
                alloc("uploading A", dev.htod(&bits16(e, &a)))?,
                alloc("uploading B", dev.htod(&bits16(e, &b)))?,
            ),
            None => (
                alloc("uploading A", dev.htod(&a))?,
                alloc("uploading B", dev.htod(&b))?,
            ),
        };
        let elem_bytes = if half.is_some() { 2 } else { 4 };
        let dc = alloc("allocating C", dev.alloc(m * n * elem_bytes))?;
        let samples = if o.check {
            reference_samples(&a, &b, m, k, n)
        } else {
            Vec::new()
        };
        let g = Gemm {
            batch: 1,
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            stride_a: 0,
            stride_b: 0,
        };
        for &kernel in &o.kernels {
            if unavailable.contains(&kernel) {
                continue;
            }
            let slow_step = matches!(
                kernel,
                Kernel::S(SgemmKernel::Naive | SgemmKernel::Coalesced | SgemmKernel::SmemTiling)
            );
            if slow_step && m * n * k >= 8192 * 8192 * 8192 && !o.all {
                eprintln!(
                    "note: skipping {} at {m}x{k}x{n} (slow; --all times it)",
                    kernel.name()
                );
                continue;
            }
            let bufs = (&da, &db, &dc);
            match time_kernel(&dev, o, kernel, &g, bufs, flush.as_ref(), &samples) {
                Ok(Timed::Done { ms, runs }) => {
                    let gflops = 2.0 * (m * n * k) as f64 / (ms * 1e6);
                    println!(
                        "{:<13} {:>4} {:>6} {:>6} {:>6} {:>10.4} {:>10.1} {:>5}",
                        kernel.name(),
                        kernel.step(),
                        m,
                        k,
                        n,
                        ms,
                        gflops,
                        runs
                    );
                    if let (Some(w), Some(path)) = (csv.as_mut(), o.out.as_ref()) {
                        writeln!(
                            w,
                            "{},{},{m},{k},{n},{ms:.6},{gflops:.3}",
                            kernel.name(),
                            kernel.step()
                        )
                        .and_then(|_| w.flush())
                        .map_err(|e| format!("writing {path}: {e}"))?;
                    }
                    rows.push(Row {
                        kernel,
                        shape: (m, k, n),
                        ms,
                        gflops,
                    });
                }
                Ok(Timed::Wrong(msg)) => {
                    eprintln!(
                        "WRONG RESULT: {} at {m}x{k}x{n}: {msg} (left out of the CSV)",
                        kernel.name()
                    );
                }
                Err(e) if matches!(kernel, Kernel::S(k) if k.is_tf32()) => {
                    eprintln!("note: skipping the TF32 step, its launch failed: {e}");
                    unavailable.push(kernel);
                    // a failed launch may leave an error on the stream: surface it now
                    dev.synchronize()
                        .map_err(|e| format!("device unusable after the TF32 launch: {e}"))?;
                }
                Err(e) => {
                    eprintln!(
                        "error: {} at {m}x{k}x{n}: {e} (skipping this step)",
                        kernel.name()
                    );
                    unavailable.push(kernel);
                    dev.synchronize()
                        .map_err(|e| format!("device unusable after that error: {e}"))?;
                }
            }
        }
    }
    print_summary(o, &rows);
    if let Some(path) = &o.out {
        println!("wrote {} rows to {path}", rows.len());
    }
    Ok(())
}

enum Timed {
    Done { ms: f64, runs: usize },
    Wrong(String),
}

/// Warm-up, check, then the timed runs; the median in milliseconds.
fn time_kernel(
    dev: &Arc<CudaDevice>,
    o: &Opts,
    kernel: Kernel,
    g: &Gemm,
    (a, b, c): (&Buffer, &Buffer, &Buffer),
    flush: Option<&Buffer>,
    samples: &[Sample],
) -> camel_cuda::Result<Timed> {
    let launch = || kernel.launch(dev, g, a, b, c);
    // first launch: loads (JIT-compiles) the module; C zeroed so a stale result cannot pass
    dev.memset_zero(c)?;
    launch()?;
    dev.synchronize()?;
    if !samples.is_empty() {
        let got: Vec<f32> = match kernel {
            Kernel::H(_, e) => widen16(e, &dev.dtoh_vec::<u16>(c, g.m * g.n)?),
            Kernel::S(_) => dev.dtoh_vec(c, g.m * g.n)?,
        };
        if let Some(msg) = check(kernel, g, &got, samples) {
            return Ok(Timed::Wrong(msg));
        }
    }
    // warm-up, timed as one to size the run count
    let est_ms = if o.warmup > 0 {
        let start = dev.record_event()?;
        for _ in 0..o.warmup {
            launch()?;
        }
        let end = dev.record_event()?;
        start.elapsed_ms(&end)? as f64 / o.warmup as f64
    } else {
        0.0
    };
    let runs = if est_ms > 0.0 {
        ((o.budget_ms / est_ms) as usize).clamp(3, o.reps.max(3))
    } else {
        o.reps.max(3)
    };
    // enqueue every run, then read the events: the CPU stays ahead of the GPU, so no launch
    // latency lands between a run's two events
    let mut events = Vec::with_capacity(runs);
    for _ in 0..runs {
        if let Some(f) = flush {
            dev.memset_zero(f)?;
        }
        let start = dev.record_event()?;
        launch()?;
        let end = dev.record_event()?;
        events.push((start, end));
    }
    let mut times = events
        .iter()
        .map(|(s, e)| s.elapsed_ms(e).map(f64::from))
        .collect::<camel_cuda::Result<Vec<f64>>>()?;
    Ok(Timed::Done {
        ms: median(&mut times),
        runs,
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// `x` rounded to f16 or bf16 (as f32 values).
fn round16(e: Elem, x: &[f32]) -> Vec<f32> {
    widen16(e, &bits16(e, x))
}

/// The 16-bit patterns of `x` rounded to `e`.
fn bits16(e: Elem, x: &[f32]) -> Vec<u16> {
    x.iter()
        .map(|&v| match e {
            Elem::F16 => half::f16::from_f32(v).to_bits(),
            _ => half::bf16::from_f32(v).to_bits(),
        })
        .collect()
}

/// f16 or bf16 patterns widened to f32.
fn widen16(e: Elem, x: &[u16]) -> Vec<f32> {
    x.iter()
        .map(|&b| match e {
            Elem::F16 => half::f16::from_bits(b).to_f32(),
            _ => half::bf16::from_bits(b).to_f32(),
        })
        .collect()
}

/// Uniform values in [−1, 1) from a 64-bit LCG (deterministic, fast for 64 M elements).
fn uniform(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// One checked element of C: row, column, f64 value and Σ|a·b|.
struct Sample {
    i: usize,
    j: usize,
    value: f64,
    abs: f64,
}

/// The four corners and 60 pseudo-random elements of C, computed in f64.
fn reference_samples(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<Sample> {
    let mut pos = vec![(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)];
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..60 {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        pos.push(((s >> 33) as usize % m, (s >> 11) as usize % n));
    }
    pos.into_iter()
        .map(|(i, j)| {
            let (mut value, mut abs) = (0.0f64, 0.0f64);
            for p in 0..k {
                let x = a[i * k + p] as f64 * b[p * n + j] as f64;
                value += x;
                abs += x.abs();
            }
            Sample { i, j, value, abs }
        })
        .collect()
}

/// `None` when every sample is within bound (4× the bound of the GPU tests in
/// `tests/sgemm.rs`: this is a sanity check, not the correctness test), else the first miss.
fn check(kernel: Kernel, g: &Gemm, c: &[f32], samples: &[Sample]) -> Option<String> {
    let fp32 = 4e-5 * (g.k as f64).sqrt().max(1.0);
    for s in samples {
        let tol = match kernel {
            // step 18's inputs may be truncated to TF32 (twice step 12's rounding error)
            Kernel::S(k) if k.is_tf32() => {
                4.0 * (2f64.powi(-9) + g.k as f64 * 2f64.powi(-24)) * s.abs + fp32
            }
            Kernel::S(_) => fp32,
            // one rounding of the output (tests/hgemm.rs states the bound)
            Kernel::H(_, e) => {
                let u = if e == Elem::F16 {
                    2f64.powi(-11)
                } else {
                    2f64.powi(-8)
                };
                4.0 * (u * s.value.abs() + g.k as f64 * 2f64.powi(-23) * s.abs) + 1e-6
            }
        };
        let got = c[s.i * g.n + s.j] as f64;
        if got.is_nan() || (got - s.value).abs() > tol {
            return Some(format!(
                "C[{}][{}] = {got}, reference {} (tolerance {tol:.2e})",
                s.i, s.j, s.value
            ));
        }
    }
    None
}

/// GFLOP/s as a matrix: one line per shape, one column per kernel.
fn print_summary(o: &Opts, rows: &[Row]) {
    let kernels: Vec<Kernel> = o
        .kernels
        .iter()
        .copied()
        .filter(|k| rows.iter().any(|r| r.kernel == *k))
        .collect();
    if kernels.is_empty() {
        println!("nothing measured");
        return;
    }
    let mut out = String::from("\nGFLOP/s (median)\n");
    let _ = write!(out, "{:<18}", "M x K x N");
    for k in &kernels {
        let _ = write!(out, " {:>15}", format!("{} {}", k.step(), k.name()));
    }
    out.push('\n');
    for &(m, k, n) in &o.shapes {
        let _ = write!(out, "{:<18}", format!("{m}x{k}x{n}"));
        for kern in &kernels {
            match rows
                .iter()
                .find(|r| r.kernel == *kern && r.shape == (m, k, n))
            {
                Some(r) => {
                    let _ = write!(out, " {:>15.1}", r.gflops);
                }
                None => {
                    let _ = write!(out, " {:>15}", "-");
                }
            }
        }
        out.push('\n');
    }
    let best = rows.iter().max_by(|x, y| x.gflops.total_cmp(&y.gflops));
    if let Some(r) = best {
        let (m, k, n) = r.shape;
        let _ = writeln!(
            out,
            "best: {} at {m}x{k}x{n}: {:.1} GFLOP/s ({:.4} ms)",
            r.kernel.name(),
            r.gflops,
            r.ms
        );
    }
    print!("{out}");
}
