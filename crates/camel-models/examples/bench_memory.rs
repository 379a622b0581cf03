//! GPU benchmark of the memory-bound kernel ladders (issue 4): every step of every family at the
//! issue's sizes, timed with CUDA events (3 warm-up launches, median of 20), reported as GB/s of
//! the bytes the op must move (inputs read once, outputs written once), the ratio to the
//! device's copy bandwidth measured in the same run (`cuMemcpyDtoD` of 2^28 floats), the ratio
//! to a copy of the *same number of bytes* (a `cuMemcpyDtoD` of half the op's bytes: read +
//! write), and the ratio to PyTorch when a file of PyTorch timings (`bench/memory_torch.py`) is
//! given. The size-matched copy is the honest roofline for small problems: 17 MB cannot stream
//! at the rate of a 2 GB copy (launch, ramp-up and tail weigh), whatever the kernel does.
//!
//! `bench_memory [--torch torch.txt] [--reps N]` — prints a Markdown table.
//! Kernels are called through their camel-cuda launchers (no tensor overhead).

use camel_cuda::kernels::{
    elementwise as ew, embedding as emb, layernorm as ln, loss, optim, reduce, softmax,
};
use camel_cuda::{Buffer, CudaDevice, DevPtr, Result};
use std::collections::HashMap;
use std::sync::Arc;

struct Bench {
    dev: Arc<CudaDevice>,
    reps: usize,
    copy_gbs: f64,
    /// Source and destination of the size-matched copies (large enough for the largest op).
    copy_src: Buffer,
    copy_dst: Buffer,
    /// Size-matched copy GB/s by the op's byte count (each size timed once).
    same_copy: HashMap<u64, f64>,
    torch: HashMap<String, f64>,
    rows: Vec<String>,
}

impl Bench {
    /// Median milliseconds of `f` over `reps` timed launches after 3 warm-ups.
    fn time(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        for _ in 0..3 {
            f()?;
        }
        let mut ms = Vec::with_capacity(self.reps);
        for _ in 0..self.reps {
            let a = self.dev.record_event()?;
            f()?;
            let b = self.dev.record_event()?;
            ms.push(a.elapsed_ms(&b)? as f64);
        }
        ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
        Ok(ms[ms.len() / 2])
    }

    /// GB/s of a device copy moving `bytes` in all (`bytes / 2` read, `bytes / 2` written),
    /// timed like the ops; cached per byte count.
    fn same_size_copy_gbs(&mut self, bytes: f64) -> Result<f64> {
        let key = bytes as u64;
        if let Some(&g) = self.same_copy.get(&key) {
            return Ok(g);
        }
        // half the bytes, in whole floats, at most the copy buffers' size
        let half = ((key / 2) as usize / 4 * 4).clamp(4, self.copy_src.bytes());
        let (src, dst) = (&self.copy_src, &self.copy_dst);
        let dev = self.dev.clone();
        let ms = self.time(&mut || dev.dtod(src, dst, half))?;
        let gbs = 2.0 * half as f64 / (ms * 1e-3) / 1e9;
        self.same_copy.insert(key, gbs);
        Ok(gbs)
    }

    /// Time one ladder step of `op` at `size`, moving `bytes`.
    fn row(
        &mut self,
        op: &str,
        size: &str,
        step: u32,
        bytes: f64,
        f: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let ms = self.time(f)?;
        let gbs = bytes / (ms * 1e-3) / 1e9;
        let same_gbs = self.same_size_copy_gbs(bytes)?;
        let key = format!("{op} {size}");
        let (torch_gbs, ratio) = match self.torch.get(&key) {
            Some(&tms) => {
                let t = bytes / (tms * 1e-3) / 1e9;
                (format!("{t:.0}"), format!("{:.2}×", tms / ms))
            }
            None => ("—".into(), "—".into()),
        };
        let step = match step {
            0 => "—".to_string(),
            s => s.to_string(),
        };
        let line = format!(
            "| {op} | {size} | {step} | {:.1} | {gbs:.0} | {:.0} % | {:.0} % | {torch_gbs} | {ratio} |",
            ms * 1e3,
            100.0 * gbs / self.copy_gbs,
            100.0 * gbs / same_gbs
        );
        println!("{line}");
        self.rows.push(line);
        Ok(())
    }
}

fn buf(dev: &CudaDevice, n: usize, v: f32) -> Result<Buffer> {
    let b = dev.alloc(n * 4)?;
    ew::fill_f32(dev, b.ptr(), n, v)?;
    Ok(b)
}

