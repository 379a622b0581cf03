//! Times every step of the image-filter ladder (`kernels/filter`) on a 2048 × 2048 f32 image
//! with a radius-8 (17 × 17) filter, against the memory roofline measured in the same run and,
//! with `--torch FILE`, against PyTorch's `F.conv2d` (cuDNN) timed by `bench/torch/filter_torch.py`.
//!
//! Rows: the 2-D kernels of steps 1, 2, 5 and 6 (a random 17 × 17 filter; step 6's is step 5's),
//! and the separable passes of steps 3 … 6 (random row and column vectors; both passes, and the
//! intermediate image where the step writes one: step 6 keeps it in shared memory).
//! Method: the image, the intermediate and the output rotate through [`SETS`] copies (more than
//! the 50 MiB L2 holds), so each launch reads DRAM; three untimed launches, then `--reps`
//! batches of launches back to back between two CUDA events (a batch spans about 20 ms, at
//! least 3 launches); the median per launch is reported.
//! Roofline: the time to read and write the image once per pass (16 MiB each way at 2048²) at
//! the copy bandwidth of a `cuMemcpyDtoD` of 2^28 floats timed the same way: one pass for the
//! 2-D kernels and the fused separable step, two for the separable steps with an intermediate
//! image.
//! Each step's output is compared with step 1's (largest absolute difference in the table).
//! A last row times a `cuMemcpyDtoD` of the image the same way as the steps: no kernel that
//! reads the image and writes its output once can take less, so its `× step 1` bounds the
//! ladder's speed-up on this GPU.
//!
//! ```text
//! cargo build --release -p camel-bench --features cuda --bin filter_bench
//! target/release/filter_bench [--reps N] [--size N] [--radius R] [--out FILE] [--torch FILE]
//! ```
//! `--out` writes `<row key>\t<ms>` lines, the format `filter_torch.py --out` writes and
//! `--torch` reads (`filter2d step 5`, `separable step 3`; PyTorch's: `conv2d direct`,
//! `conv2d separable`).

use camel_cuda::kernels::filter as fk;
use camel_cuda::kernels::ladder::Family;
use camel_cuda::{Buffer, CudaDevice, Result};
use std::collections::HashMap;
use std::process::ExitCode;

/// Copies of the image, intermediate and output rotated through: 8 × 48 MiB at 2048².
const SETS: usize = 8;
/// GPU time one timed batch should span.
const BATCH_SPAN_MS: f64 = 20.0;

const USAGE: &str = "\
filter_bench: time every step of camel's image-filter ladder on GPU 0.

usage: filter_bench [options]
  --size N       image side (default 2048)
  --radius R     filter radius 0 … 8 (default 8)
  --reps N       timed batches per row (default 30)
  --out FILE     write '<row>\\t<ms>' lines to FILE
  --torch FILE   PyTorch timings from bench/torch/filter_torch.py --out: print the ratios
  -h, --help     this text";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("filter_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Pseudo-random values in [-1, 1) from a small LCG.
fn rand(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Median milliseconds per call of `f(i)` (`i` the buffer set), over `reps` batches.
fn time(dev: &CudaDevice, reps: usize, f: &mut dyn FnMut(usize) -> Result<()>) -> Result<f64> {
    for i in 0..3 {
        f(i % SETS)?;
    }
    dev.synchronize()?;
    let a = dev.record_event()?;
    f(0)?;
    let b = dev.record_event()?;
    let one = a.elapsed_ms(&b)? as f64;
    let batch = ((BATCH_SPAN_MS / one.max(1e-3)).ceil() as usize).clamp(3, 1000);
    let mut v = Vec::with_capacity(reps);
    for r in 0..reps {
        dev.synchronize()?;
        let a = dev.record_event()?;
        for j in 0..batch {
            f((r + j) % SETS)?;
        }
        let b = dev.record_event()?;
        v.push(a.elapsed_ms(&b)? as f64 / batch as f64);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Ok(v[v.len() / 2])
}

fn run() -> std::result::Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return Ok(());
    }
    let arg = |name: &str| camel_bench::arg(&args, name);
    let num = |name: &str, default: usize| -> std::result::Result<usize, String> {
        arg(name).map_or(Ok(default), |v| {
            v.parse()
                .map_err(|_| format!("{name} {v:?}: not a number\n{USAGE}"))
        })
    };
    let (n, r, reps) = (
        num("--size", 2048)?,
        num("--radius", 8)?,
        num("--reps", 30)?.max(1),
    );
    if r > fk::MAX_RADIUS || n == 0 {
        return Err(format!(
            "--size ≥ 1 and --radius ≤ {}\n{USAGE}",
            fk::MAX_RADIUS
        ));
    }
    let mut torch: HashMap<String, f64> = HashMap::new();
    if let Some(path) = arg("--torch") {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            if let Some((k, v)) = line.split_once('\t') {
                if let Ok(ms) = v.trim().parse::<f64>() {
                    torch.insert(k.to_string(), ms);
                }
            }
        }
    }
    let lines = bench(n, r, reps, &torch).map_err(|e| e.to_string())?;
    if let Some(path) = arg("--out") {
        std::fs::write(&path, lines).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}

