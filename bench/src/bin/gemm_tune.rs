//! The timing half of the SGEMM autotuner: `gemm_tune DIR [--out OUTDIR] [--reps N]`.
//!
//! `DIR` is what `cargo xtask gemm-search` wrote (sm_90 cubins of every candidate tile
//! configuration and `candidates.txt`). On the GPU, every candidate is first checked against
//! step 3 on an odd-sized product (a wrong one is reported and dropped), then timed with CUDA
//! events (one warm-up, median of `--reps` runs) at each tuning shape; at the two largest
//! shapes only the 12 fastest of each family at 4096³ are timed. The winner of each family —
//! block tiling (steps 7–9), warp tiling (10), double buffering (11) — per shape is written to
//! `OUTDIR/tuned_07.cuh`, `tuned_10.cuh`, `tuned_11.cuh` and `matmul_tuned.rs` (copy them to
//! kernels/matmul/ and crates/camel-cuda/src/kernels/), and every timing to `gemm_tune.csv`.

use camel_cuda::kernels::matmul::{
    parse_tile_kernel, sgemm, sgemm_with_tile, Epilogue, Gemm, SgemmKernel, TileShape,
};
use camel_cuda::CudaDevice;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Tuning shapes (m, n, k): the benchmark's squares and model shapes, plus the MLP's backward.
const SHAPES: &[(usize, usize, usize)] = &[
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (64, 256, 784),
    (256, 256, 784),
    (64, 784, 256),
    (256, 784, 64),
    (8192, 512, 128),
    (16384, 1536, 384),
    (16384, 384, 1536),
];

/// Per family: (ms, kernel) at 4096³, fastest first.
type Ranking = BTreeMap<&'static str, Vec<(f64, String)>>;
/// Per family: (shape, winning kernel, GFLOP/s).
type Winners = BTreeMap<&'static str, Vec<((usize, usize, usize), String, f64)>>;

fn family(kernel: &str) -> &'static str {
    if kernel.starts_with("sgemm_bt_") {
        "07"
    } else if kernel.starts_with("sgemm_wt_") {
        "10"
    } else {
        "11"
    }
}

fn gemm(m: usize, n: usize, k: usize) -> Gemm {
    Gemm {
        batch: 1,
        m,
        n,
        k,
        trans_a: false,
        trans_b: false,
        stride_a: 0,
        stride_b: 0,
    }
}