/// Pseudo-random values in [-2, 2) from a tiny LCG (no host RNG needed at these sizes).
fn rand_buf(dev: &CudaDevice, n: usize, seed: u64) -> Result<Buffer> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect();
    dev.htod(&v)
}

fn idx_buf(dev: &CudaDevice, n: usize, hi: usize, seed: u64) -> Result<Buffer> {
    let mut s = seed.wrapping_add(12345);
    let v: Vec<i64> = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % hi as u64) as i64
        })
        .collect();
    dev.htod(&v)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("bench_memory: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let reps = arg("--reps").map_or(20, |s| s.parse().expect("--reps N"));
    let mut torch = HashMap::new();
    let mut torch_copy = None;
    if let Some(path) = arg("--torch") {
        let text = std::fs::read_to_string(&path).expect("reading the PyTorch timings");
        for line in text.lines() {
            // "<op> <size>\t<ms>"
            if let Some((k, v)) = line.split_once('\t') {
                if let Ok(ms) = v.trim().parse::<f64>() {
                    if k == "copy 2^28" {
                        torch_copy = Some(ms);
                    }
                    torch.insert(k.to_string(), ms);
                }
            }
        }
    }
    let dev = camel_cuda::device(0)?;
    // The largest op moves 12 B × 2^28 (add, mul, GELU backward): its size-matched copy moves
    // half of that each way, 1.5 GiB.
    let copy_bytes = 6usize << 28;
    let mut b = Bench {
        dev: dev.clone(),
        reps,
        copy_gbs: 1.0,
        copy_src: dev.alloc(copy_bytes)?,
        copy_dst: dev.alloc(copy_bytes)?,
        same_copy: HashMap::new(),
        torch,
        rows: Vec::new(),
    };
    let d = &*dev;

    // ---- copy bandwidth, same run
    let n: usize = 1 << 28;
    let x = buf(d, n, 0.5)?;
    let y = buf(d, n, 0.25)?;
    let copy_ms = b.time(&mut || d.dtod(&x, &y, n * 4))?;
    b.copy_gbs = 8.0 * n as f64 / (copy_ms * 1e-3) / 1e9;
    println!(
        "device: {} ({} SMs); copy (cuMemcpyDtoD, 2^28 f32, read + write): {:.0} GB/s",
        d.name(),
        d.limits().sm_count,
        b.copy_gbs
    );
    if let Some(t) = torch_copy {
        println!(
            "PyTorch copy_ (same sizes, same GPU): {:.0} GB/s",
            8.0 * n as f64 / (t * 1e-3) / 1e9
        );
    }
    println!("timing: CUDA events, 3 warm-up launches, median of {reps}; GB/s = bytes the op must move / time");
    println!("\"of same-size copy\": GB/s over a cuMemcpyDtoD moving the same bytes (half read, half written)\n");
    println!(
        "| op | size | step | time (µs) | GB/s | of copy BW | of same-size copy | PyTorch GB/s | speed-up vs PyTorch |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    b.row("copy", "2^28", 0, 8.0 * n as f64, &mut || {
        d.dtod(&x, &y, n * 4)
    })?;

    // ---- elementwise, 2^28
    let z = buf(d, n, 0.0)?;
    let (px, py, pz) = (x.ptr(), y.ptr(), z.ptr());
    let nf = n as f64;
    for (name, code, s) in [("relu", 1, 0.0f32), ("scale", 12, 0.37), ("gelu", 4, 0.0)] {
        b.row(name, "2^28", 1, 8.0 * nf, &mut || {
            ew::unary_f32(d, px, pz, n, code, s)
        })?;
        b.row(name, "2^28", 2, 8.0 * nf, &mut || {
            ew::unary_vec4_f32(d, px, pz, n, code, s)
        })?;
    }
    for (name, code) in [("add", 0), ("mul", 2), ("gelu_bwd", ew::GELU_BWD)] {
        b.row(name, "2^28", 1, 12.0 * nf, &mut || {
            ew::binary2_f32(d, px, py, pz, n, code)
        })?;
        b.row(name, "2^28", 2, 12.0 * nf, &mut || {
            ew::binary_vec4_f32(d, px, py, pz, n, code)
        })?;
    }

    // ---- reductions, 2^28
    let out = buf(d, 65536, 0.0)?;
    let po = out.ptr();
    for (name, op) in [("sum", 0), ("max", 1)] {
        b.row(name, "2^28", 1, 4.0 * nf, &mut || {
            reduce::reduce_f32(d, px, po, 1, n, 1, op)
        })?;
        b.row(name, "2^28", 2, 4.0 * nf, &mut || {
            reduce::reduce2_f32(d, px, po, 1, n, 1, op)
        })?;
        let last = format!("{name}_last");
        b.row(&last, "65536x4096", 1, 4.0 * nf, &mut || {
            reduce::reduce_f32(d, px, po, 65536, 4096, 1, op)
        })?;
        b.row(&last, "65536x4096", 2, 4.0 * nf, &mut || {
            reduce::reduce2_f32(d, px, po, 65536, 4096, 1, op)
        })?;
        b.row(&last, "65536x4096", 3, 4.0 * nf, &mut || {
            reduce::reduce3_f32(d, px, po, 65536, 4096, 1, op)
        })?;
    }
    drop((x, y, z, out));

    // ---- softmax, forward and backward
    for (r, c) in [(16384usize, 1024usize), (4096, 4096), (65536, 65)] {
        let size = format!("{r}x{c}");
        let e = (r * c) as f64;
        let xs = rand_buf(d, r * c, 1)?;
        let gs = rand_buf(d, r * c, 2)?;
        let ys = buf(d, r * c, 0.0)?;
        let dx = buf(d, r * c, 0.0)?;
        let (px, pg, py, pd) = (xs.ptr(), gs.ptr(), ys.ptr(), dx.ptr());
        b.row("softmax", &size, 1, 8.0 * e, &mut || {
            softmax::softmax_last_f32(d, px, py, r, c, false)
        })?;
        b.row("softmax", &size, 2, 8.0 * e, &mut || {
            softmax::softmax2_f32(d, px, py, r, c, false)
        })?;
        b.row("softmax", &size, 3, 8.0 * e, &mut || {
            softmax::softmax3_f32(d, px, py, r, c, false)
        })?;
        b.row("softmax", &size, 4, 8.0 * e, &mut || {
            softmax::softmax4_f32(d, px, py, r, c, false)
        })?;
        b.row("softmax_bwd", &size, 1, 12.0 * e, &mut || {
            softmax::softmax_bwd_f32(d, py, pg, pd, r, c, false)
        })?;
        b.row("softmax_bwd", &size, 2, 12.0 * e, &mut || {
            softmax::softmax_bwd2_f32(d, py, pg, pd, r, c, false)
        })?;
        b.row("softmax_bwd", &size, 3, 12.0 * e, &mut || {
            softmax::softmax3_bwd_f32(d, py, pg, pd, r, c, false)
        })?;
        b.row("log_softmax", &size, 2, 8.0 * e, &mut || {
            softmax::softmax2_f32(d, px, py, r, c, true)
        })?;
        b.row("log_softmax", &size, 3, 8.0 * e, &mut || {
            softmax::softmax3_f32(d, px, py, r, c, true)
        })?;
        // the same values as step 3's
        b.row("log_softmax", &size, 4, 8.0 * e, &mut || {
            softmax::softmax4_f32(d, px, py, r, c, true)
        })?;
        // y now holds log-softmax values
        b.row("log_softmax_bwd", &size, 2, 12.0 * e, &mut || {
            softmax::softmax_bwd2_f32(d, py, pg, pd, r, c, true)
        })?;
        b.row("log_softmax_bwd", &size, 3, 12.0 * e, &mut || {
            softmax::softmax3_bwd_f32(d, py, pg, pd, r, c, true)
        })?;
    }

    // ---- LayerNorm 16384×768
    {
        let (r, c) = (16384usize, 768usize);
        let e = (r * c) as f64;
        let xs = rand_buf(d, r * c, 3)?;
        let gs = rand_buf(d, r * c, 4)?;
        let (gm, bt) = (rand_buf(d, c, 5)?, rand_buf(d, c, 6)?);
        let (ys, dx) = (buf(d, r * c, 0.0)?, buf(d, r * c, 0.0)?);
        let (mean, rstd) = (buf(d, r, 0.0)?, buf(d, r, 0.0)?);
        let (dg, db) = (buf(d, c, 0.0)?, buf(d, c, 0.0)?);
        let p = |bf: &Buffer| -> DevPtr { bf.ptr() };
        b.row("layernorm", "16384x768", 2, 8.0 * e, &mut || {
            ln::layernorm_fwd_f32(
                d,
                p(&xs),
                p(&gm),
                p(&bt),
                p(&ys),
                p(&mean),
                p(&rstd),
                r,
                c,
                1e-5,
            )
        })?;
        b.row("layernorm", "16384x768", 3, 8.0 * e, &mut || {
            ln::layernorm3_fwd_f32(
                d,
                p(&xs),
                p(&gm),
                p(&bt),
                p(&ys),
                p(&mean),
                p(&rstd),
                r,
                c,
                1e-5,
            )
        })?;
        b.row("layernorm", "16384x768", 4, 8.0 * e, &mut || {
            ln::layernorm4_fwd_f32(
                d,
                p(&xs),
                p(&gm),
                p(&bt),
                p(&ys),
                p(&mean),
                p(&rstd),
                r,
                c,
                1e-5,
            )
        })?;
        b.row("layernorm_bwd", "16384x768", 2, 12.0 * e, &mut || {
            ln::layernorm_bwd_f32(
                d,
                p(&xs),
                p(&gm),
                p(&gs),
                p(&mean),
                p(&rstd),
                p(&dx),
                p(&dg),
                p(&db),
                r,
                c,
            )
        })?;
        b.row("layernorm_bwd", "16384x768", 3, 12.0 * e, &mut || {
            ln::layernorm3_bwd_f32(
                d,
                p(&xs),
                p(&gm),
                p(&gs),
                p(&mean),
                p(&rstd),
                p(&dx),
                p(&dg),
                p(&db),
                r,
                c,
            )
        })?;
        b.row("layernorm_bwd", "16384x768", 4, 12.0 * e, &mut || {
            ln::layernorm4_bwd_f32(
                d,
                p(&xs),
                p(&gm),
                p(&gs),
                p(&mean),
                p(&rstd),
                p(&dx),
                p(&dg),
                p(&db),
                r,
                c,
            )
        })?;
    }

    // ---- cross-entropy (per-row loss; the mean over rows is a separate tiny reduction)
    for (r, c) in [(16384usize, 65usize), (4096, 50257)] {
        let size = format!("{r}x{c}");
        let e = (r * c) as f64;
        let xs = rand_buf(d, r * c, 7)?;
        let tg = idx_buf(d, r, c, 8)?;
        let (lo, st, g) = (
            buf(d, r, 0.0)?,
            buf(d, 2 * r, 0.0)?,
            buf(d, r, 1.0 / r as f32)?,
        );
        let dx = buf(d, r * c, 0.0)?;
        let err = d.alloc(32)?;
        d.memset_zero(&err)?;
        let (px, pt, pl, ps, pg, pd, pe) = (
            xs.ptr(),
            tg.ptr(),
            lo.ptr(),
            st.ptr(),
            g.ptr(),
            dx.ptr(),
            err.ptr(),
        );
        b.row("cross_entropy", &size, 1, 4.0 * e, &mut || {
            loss::cross_entropy_fwd_f32(d, px, pt, pl, r, c, pe)
        })?;
        b.row("cross_entropy", &size, 2, 4.0 * e, &mut || {
            loss::cross_entropy_fwd2_f32(d, px, pt, pl, ps, r, c, pe)
        })?;
        b.row("cross_entropy", &size, 3, 4.0 * e, &mut || {
            loss::cross_entropy_fwd3_f32(d, px, pt, pl, ps, r, c, pe)
        })?;
        b.row("cross_entropy_bwd", &size, 1, 8.0 * e, &mut || {
            loss::cross_entropy_bwd_f32(d, px, pt, pg, pd, r, c, pe)
        })?;
        b.row("cross_entropy_bwd", &size, 2, 8.0 * e, &mut || {
            loss::cross_entropy_bwd2_f32(d, px, pt, ps, pg, pd, r, c, pe)
        })?;
        b.row("cross_entropy_bwd", &size, 3, 8.0 * e, &mut || {
            loss::cross_entropy_bwd3_f32(d, px, pt, ps, pg, pd, r, c, pe)
        })?;
    }

    // ---- embedding: 2^28 / 768 tokens into a GPT-2 sized table; and 2^20 elements (16384
    // tokens × 64 into 1000 rows), below the backend's EMBEDDING_SORTED_MIN, where step 2 wins
    for (v, dim, tokens) in [
        (50257usize, 768usize, (1usize << 28) / 768),
        (1000, 64, 16384),
    ] {
        let e = (tokens * dim) as f64;
        let table = rand_buf(d, v * dim, 9)?;
        let idx = idx_buf(d, tokens, v, 10)?;
        let out = buf(d, tokens * dim, 0.0)?;
        let grad = buf(d, v * dim, 0.0)?;
        let err = d.alloc(32)?;
        d.memset_zero(&err)?;
        let (pt, pi, po, pg, pe) = (table.ptr(), idx.ptr(), out.ptr(), grad.ptr(), err.ptr());
        let size = format!("{tokens}x{dim}");
        b.row("embedding", &size, 1, 8.0 * e, &mut || {
            emb::index_select_rows_f32(d, pt, pi, po, tokens, v, dim, pe)
        })?;
        b.row("embedding", &size, 2, 8.0 * e, &mut || {
            emb::index_select_rows_warp_f32(d, pt, pi, po, tokens, v, dim, pe)
        })?;
        // backward, as the backend runs it (`index_add_rows`). Bytes it must move: the
        // upstream rows read once (4 B/element), the indices (8 B/token) and the [v, dim]
        // gradient written once. Steps 1–2 (as PyTorch's index_add would) zero the gradient and
        // then add every row atomically, a read-modify-write per element in L2; step 3 (and
        // PyTorch's embedding_dense_backward, which sorts the indices) group the tokens by row
        // first. Every repetition starts from scratch, so the atomics see the same values.
        let bwd_bytes = 4.0 * e + 8.0 * tokens as f64 + 4.0 * (v * dim) as f64;
        b.row("embedding_bwd", &size, 1, bwd_bytes, &mut || {
            d.memset_zero(&grad)?;
            emb::index_add_rows_f32(d, po, pi, pg, tokens, v, dim, pe)
        })?;
        b.row("embedding_bwd", &size, 2, bwd_bytes, &mut || {
            d.memset_zero(&grad)?;
            emb::index_add_rows_warp_f32(d, po, pi, pg, tokens, v, dim, pe)
        })?;
        b.row("embedding_bwd", &size, 3, bwd_bytes, &mut || {
            emb::index_add_rows_sorted_f32(d, po, pi, pg, tokens, v, dim, pe)
        })?;
    }

    // ---- optimizers over 10M parameters in 10 tensors of 1M (step 1: one launch each)
    {
        let sizes = [1_000_000usize; 10];
        let total: usize = sizes.iter().sum();
        let mk =
            |seed| -> Result<Vec<Buffer>> { sizes.iter().map(|&s| rand_buf(d, s, seed)).collect() };
        let (ps, gs, ms, vs) = (mk(11)?, mk(12)?, mk(13)?, mk(14)?);
        // v ≥ 0
        for v in &vs {
            ew::fill_f32(d, v.ptr(), v.bytes() / 4, 0.01)?;
        }
        let ts: Vec<optim::MultiTensor> = (0..sizes.len())
            .map(|i| optim::MultiTensor {
                p: ps[i].ptr(),
                g: gs[i].ptr(),
                s1: ms[i].ptr(),
                s2: vs[i].ptr(),
                n: sizes[i],
                bc1: 0.1,
                bc2: 0.001,
            })
            .collect();
        let tf = total as f64;
        b.row("adam", "10M", 1, 28.0 * tf, &mut || {
            for t in &ts {
                optim::adam_f32(
                    d, t.p, t.g, t.s1, t.s2, t.n, 1e-4, 0.9, 0.999, 1e-8, 0.01, true, 0.1, 0.001,
                )?;
            }
            Ok(())
        })?;
        b.row("adam", "10M", 2, 28.0 * tf, &mut || {
            optim::adam_multi_f32(d, &ts, 1e-4, 0.9, 0.999, 1e-8, 0.01, true)
        })?;
        b.row("adam", "10M", 3, 28.0 * tf, &mut || {
            optim::adam_multi3_f32(d, &ts, 1e-4, 0.9, 0.999, 1e-8, 0.01, true)
        })?;
        b.row("sgd_momentum", "10M", 1, 20.0 * tf, &mut || {
            for t in &ts {
                optim::sgd_f32(d, t.p, t.g, t.s1, t.n, 1e-4, 0.9, 0.0)?;
            }
            Ok(())
        })?;
        b.row("sgd_momentum", "10M", 2, 20.0 * tf, &mut || {
            optim::sgd_multi_f32(d, &ts, 1e-4, 0.9, 0.0)
        })?;
        b.row("sgd_momentum", "10M", 3, 20.0 * tf, &mut || {
            optim::sgd_multi3_f32(d, &ts, 1e-4, 0.9, 0.0)
        })?;
        // plain SGD (momentum 0: no buffer read or written): p and g read, p written
        b.row("sgd", "10M", 2, 12.0 * tf, &mut || {
            optim::sgd_multi_f32(d, &ts, 1e-4, 0.0, 0.0)
        })?;
        b.row("sgd", "10M", 3, 12.0 * tf, &mut || {
            optim::sgd_multi3_f32(d, &ts, 1e-4, 0.0, 0.0)
        })?;
    }
    d.synchronize()?;
    Ok(())
}