/// Runs the rows, prints the table, returns the `--out` lines.
fn bench(n: usize, r: usize, reps: usize, torch: &HashMap<String, f64>) -> Result<String> {
    let dev = camel_cuda::device(0)?;
    let d = &*dev;
    let k = 2 * r + 1;
    let bytes = n * n * 4;

    // copy bandwidth, same run: 2^28 floats read and written
    let big = 1usize << 28;
    let (src, dst) = (d.alloc(big * 4)?, d.alloc(big * 4)?);
    d.memset_zero(&src)?;
    let copy_ms = time(d, reps.min(10), &mut |_| d.dtod(&src, &dst, big * 4))?;
    drop((src, dst));
    let copy_gbs = 2.0 * (big * 4) as f64 / (copy_ms * 1e-3) / 1e9;
    let pass_ms = 2.0 * bytes as f64 / (copy_gbs * 1e9) * 1e3;

    let image = rand(n * n, 1);
    let xs: Vec<Buffer> = (0..SETS).map(|_| d.htod(&image)).collect::<Result<_>>()?;
    let tmps: Vec<Buffer> = (0..SETS).map(|_| d.alloc(bytes)).collect::<Result<_>>()?;
    let ys: Vec<Buffer> = (0..SETS).map(|_| d.alloc(bytes)).collect::<Result<_>>()?;
    let f2 = d.htod(&rand(k * k, 2))?;
    let (row, col) = (rand(k, 3), rand(k, 4));
    let fsep: Vec<f32> = col
        .iter()
        .flat_map(|&c| row.iter().map(move |&v| c * v))
        .collect();
    let fsep = d.htod(&fsep)?;
    let (row, col) = (d.htod(&row)?, d.htod(&col)?);

    println!(
        "device: {}; image {n}×{n} f32, radius {r} ({k}×{k}); copy (cuMemcpyDtoD, 2^28 f32): {copy_gbs:.0} GB/s; \
         roofline {pass_ms:.4} ms a pass (read + write the image once)",
        d.name()
    );
    println!();
    println!("| row | step | ms | × step 1 | roofline ms | × roofline | PyTorch ms | × PyTorch | max abs Δ vs step 1 (separable filter) |");
    println!("|---|---|---|---|---|---|---|---|---|");

    // step 1 on the separable filter: what every step's output is compared with
    let reference = {
        fk::naive(d, xs[0].ptr(), fsep.ptr(), ys[0].ptr(), n, n, r)?;
        d.dtoh_vec::<f32>(&ys[0], n * n)?
    };
    let diff = |got: Vec<f32>| -> f64 {
        got.iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs() as f64)
            .fold(0.0, |m, e| if e.is_nan() { f64::NAN } else { m.max(e) })
    };
    let mut out = String::new();
    let mut naive_ms = None;
    for info in Family::Filter.steps() {
        let kern = fk::at(info.step);
        let s = info.step.number();
        if let Some(f) = kern.filter2d {
            let ms = time(d, reps, &mut |i| {
                f(d, xs[i].ptr(), f2.ptr(), ys[i].ptr(), n, n, r)
            })?;
            f(d, xs[0].ptr(), fsep.ptr(), ys[0].ptr(), n, n, r)?;
            let err = diff(d.dtoh_vec::<f32>(&ys[0], n * n)?);
            let base = *naive_ms.get_or_insert(ms);
            let key = format!("filter2d step {s}");
            row_line(
                &key,
                info.name,
                ms,
                base,
                pass_ms,
                torch.get("conv2d direct"),
                err,
            );
            out += &format!("{key}\t{ms}\n");
        }
        if let Some(f) = kern.separable {
            let mut run = |i: usize| {
                let (x, t, y) = (xs[i].ptr(), tmps[i].ptr(), ys[i].ptr());
                f(d, x, row.ptr(), col.ptr(), t, y, n, n, r)
            };
            let ms = time(d, reps, &mut run)?;
            run(0)?;
            let err = diff(d.dtoh_vec::<f32>(&ys[0], n * n)?);
            let base = naive_ms.unwrap_or(ms);
            let key = format!("separable step {s}");
            let t = torch.get("conv2d separable");
            // passes over the image: two through an intermediate image, one when fused
            let passes = if kern.separable_tmp { 2.0 } else { 1.0 };
            row_line(&key, info.name, ms, base, passes * pass_ms, t, err);
            out += &format!("{key}\t{ms}\n");
        }
    }
    // A copy of the image, timed the same way: the least a filter that reads the image and
    // writes its output once can take, so `× step 1` here bounds every step's.
    let ms = time(d, reps, &mut |i| d.dtod(&xs[i], &ys[i], bytes))?;
    let base = naive_ms.unwrap_or(ms);
    println!(
        "| copy of the image | cuMemcpyDtoD | {ms:.4} | {:.1}× | {pass_ms:.4} | {:.2}× | — | — | — |",
        base / ms,
        ms / pass_ms
    );
    out += &format!("copy of the image\t{ms}\n");
    for (key, passes) in [("conv2d direct", 1.0), ("conv2d separable", 2.0)] {
        if let Some(&ms) = torch.get(key) {
            let base = naive_ms.unwrap_or(ms);
            println!(
                "| PyTorch {key} | — | {ms:.4} | {:.1}× | {:.4} | {:.2}× | {ms:.4} | 1.00× | — |",
                base / ms,
                passes * pass_ms,
                ms / (passes * pass_ms)
            );
        }
    }
    Ok(out)
}

/// Prints one row: `× step 1` is step 1's time over this one (the speed-up), `× roofline` this
/// time over the roofline's, `× PyTorch` PyTorch's time over this one (above 1: camel faster).
fn row_line(
    key: &str,
    name: &str,
    ms: f64,
    naive_ms: f64,
    roof_ms: f64,
    torch: Option<&f64>,
    err: f64,
) {
    let (tms, ratio) = match torch {
        Some(&t) => (format!("{t:.4}"), format!("{:.2}×", t / ms)),
        None => ("—".into(), "—".into()),
    };
    println!(
        "| {key} | {name} | {ms:.4} | {:.1}× | {roof_ms:.4} | {:.2}× | {tms} | {ratio} | {err:.2e} |",
        naive_ms / ms,
        ms / roof_ms
    );
}