fn fill(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Median milliseconds of `reps` event-timed runs after one warm-up.
fn time(
    dev: &CudaDevice,
    reps: usize,
    mut f: impl FnMut() -> camel_cuda::Result<()>,
) -> camel_cuda::Result<f64> {
    f()?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = dev.record_event()?;
        f()?;
        let b = dev.record_event()?;
        v.push(a.elapsed_ms(&b)? as f64);
    }
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut dir = None;
    let mut out = PathBuf::from(".");
    let mut reps = 5usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => out = PathBuf::from(it.next().ok_or("--out needs a folder")?),
            "--reps" => {
                reps = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--reps needs a number")?
            }
            d if dir.is_none() => dir = Some(PathBuf::from(d)),
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    let dir = dir.ok_or("usage: gemm_tune DIR [--out OUTDIR] [--reps N]")?;
    let list = std::fs::read_to_string(dir.join("candidates.txt")).map_err(|e| {
        format!(
            "{}: {e} (run `cargo xtask gemm-search` first)",
            dir.join("candidates.txt").display()
        )
    })?;
    let dev = camel_cuda::device(0).map_err(|e| e.to_string())?;
    println!("gemm_tune on {}", dev.name());

    // load the cubins; module name = file stem, tile shape from the kernel name
    let mut loaded = BTreeMap::new();
    let mut cands: Vec<TileShape> = Vec::new();
    for line in list.lines().filter(|l| !l.trim().is_empty()) {
        let (file, kernel) = line.split_once(' ').ok_or(format!("bad line `{line}`"))?;
        let module: &'static str =
            Box::leak(format!("search/{}", file.trim_end_matches(".cubin")).into_boxed_str());
        if !loaded.contains_key(file) {
            let image = std::fs::read(dir.join(file)).map_err(|e| format!("{file}: {e}"))?;
            dev.load_module_image(module, &image)
                .map_err(|e| e.to_string())?;
            loaded.insert(file.to_string(), ());
        }
        let kernel: &'static str = Box::leak(kernel.to_string().into_boxed_str());
        cands.push(parse_tile_kernel(module, kernel).ok_or(format!("bad kernel name `{kernel}`"))?);
    }
    println!("{} candidates from {} cubins", cands.len(), loaded.len());

    // correctness screen against step 3 at an odd shape (all layouts' code paths share the loader)
    let g = Gemm {
        trans_a: true,
        trans_b: true,
        ..gemm(197, 133, 75)
    };
    let a = dev.htod(&fill(g.m * g.k, 1)).map_err(|e| e.to_string())?;
    let b = dev.htod(&fill(g.k * g.n, 2)).map_err(|e| e.to_string())?;
    let c = dev.alloc(g.m * g.n * 4).map_err(|e| e.to_string())?;
    sgemm(&dev, SgemmKernel::SmemTiling, &g, a.ptr(), b.ptr(), c.ptr())
        .map_err(|e| e.to_string())?;
    let want: Vec<f32> = dev.dtoh_vec(&c, g.m * g.n).map_err(|e| e.to_string())?;
    let mut good = Vec::new();
    for t in cands {
        let res = sgemm_with_tile(
            &dev,
            &t,
            &g,
            a.ptr(),
            b.ptr(),
            c.ptr(),
            &Epilogue::default(),
        )
        .and_then(|_| dev.dtoh_vec::<f32>(&c, g.m * g.n));
        match res {
            Ok(got) => {
                let err = got
                    .iter()
                    .zip(&want)
                    .map(|(x, y)| (x - y).abs())
                    .fold(0.0f32, f32::max);
                if err <= 1e-4 {
                    good.push(t);
                } else {
                    println!("  dropped {}: max error {err}", t.kernel);
                }
            }
            Err(e) => println!("  dropped {}: {e}", t.kernel),
        }
    }
    println!("{} candidates pass the correctness screen", good.len());

    let biggest = SHAPES.iter().map(|s| s.0 * s.1 * s.2).max().unwrap_or(0);
    let (mut csv, mut rank4096): (String, Ranking) = (
        "m,n,k,kernel,family,ms,gflops\n".to_string(),
        BTreeMap::new(),
    );
    let mut winners: Winners = BTreeMap::new();
    let mut order: Vec<(usize, usize, usize)> = SHAPES.to_vec();
    order.sort_by_key(|s| (s.0 * s.1 * s.2 > 4096 * 4096 * 4096, 0)); // 8192³ after 4096³
    for &(m, n, k) in &order {
        let g = gemm(m, n, k);
        let a = dev.htod(&fill(m * k, 3)).map_err(|e| e.to_string())?;
        let b = dev.htod(&fill(k * n, 4)).map_err(|e| e.to_string())?;
        let c = dev.alloc(m * n * 4).map_err(|e| e.to_string())?;
        let flops = 2.0 * (m * n * k) as f64;
        let large =
            m * n * k > 4096 * 4096 * 4096 || (m * n * k == biggest && biggest > 4096usize.pow(3));
        let reps = if large { 3 } else { reps };
        let mut best: BTreeMap<&str, (f64, String)> = BTreeMap::new();
        for t in &good {
            let fam = family(t.kernel);
            if large {
                let top = rank4096
                    .get(fam)
                    .map(|v| v.iter().take(12).any(|(_, n)| *n == t.kernel));
                if top != Some(true) {
                    continue;
                }
            }
            let ms = time(&dev, reps, || {
                sgemm_with_tile(&dev, t, &g, a.ptr(), b.ptr(), c.ptr(), &Epilogue::default())
            })
            .map_err(|e| format!("{} at {m}x{n}x{k}: {e}", t.kernel))?;
            let gf = flops / ms / 1e6;
            writeln!(csv, "{m},{n},{k},{},{fam},{ms:.5},{gf:.1}", t.kernel).unwrap();
            if (m, n, k) == (4096, 4096, 4096) {
                rank4096
                    .entry(fam)
                    .or_default()
                    .push((ms, t.kernel.to_string()));
            }
            let e = best.entry(fam).or_insert((f64::INFINITY, String::new()));
            if ms < e.0 {
                *e = (ms, t.kernel.to_string());
            }
        }
        for v in rank4096.values_mut() {
            v.sort_by(|x, y| x.0.total_cmp(&y.0));
        }
        for (fam, (ms, kernel)) in best {
            println!(
                "{m:>6}x{n:>5}x{k:>5}  step {fam}: {kernel:<40} {ms:>9.4} ms {:>9.1} GFLOP/s",
                flops / ms / 1e6
            );
            winners
                .entry(fam)
                .or_default()
                .push(((m, n, k), kernel, flops / ms / 1e6));
        }
    }

    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    std::fs::write(out.join("gemm_tune.csv"), csv).map_err(|e| e.to_string())?;
    let mut rs = String::from(
        "//! Autotuned SGEMM tile shapes: for each tuned shape (m, n, k), the winning kernel of steps\n\
         //! 7–9, 10 and 11. Generated by `gemm_tune` (see `kernels/matmul/07_autotuned.cu`); the\n\
         //! launcher uses the entry whose shape is nearest (in log space) to the problem's.\n",
    );
    writeln!(rs, "//! Tuned on: {}.", dev.name()).unwrap();
    for (fam, label, macro_, prefix) in [
        ("07", "Steps 7–9 (block tiling).", "BT", "sgemm_bt_"),
        ("10", "Step 10 (warp tiling).", "WT", "sgemm_wt_"),
        (
            "11",
            "Step 11 (warp tiling, double buffered).",
            "DB",
            "sgemm_db_",
        ),
    ] {
        let Some(list) = winners.get(fam) else {
            return Err(format!("no candidate of step {fam} passed"));
        };
        writeln!(
            rs,
            "\n/// {label}\npub const TUNED_{fam}: &[(usize, usize, usize, &str)] = &["
        )
        .unwrap();
        let mut header = format!(
            "// Generated by gemm_tune on {} (see 07_autotuned.cu): the winners per tuned shape.\n",
            dev.name()
        );
        let mut seen = Vec::new();
        for ((m, n, k), kernel, gf) in list {
            writeln!(rs, "    ({m}, {n}, {k}, \"{kernel}\"), // {gf:.0} GFLOP/s").unwrap();
            if !seen.contains(kernel) {
                seen.push(kernel.clone());
                let nums = kernel
                    .strip_prefix(prefix)
                    .unwrap_or(kernel)
                    .replace(['x', '_'], ", ");
                writeln!(header, "{macro_}({nums})").unwrap();
            }
        }
        rs += "];\n";
        std::fs::write(out.join(format!("tuned_{fam}.cuh")), header).map_err(|e| e.to_string())?;
    }
    std::fs::write(out.join("matmul_tuned.rs"), rs).map_err(|e| e.to_string())?;
    println!("wrote {}", out.display());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gemm_tune: {e}");
            ExitCode::FAILURE
        }
    }
}
