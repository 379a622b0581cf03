//! GPU benchmark of the memory-bound kernel ladders (issue 4): every step of every family at the
//! issue's sizes, timed with CUDA events, reported as GB/s of the bytes the op must move (inputs
//! read once, outputs written once), the ratio to the device's copy bandwidth measured in the
//! same run (`cuMemcpyDtoD` of 2^28 floats), the ratio to a copy of the *same number of bytes*
//! (a `cuMemcpyDtoD` of half the op's bytes: read + write), and the ratio to PyTorch when a file
//! of PyTorch timings (`bench/torch/memory_torch.py`, timed the same way) is given.
//!
//! Two timings per row:
//! - **streamed** (the figure every ratio uses): launches back to back, as a training step issues
//!   them, a batch of them between one pair of events, median over `--reps` batches. A batch is
//!   as many launches as fill [`BATCH_SPAN_MS`] (at least [`BATCH_MIN`], at most [`BATCH_MAX`]):
//!   each batch pays once for the GPU filling up after its first event and draining before its
//!   last, about 3 µs on the H100, which launches back to back do not pay each time
//!   (`dev/labs/pipe_lab.cu`). Batches of 10 charged 0.3 µs of it to each launch of a 12 µs op.
//!   Before each batch a blocker (a read-only sum over 1.5 GiB, about 1 ms) keeps the GPU busy
//!   while the host queues the batch, so no launch waits for the host; then a few unmeasured
//!   launches of the op bring L2 to its steady state (dirty with the op's own outputs, as
//!   between back-to-back launches). Ops whose buffers are smaller than [`ROTATE_BYTES`] rotate
//!   through several copies of them, so each launch reads DRAM, not what the previous launch
//!   left in the 50 MiB L2. A `†` marks a batch the host may not have queued before the GPU
//!   reached it.
//! - **one launch**: each launch alone between its events, the GPU idle before it (the method of
//!   the earlier tables): it adds the host's launch path and the GPU's launch latency, several
//!   µs, which weighs at the 10–100 µs these ops take.
//!
//! `bench_memory [--torch torch.txt] [--reps N] [--only OP] [--pdl on|off]` — prints a Markdown
//! table (with `--only`, just the rows whose op name contains `OP`, e.g. `layernorm`, or one of
//! several separated by commas, e.g. `masked,uniform,dropout`; with
//! `--pdl off`, every kernel launched plainly from its compute_80 PTX).
//! Kernels are called through their camel-cuda launchers (no tensor overhead).

use camel_cuda::kernels::ladder::{Family, Step};
use camel_cuda::kernels::optim::Guard;
use camel_cuda::kernels::{
    elementwise as ew, embedding as emb, layernorm as ln, loss, masked_softmax, optim, random,
    reduce, shape, softmax,
};
use camel_cuda::{Buffer, CudaDevice, DevPtr, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// GPU time a timed batch of back-to-back launches should span (judged by one launch's time
/// alone): the batch's fill and drain (about 3 µs) then weigh at most 0.15 % of it.
const BATCH_SPAN_MS: f64 = 2.0;
/// Fewest launches in a timed batch (the large ops, 0.1–2 ms each).
const BATCH_MIN: usize = 10;
/// Most launches in a timed batch (the small ops, a few µs each).
const BATCH_MAX: usize = 200;

/// Launches in a timed batch of an op that takes `single_ms` alone, rotating `k` buffer sets.
fn batch_len(single_ms: f64, k: usize) -> usize {
    let n = (BATCH_SPAN_MS / single_ms.max(1e-6)).ceil() as usize;
    n.clamp(BATCH_MIN, BATCH_MAX).max(k)
}

/// What the rotated copies of an op's buffers must span together: 256 MiB, five times the
/// H100's 50 MiB L2, so that a launch finds its inputs in DRAM.
const ROTATE_BYTES: usize = 256 << 20;

/// Copies of an op's buffers to rotate through when one launch touches `footprint` bytes.
fn sets(footprint: usize) -> usize {
    ROTATE_BYTES.div_ceil(footprint.max(1)).clamp(1, 64)
}

/// One row's timings, milliseconds per launch.
struct Timing {
    /// Median over batches of back-to-back launches.
    stream: f64,
    /// Median of launches timed one at a time.
    single: f64,
    /// The GPU reached a batch before the host had queued all of it (may include host time).
    starved: bool,
}

struct Bench {
    dev: Arc<CudaDevice>,
    reps: usize,
    copy_gbs: f64,
    /// Source and destination of the size-matched copies (large enough for the largest op);
    /// the source is also the blocker's input.
    copy_src: Buffer,
    copy_dst: Buffer,
    /// The blocker's output.
    blocker_out: Buffer,
    /// Size-matched copy GB/s by the op's byte count (each size timed once).
    same_copy: HashMap<u64, f64>,
    /// PyTorch's streamed milliseconds by "op size".
    torch: HashMap<String, f64>,
    /// `--only`: time only the rows whose op name contains one of these comma-separated words.
    only: Option<String>,
}

impl Bench {
    /// GPU work that leaves L2 clean: `units` read-only sums over the 1.5 GiB copy source
    /// (about 0.5 ms each on the H100).
    fn blocker(&self, units: usize) -> Result<()> {
        let n = self.copy_src.bytes() / 4;
        for _ in 0..units {
            reduce::warp_shuffle(
                &self.dev,
                self.copy_src.ptr(),
                self.blocker_out.ptr(),
                1,
                n,
                1,
                0,
            )?;
        }
        Ok(())
    }

    /// Times `f(i)`, which launches the op on buffer set `i` of `k` (see [`Timing`]).
    fn time(&self, k: usize, f: &mut dyn FnMut(usize) -> Result<()>) -> Result<Timing> {
        let d = &*self.dev;
        for i in 0..k.max(3) {
            f(i % k)?;
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2]
        };
        // one launch at a time, the GPU idle before each; also the host's time to queue one
        let mut single = Vec::with_capacity(self.reps);
        let mut host = Vec::with_capacity(self.reps);
        for r in 0..self.reps {
            d.synchronize()?;
            let a = d.record_event()?;
            let t0 = std::time::Instant::now();
            f(r % k)?;
            host.push(t0.elapsed().as_secs_f64() * 1e3);
            let b = d.record_event()?;
            single.push(a.elapsed_ms(&b)? as f64);
        }
        let batch = batch_len(median(single.clone()), k);
        // back to back, each batch queued behind the blocker and a steady-state warm-up; the
        // blocker lasts twice the host's queueing time at 0.5 ms a unit, at least two units
        let queued_ms = median(host) * (k.max(2) + batch) as f64;
        let units = ((2.0 * queued_ms / 0.5).ceil() as usize).clamp(2, 64);
        let mut stream = Vec::with_capacity(self.reps);
        let mut starved = false;
        for r in 0..self.reps {
            d.synchronize()?;
            self.blocker(units)?;
            let blocked = d.record_event()?;
            for i in 0..k.max(2) {
                f((r + i) % k)?;
            }
            let a = d.record_event()?;
            for j in 0..batch {
                f((r + j) % k)?;
            }
            let b = d.record_event()?;
            starved |= blocked.is_done()?;
            stream.push(a.elapsed_ms(&b)? as f64 / batch as f64);
        }
        Ok(Timing {
            stream: median(stream),
            single: median(single),
            starved,
        })
    }

    /// GB/s of a device copy moving `bytes` in all (`bytes / 2` read, `bytes / 2` written),
    /// timed like the ops (streamed, rotated); cached per byte count.
    fn same_size_copy_gbs(&mut self, bytes: f64) -> Result<f64> {
        let key = bytes as u64;
        if let Some(&g) = self.same_copy.get(&key) {
            return Ok(g);
        }
        // half the bytes, in whole floats, at most the copy buffers' size
        let half = ((key / 2) as usize / 4 * 4).clamp(4, self.copy_src.bytes());
        let k = sets(2 * half);
        let t = if k == 1 {
            let (src, dst, dev) = (&self.copy_src, &self.copy_dst, self.dev.clone());
            self.time(1, &mut |_| dev.dtod(src, dst, half))?
        } else {
            let dev = self.dev.clone();
            let pairs = (0..k)
                .map(|_| Ok((dev.alloc(half)?, dev.alloc(half)?)))
                .collect::<Result<Vec<_>>>()?;
            self.time(k, &mut |i| dev.dtod(&pairs[i].0, &pairs[i].1, half))?
        };
        let gbs = 2.0 * half as f64 / (t.stream * 1e-3) / 1e9;
        self.same_copy.insert(key, gbs);
        Ok(gbs)
    }

    /// Time one ladder step of `op` at `size`, moving `bytes`, rotating through `k` buffer sets.
    fn row(
        &mut self,
        op: &str,
        size: &str,
        step: u32,
        bytes: f64,
        k: usize,
        f: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        if self
            .only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|w| op.contains(w)))
        {
            return Ok(());
        }
        let t = self.time(k, f)?;
        let gbs = bytes / (t.stream * 1e-3) / 1e9;
        let same_gbs = self.same_size_copy_gbs(bytes)?;
        // "op+what" rows compare with PyTorch's "op" (its F.cross_entropy includes the mean)
        let key = format!("{} {size}", op.split('+').next().unwrap_or(op));
        let (torch_gbs, ratio) = match self.torch.get(&key) {
            Some(&tms) => {
                let g = bytes / (tms * 1e-3) / 1e9;
                (format!("{g:.0}"), format!("{:.2}×", tms / t.stream))
            }
            None => ("—".into(), "—".into()),
        };
        let step = match step {
            0 => "—".to_string(),
            s => s.to_string(),
        };
        println!(
            "| {op} | {size} | {step} | {:.1}{} | {gbs:.0} | {:.0} % | {:.0} % | {:.1} | {torch_gbs} | {ratio} |",
            t.stream * 1e3,
            if t.starved { " †" } else { "" },
            100.0 * gbs / self.copy_gbs,
            100.0 * gbs / same_gbs,
            t.single * 1e3,
        );
        Ok(())
    }
}

/// `k` buffers of `n` floats, each filled with `v`.
fn bufs(dev: &CudaDevice, k: usize, n: usize, v: f32) -> Result<Vec<Buffer>> {
    (0..k).map(|_| buf(dev, n, v)).collect()
}

/// `k` buffers of `n` pseudo-random floats (seeds `seed`, `seed + 1`, …).
fn rand_bufs(dev: &CudaDevice, k: usize, n: usize, seed: u64) -> Result<Vec<Buffer>> {
    (0..k)
        .map(|i| rand_buf(dev, n, seed + 1000 * i as u64))
        .collect()
}

fn buf(dev: &CudaDevice, n: usize, v: f32) -> Result<Buffer> {
    let b = dev.alloc(n * 4)?;
    ew::fill_f32(dev, b.ptr(), n, v)?;
    Ok(b)
}

/// `k` buffers of `n` pseudo-random bf16 values (`rand_bufs`'s, rounded by the cast kernel).
fn bf16_bufs(dev: &CudaDevice, k: usize, n: usize, seed: u64) -> Result<Vec<Buffer>> {
    use camel_cuda::kernels::shape::{cast, Elem};
    (0..k)
        .map(|i| {
            let f = rand_buf(dev, n, seed + 1000 * i as u64)?;
            let h = dev.alloc(2 * n)?;
            cast(dev, f.ptr(), h.ptr(), n, Elem::F32, Elem::BF16)?;
            Ok(h)
        })
        .collect()
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

/// Whether `step`'s backward launcher is the step before's in `family`'s table (the second
/// launcher each step lists is its backward).
fn same_backward(family: Family, step: Step) -> bool {
    let steps = family.steps();
    let i = steps.iter().position(|s| s.step == step);
    i.is_some_and(|i| i > 0 && steps[i].launchers.get(1) == steps[i - 1].launchers.get(1))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("bench_memory: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| camel_bench::arg(&args, name);
    let reps = arg("--reps").map_or(20, |s| s.parse().expect("--reps N"));
    let only = arg("--only");
    // `--pdl off` launches every kernel plainly (an experiment switch, not a variable)
    let pdl = match arg("--pdl").as_deref() {
        None => true,
        Some(v) => camel_cuda::config::parse_flag("--pdl", v).unwrap_or_else(|e| {
            eprintln!("bench_memory: {e}");
            std::process::exit(2)
        }),
    };
    camel_cuda::config::set_experiments(camel_cuda::config::Experiments {
        pdl,
        ..Default::default()
    });
    let mut torch = HashMap::new();
    let mut torch_copy = None;
    if let Some(path) = arg("--torch") {
        let text = std::fs::read_to_string(&path).expect("reading the PyTorch timings");
        for line in text.lines() {
            // "<op> <size>\t<streamed ms>[\t<one-launch ms>]"
            let mut fields = line.split('\t');
            let (Some(k), Some(v)) = (fields.next(), fields.next()) else {
                continue;
            };
            if let Ok(ms) = v.trim().parse::<f64>() {
                if k == "copy 2^28" {
                    torch_copy = Some(ms);
                }
                torch.insert(k.to_string(), ms);
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
        copy_src: buf(&dev, copy_bytes / 4, 1.0)?,
        copy_dst: dev.alloc(copy_bytes)?,
        blocker_out: dev.alloc(4)?,
        same_copy: HashMap::new(),
        torch,
        only,
    };
    let d = &*dev;

    // ---- copy bandwidth, same run
    let n: usize = 1 << 28;
    let x = buf(d, n, 0.5)?;
    let y = buf(d, n, 0.25)?;
    let copy = b.time(1, &mut |_| d.dtod(&x, &y, n * 4))?;
    b.copy_gbs = 8.0 * n as f64 / (copy.stream * 1e-3) / 1e9;
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
    println!(
        "timing: CUDA events; streamed = median over {reps} batches of back-to-back launches, \
         {BATCH_MIN}-{BATCH_MAX} a batch, at least {BATCH_SPAN_MS} ms of them (queued behind a \
         blocker, after a steady-state warm-up; buffers rotated over {} MiB), \
         one launch = median of {reps} launches timed alone; GB/s = bytes the op must move / streamed time",
        ROTATE_BYTES >> 20
    );
    println!("\"of same-size copy\": GB/s over a cuMemcpyDtoD moving the same bytes (half read, half written), streamed");
    println!(
        "programmatic dependent launch (kernels/common/pdl.cuh): {}\n",
        if d.pdl() {
            "on (--pdl off turns it off)"
        } else {
            "off"
        }
    );
    println!(
        "| op | size | step | streamed (µs) | GB/s | of copy BW | of same-size copy | one launch (µs) | PyTorch GB/s | speed-up vs PyTorch |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    b.row("copy", "2^28", 0, 8.0 * n as f64, 1, &mut |_| {
        d.dtod(&x, &y, n * 4)
    })?;

    // ---- elementwise, 2^28 (1 GiB a buffer: no rotation)
    let z = buf(d, n, 0.0)?;
    let (px, py, pz) = (x.ptr(), y.ptr(), z.ptr());
    let nf = n as f64;
    for (name, code, s) in [("relu", 1, 0.0f32), ("scale", 12, 0.37), ("gelu", 4, 0.0)] {
        b.row(name, "2^28", 1, 8.0 * nf, 1, &mut |_| {
            ew::unary_f32(d, px, pz, n, code, s)
        })?;
        b.row(name, "2^28", 2, 8.0 * nf, 1, &mut |_| {
            ew::unary_vec4_f32(d, px, pz, n, code, s)
        })?;
    }
    for (name, code) in [("add", 0), ("mul", 2), ("gelu_bwd", ew::GELU_BWD)] {
        b.row(name, "2^28", 1, 12.0 * nf, 1, &mut |_| {
            ew::binary2_f32(d, px, py, pz, n, code)
        })?;
        b.row(name, "2^28", 2, 12.0 * nf, 1, &mut |_| {
            ew::binary_vec4_f32(d, px, py, pz, n, code)
        })?;
    }

    // ---- 16-bit elementwise and the mixed-precision casts, 2^28 (the 2-byte tensors live in
    // the f32 buffers' first halves)
    {
        use camel_cuda::kernels::shape::{self as sh, Elem};
        b.row("add_bf16", "2^28", 1, 6.0 * nf, 1, &mut |_| {
            ew::binary_half(d, Elem::BF16, px, py, pz, n, 0)
        })?;
        b.row("gelu_f16", "2^28", 1, 4.0 * nf, 1, &mut |_| {
            ew::unary_half(d, Elem::F16, px, pz, n, 4, 0.0)
        })?;
        b.row("cast_f32_bf16", "2^28", 1, 6.0 * nf, 1, &mut |_| {
            sh::cast(d, px, pz, n, Elem::F32, Elem::BF16)
        })?;
        b.row("cast_bf16_f32", "2^28", 1, 6.0 * nf, 1, &mut |_| {
            sh::cast(d, py, pz, n, Elem::BF16, Elem::F32)
        })?;
    }

    // ---- reductions, 2^28
    let out = buf(d, 65536, 0.0)?;
    let po = out.ptr();
    for (name, op) in [("sum", 0), ("max", 1)] {
        b.row(name, "2^28", 1, 4.0 * nf, 1, &mut |_| {
            reduce::block_per_output(d, px, po, 1, n, 1, op)
        })?;
        b.row(name, "2^28", 2, 4.0 * nf, 1, &mut |_| {
            reduce::warp_shuffle(d, px, po, 1, n, 1, op)
        })?;
        let last = format!("{name}_last");
        b.row(&last, "65536x4096", 1, 4.0 * nf, 1, &mut |_| {
            reduce::block_per_output(d, px, po, 65536, 4096, 1, op)
        })?;
        b.row(&last, "65536x4096", 2, 4.0 * nf, 1, &mut |_| {
            reduce::warp_shuffle(d, px, po, 65536, 4096, 1, op)
        })?;
        b.row(&last, "65536x4096", 3, 4.0 * nf, 1, &mut |_| {
            reduce::loads_in_flight(d, px, po, 65536, 4096, 1, op)
        })?;
    }
    drop((x, y, z, out));

    // ---- sums of bf16: the last dim of 65536×4096 (rows a block each) and the first of
    // 16384×1536 (a bias gradient: the chunked middle-dim pass), reading the 16-bit input in
    // step 3's kernels, against `_widened` (the cast to f32, then the f32 kernels); f32 sums
    {
        use camel_cuda::kernels::shape::{self as sh, Elem};
        let (bf, f32_) = (Elem::BF16, Elem::F32);
        for (name, outer, dim, inner) in [
            ("sum_last_bf16", 65536usize, 4096usize, 1usize),
            ("sum_cols_bf16", 1, 16384, 1536),
        ] {
            let n = outer * dim * inner;
            let size = if inner == 1 {
                format!("{outer}x{dim}")
            } else {
                format!("{dim}x{inner}")
            };
            let k = sets(2 * n);
            let xs = bf16_bufs(d, k, n, 81)?;
            let (xf, out) = (buf(d, n, 0.0)?, buf(d, outer * inner, 0.0)?);
            let (pxf, po) = (xf.ptr(), out.ptr());
            let bytes = 2.0 * n as f64;
            b.row(name, &size, 3, bytes, k, &mut |i| {
                reduce::loads_in_flight_typed(d, xs[i].ptr(), po, outer, dim, inner, 0, bf)
                    .map(|_| ())
            })?;
            b.row(&format!("{name}_widened"), &size, 3, bytes, k, &mut |i| {
                sh::cast(d, xs[i].ptr(), pxf, n, bf, f32_)?;
                reduce::loads_in_flight(d, pxf, po, outer, dim, inner, 0)
            })?;
        }
    }

    // ---- softmax, forward and backward (rotated by the forward's footprint, x and y)
    for (r, c) in [(16384usize, 1024usize), (4096, 4096), (65536, 65)] {
        let size = format!("{r}x{c}");
        let e = (r * c) as f64;
        let k = sets(8 * r * c);
        let (xs, gs) = (rand_bufs(d, k, r * c, 1)?, rand_bufs(d, k, r * c, 2)?);
        let (ys, dxs) = (bufs(d, k, r * c, 0.0)?, bufs(d, k, r * c, 0.0)?);
        let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
        for log in [false, true] {
            let (fwd, bwd) = if log {
                ("log_softmax", "log_softmax_bwd")
            } else {
                ("softmax", "softmax_bwd")
            };
            // the ladder's table; step 1 only for softmax (its log form is the same kernel)
            let steps = || {
                softmax::STEPS
                    .iter()
                    .filter(|s| !log || s.step != Step::One)
            };
            for s in steps() {
                b.row(fwd, &size, s.step.number(), 8.0 * e, k, &mut |i| {
                    (s.forward)(d, p(&xs, i), p(&ys, i), r, c, log)
                })?;
            }
            // every y now holds (log-)softmax values; a step whose backward is the step
            // before's (the table's launcher names say so) is not timed twice
            for s in steps().filter(|s| !same_backward(Family::Softmax, s.step)) {
                b.row(bwd, &size, s.step.number(), 12.0 * e, k, &mut |i| {
                    (s.backward)(d, p(&ys, i), p(&gs, i), p(&dxs, i), r, c, log)
                })?;
            }
        }
    }

    // ---- softmax of bf16 rows: step 3's 16-bit kernels, which read and write 2 bytes an
    // element, and `_widened`, what the op ran without them (the cast to f32, the f32 kernel,
    // the cast back: three launches), the same op's bytes counted for both
    {
        use camel_cuda::kernels::shape::{self as sh, Elem};
        for (r, c) in [(16384usize, 1024usize), (65536, 65)] {
            let (size, n) = (format!("{r}x{c}"), r * c);
            let e = n as f64;
            let k = sets(4 * n);
            let (xs, gs) = (bf16_bufs(d, k, n, 31)?, bf16_bufs(d, k, n, 32)?);
            let (ys, dxs) = (bf16_bufs(d, k, n, 33)?, bf16_bufs(d, k, n, 34)?);
            let (xf, yf, gf) = (buf(d, n, 0.0)?, buf(d, n, 0.0)?, buf(d, n, 0.0)?);
            let (pxf, pyf, pgf) = (xf.ptr(), yf.ptr(), gf.ptr());
            let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
            let (bf, f32_) = (Elem::BF16, Elem::F32);
            for log in [false, true] {
                let op = if log { "log_softmax" } else { "softmax" };
                b.row(&format!("{op}_bf16"), &size, 3, 4.0 * e, k, &mut |i| {
                    softmax::warp_registers_typed(d, p(&xs, i), p(&ys, i), r, c, log, bf)
                        .map(|_| ())
                })?;
                b.row(
                    &format!("{op}_bf16_widened"),
                    &size,
                    3,
                    4.0 * e,
                    k,
                    &mut |i| {
                        sh::cast(d, p(&xs, i), pxf, n, bf, f32_)?;
                        softmax::warp_registers(d, pxf, pyf, r, c, log)?;
                        sh::cast(d, pyf, p(&ys, i), n, f32_, bf)
                    },
                )?;
                b.row(&format!("{op}_bwd_bf16"), &size, 3, 6.0 * e, k, &mut |i| {
                    let ptrs = [p(&ys, i), p(&gs, i), p(&dxs, i)];
                    softmax::warp_registers_bwd_typed(d, ptrs, r, c, log, bf).map(|_| ())
                })?;
                b.row(
                    &format!("{op}_bwd_bf16_widened"),
                    &size,
                    3,
                    6.0 * e,
                    k,
                    &mut |i| {
                        sh::cast(d, p(&ys, i), pyf, n, bf, f32_)?;
                        sh::cast(d, p(&gs, i), pgf, n, bf, f32_)?;
                        softmax::warp_registers_bwd(d, pyf, pgf, pxf, r, c, log)?;
                        sh::cast(d, pxf, p(&dxs, i), n, f32_, bf)
                    },
                )?;
            }
        }
    }

    // ---- the scaled, causally masked softmax of attention scores at GPT-mini's recipe: 64
    // sequences × 6 heads × 256 queries, 256 keys (rotated by the forward's footprint, x and y)
    {
        let (r, c, tq) = (64 * 6 * 256usize, 256usize, 256usize);
        let size = format!("{r}x{c}");
        let e = (r * c) as f64;
        let k = sets(8 * r * c);
        let (xs, gs) = (rand_bufs(d, k, r * c, 7)?, rand_bufs(d, k, r * c, 8)?);
        let (ys, dxs) = (bufs(d, k, r * c, 0.0)?, bufs(d, k, r * c, 0.0)?);
        let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
        let scale = 0.125f32;
        for s in &masked_softmax::STEPS {
            let n = s.step.number();
            b.row("masked_softmax", &size, n, 8.0 * e, k, &mut |i| {
                (s.forward)(d, p(&xs, i), p(&ys, i), r, c, tq, scale, true)
            })?;
            b.row("masked_softmax_bwd", &size, n, 12.0 * e, k, &mut |i| {
                (s.backward)(d, p(&ys, i), p(&gs, i), p(&dxs, i), r, c, tq, scale, true)
            })?;
        }
    }

    // ---- the same masked softmax of bf16 scores: the 16-bit register kernels, and `_widened`
    // (the casts to f32 around the f32 kernel, what the op ran without them), the same op's
    // bytes counted for both
    {
        use camel_cuda::kernels::shape::{self as sh, Elem};
        let (r, c, tq) = (64 * 6 * 256usize, 256usize, 256usize);
        let (size, n) = (format!("{r}x{c}"), r * c);
        let e = n as f64;
        let k = sets(4 * n);
        let (xs, gs) = (bf16_bufs(d, k, n, 71)?, bf16_bufs(d, k, n, 72)?);
        let (ys, dxs) = (bf16_bufs(d, k, n, 73)?, bf16_bufs(d, k, n, 74)?);
        let (xf, yf, gf) = (buf(d, n, 0.0)?, buf(d, n, 0.0)?, buf(d, n, 0.0)?);
        let (pxf, pyf, pgf) = (xf.ptr(), yf.ptr(), gf.ptr());
        let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
        let (bf, f32_, scale) = (Elem::BF16, Elem::F32, 0.125f32);
        b.row("masked_softmax_bf16", &size, 1, 4.0 * e, k, &mut |i| {
            let ptrs = [p(&xs, i), p(&ys, i)];
            masked_softmax::registers_typed(d, &ptrs, r, c, tq, scale, true, bf).map(|_| ())
        })?;
        b.row(
            "masked_softmax_bf16_widened",
            &size,
            1,
            4.0 * e,
            k,
            &mut |i| {
                sh::cast(d, p(&xs, i), pxf, n, bf, f32_)?;
                masked_softmax::registers(d, pxf, pyf, r, c, tq, scale, true)?;
                sh::cast(d, pyf, p(&ys, i), n, f32_, bf)
            },
        )?;
        b.row("masked_softmax_bwd_bf16", &size, 1, 6.0 * e, k, &mut |i| {
            let ptrs = [p(&ys, i), p(&gs, i), p(&dxs, i)];
            masked_softmax::registers_typed(d, &ptrs, r, c, tq, scale, true, bf).map(|_| ())
        })?;
        b.row(
            "masked_softmax_bwd_bf16_widened",
            &size,
            1,
            6.0 * e,
            k,
            &mut |i| {
                sh::cast(d, p(&ys, i), pyf, n, bf, f32_)?;
                sh::cast(d, p(&gs, i), pgf, n, bf, f32_)?;
                masked_softmax::registers_bwd(d, pyf, pgf, pxf, r, c, tq, scale, true)?;
                sh::cast(d, pxf, p(&dxs, i), n, f32_, bf)
            },
        )?;
    }

    // ---- Philox: uniform numbers (written only) and dropout (read and written), 2^28 floats
    {
        let n = 1usize << 28;
        let nf = n as f64;
        let (x, y) = (rand_buf(d, n, 9)?, buf(d, n, 0.0)?);
        b.row("uniform", "2^28", 1, 4.0 * nf, 1, &mut |i| {
            random::uniform_f32(d, y.ptr(), n, 1, i as u64, 0.0, 1.0)
        })?;
        b.row("dropout", "2^28", 1, 8.0 * nf, 1, &mut |i| {
            random::dropout(d, x.ptr(), y.ptr(), n, 1, i as u64, 0.2, 1.25, Elem::F32)
        })?;
        // bf16: 2 bytes an element each way, against the cast to f32, the f32 dropout and the
        // cast back (`_widened`), x and y reused as the f32 scratch
        use camel_cuda::kernels::shape::{self as sh, Elem};
        let (bf, f32_) = (Elem::BF16, Elem::F32);
        let (xb, yb) = (bf16_bufs(d, 1, n, 10)?, bf16_bufs(d, 1, n, 11)?);
        let (pxb, pyb) = (xb[0].ptr(), yb[0].ptr());
        b.row("dropout_bf16", "2^28", 1, 4.0 * nf, 1, &mut |i| {
            random::dropout(d, pxb, pyb, n, 1, i as u64, 0.2, 1.25, bf)
        })?;
        b.row("dropout_bf16_widened", "2^28", 1, 4.0 * nf, 1, &mut |i| {
            sh::cast(d, pxb, x.ptr(), n, bf, f32_)?;
            random::dropout(d, x.ptr(), y.ptr(), n, 1, i as u64, 0.2, 1.25, Elem::F32)?;
            sh::cast(d, y.ptr(), pyb, n, f32_, bf)
        })?;
    }

    // ---- LayerNorm 16384×768 (rotated by the forward's footprint, x and y)
    {
        let (r, c) = (16384usize, 768usize);
        let e = (r * c) as f64;
        let k = sets(8 * r * c);
        let (xs, gs) = (rand_bufs(d, k, r * c, 3)?, rand_bufs(d, k, r * c, 4)?);
        let (gm, bt) = (rand_buf(d, c, 5)?, rand_buf(d, c, 6)?);
        let (ys, dxs) = (bufs(d, k, r * c, 0.0)?, bufs(d, k, r * c, 0.0)?);
        let (means, rstds) = (bufs(d, k, r, 0.0)?, bufs(d, k, r, 0.0)?);
        let (dg, db) = (buf(d, c, 0.0)?, buf(d, c, 0.0)?);
        let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
        for s in &ln::STEPS {
            b.row(
                "layernorm",
                "16384x768",
                s.step.number(),
                8.0 * e,
                k,
                &mut |i| {
                    (s.forward)(
                        d,
                        p(&xs, i),
                        gm.ptr(),
                        bt.ptr(),
                        p(&ys, i),
                        p(&means, i),
                        p(&rstds, i),
                        r,
                        c,
                        1e-5,
                    )
                },
            )?;
        }
        for s in &ln::STEPS {
            b.row(
                "layernorm_bwd",
                "16384x768",
                s.step.number(),
                12.0 * e,
                k,
                &mut |i| {
                    (s.backward)(
                        d,
                        p(&xs, i),
                        gm.ptr(),
                        p(&gs, i),
                        p(&means, i),
                        p(&rstds, i),
                        p(&dxs, i),
                        dg.ptr(),
                        db.ptr(),
                        r,
                        c,
                    )
                },
            )?;
        }
    }

    // ---- LayerNorm of bf16 rows, 16384×768: step 4's 16-bit kernels (x, γ, β, y and the
    // gradients in bf16; statistics f32) and `_widened` (casts to f32 around the f32 kernels),
    // the same op's bytes counted for both
    {
        use camel_cuda::kernels::shape::{self as sh, Elem};
        let (bf, f32_) = (Elem::BF16, Elem::F32);
        let (r, c) = (16384usize, 768usize);
        let n = r * c;
        let e = n as f64;
        let k = sets(4 * n);
        let (xs, gs) = (bf16_bufs(d, k, n, 61)?, bf16_bufs(d, k, n, 62)?);
        let (ys, dxs) = (bf16_bufs(d, k, n, 63)?, bf16_bufs(d, k, n, 64)?);
        let (gm, bt) = (bf16_bufs(d, 1, c, 65)?, bf16_bufs(d, 1, c, 66)?);
        let (dg, db) = (bf16_bufs(d, 1, c, 67)?, bf16_bufs(d, 1, c, 68)?);
        let (means, rstds) = (bufs(d, k, r, 0.0)?, bufs(d, k, r, 0.0)?);
        let (xf, yf, gf) = (buf(d, n, 0.0)?, buf(d, n, 0.0)?, buf(d, n, 0.0)?);
        let (gmf, btf) = (buf(d, c, 0.0)?, buf(d, c, 0.0)?);
        let (dgf, dbf) = (buf(d, c, 0.0)?, buf(d, c, 0.0)?);
        let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
        let (pgm, pbt, pdg, pdb) = (gm[0].ptr(), bt[0].ptr(), dg[0].ptr(), db[0].ptr());
        b.row("layernorm_bf16", "16384x768", 4, 4.0 * e, k, &mut |i| {
            let q = [p(&xs, i), pgm, pbt, p(&ys, i), p(&means, i), p(&rstds, i)];
            ln::streaming_typed(d, q, r, c, 1e-5, bf).map(|_| ())
        })?;
        b.row(
            "layernorm_bf16_widened",
            "16384x768",
            4,
            4.0 * e,
            k,
            &mut |i| {
                sh::cast(d, p(&xs, i), xf.ptr(), n, bf, f32_)?;
                sh::cast(d, pgm, gmf.ptr(), c, bf, f32_)?;
                sh::cast(d, pbt, btf.ptr(), c, bf, f32_)?;
                let (xp, yp, mp, rp) = (xf.ptr(), yf.ptr(), p(&means, i), p(&rstds, i));
                ln::streaming(d, xp, gmf.ptr(), btf.ptr(), yp, mp, rp, r, c, 1e-5)?;
                sh::cast(d, yf.ptr(), p(&ys, i), n, f32_, bf)
            },
        )?;
        b.row("layernorm_bwd_bf16", "16384x768", 4, 6.0 * e, k, &mut |i| {
            let q = [
                p(&xs, i),
                pgm,
                p(&gs, i),
                p(&means, i),
                p(&rstds, i),
                p(&dxs, i),
                pdg,
                pdb,
            ];
            ln::warp_pair_bwd_typed(d, q, r, c, bf).map(|_| ())
        })?;
        b.row(
            "layernorm_bwd_bf16_widened",
            "16384x768",
            4,
            6.0 * e,
            k,
            &mut |i| {
                sh::cast(d, p(&xs, i), xf.ptr(), n, bf, f32_)?;
                sh::cast(d, pgm, gmf.ptr(), c, bf, f32_)?;
                sh::cast(d, p(&gs, i), gf.ptr(), n, bf, f32_)?;
                let (mp, rp) = (p(&means, i), p(&rstds, i));
                let (xp, gp, dxp) = (xf.ptr(), gf.ptr(), yf.ptr());
                ln::warp_pair_bwd(
                    d,
                    xp,
                    gmf.ptr(),
                    gp,
                    mp,
                    rp,
                    dxp,
                    dgf.ptr(),
                    dbf.ptr(),
                    r,
                    c,
                )?;
                sh::cast(d, yf.ptr(), p(&dxs, i), n, f32_, bf)?;
                sh::cast(d, dgf.ptr(), pdg, c, f32_, bf)?;
                sh::cast(d, dbf.ptr(), pdb, c, f32_, bf)
            },
        )?;
    }

    // ---- cross-entropy: the per-row kernels of steps 1–3, then the whole loss with its mean
    // (step 3's kernels and the op's mean; step 4's one kernel), rotated by the logits' size
    for (r, c) in [(16384usize, 65usize), (4096, 50257)] {
        let size = format!("{r}x{c}");
        let e = (r * c) as f64;
        let k = sets(4 * r * c);
        let xs = rand_bufs(d, k, r * c, 7)?;
        let tg = idx_buf(d, r, c, 8)?;
        let (lo, st) = (bufs(d, k, r, 0.0)?, bufs(d, k, 2 * r, 0.0)?);
        let g = buf(d, r, 1.0 / r as f32)?;
        let dxs = bufs(d, k, r * c, 0.0)?;
        let err = d.alloc(32)?;
        d.memset_zero(&err)?;
        let (pt, pg, pe) = (tg.ptr(), g.ptr(), err.ptr());
        let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
        b.row("cross_entropy", &size, 1, 4.0 * e, k, &mut |i| {
            loss::block_per_row(d, p(&xs, i), pt, p(&lo, i), r, c, pe)
        })?;
        b.row("cross_entropy", &size, 2, 4.0 * e, k, &mut |i| {
            loss::saved_stats(d, p(&xs, i), pt, p(&lo, i), p(&st, i), r, c, pe)
        })?;
        b.row("cross_entropy", &size, 3, 4.0 * e, k, &mut |i| {
            loss::registers(d, p(&xs, i), pt, p(&lo, i), p(&st, i), r, c, pe)
        })?;
        b.row("cross_entropy_bwd", &size, 1, 8.0 * e, k, &mut |i| {
            loss::block_per_row_bwd(d, p(&xs, i), pt, pg, p(&dxs, i), r, c, pe)
        })?;
        b.row("cross_entropy_bwd", &size, 2, 8.0 * e, k, &mut |i| {
            loss::saved_stats_bwd(d, p(&xs, i), pt, p(&st, i), pg, p(&dxs, i), r, c, pe)
        })?;
        b.row("cross_entropy_bwd", &size, 3, 8.0 * e, k, &mut |i| {
            loss::registers_bwd(d, p(&xs, i), pt, p(&st, i), pg, p(&dxs, i), r, c, pe)
        })?;
        // The whole loss, the mean over rows included, as the op runs it. Step 3: the per-row
        // kernel, the sum of the losses and the scale by 1/rows forward; backward the scale of
        // the upstream gradient, its broadcast to the rows and the per-row kernel. Step 4: one
        // kernel each way.
        let (means, sums) = (bufs(d, k, 1, 0.0)?, bufs(d, k, 1, 0.0)?);
        let (g1, gs) = (buf(d, 1, 1.0)?, buf(d, 1, 0.0)?);
        let (pg1, pgs) = (g1.ptr(), gs.ptr());
        let inv = 1.0 / r as f32;
        b.row("cross_entropy+mean", &size, 3, 4.0 * e, k, &mut |i| {
            loss::registers(d, p(&xs, i), pt, p(&lo, i), p(&st, i), r, c, pe)?;
            reduce::loads_in_flight(d, p(&lo, i), p(&sums, i), 1, r, 1, 0)?;
            ew::unary_vec4_f32(d, p(&sums, i), p(&means, i), 1, 12, inv)
        })?;
        b.row("cross_entropy+mean", &size, 4, 4.0 * e, k, &mut |i| {
            loss::fused_mean(d, p(&xs, i), pt, p(&means, i), p(&st, i), r, c, pe)
        })?;
        b.row("cross_entropy_bwd+mean", &size, 3, 8.0 * e, k, &mut |i| {
            ew::unary_vec4_f32(d, pg1, pgs, 1, 12, inv)?;
            shape::copy_strided(d, pgs, pg, &[r], &[0], 0, 4)?;
            loss::registers_bwd(d, p(&xs, i), pt, p(&st, i), pg, p(&dxs, i), r, c, pe)
        })?;
        b.row("cross_entropy_bwd+mean", &size, 4, 8.0 * e, k, &mut |i| {
            loss::fused_mean_bwd(d, p(&xs, i), pt, p(&st, i), pg1, p(&dxs, i), r, c, pe)
        })?;
    }

    // ---- the mean squared error of 2^24 elements, f32 and bf16: the forward as the op runs it
    // (a partial sum a block, the sum of the partials, the scale by 1/n), and the backward's
    // gradient of the first operand (read both, write one)
    {
        use camel_cuda::kernels::shape::Elem;
        let n = 1usize << 24;
        let e = n as f64;
        let parts = loss::mse_blocks(d, n);
        let (part, sum, mean) = (buf(d, parts, 0.0)?, buf(d, 1, 0.0)?, buf(d, 1, 0.0)?);
        let g1 = buf(d, 1, 1.0)?;
        let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
        for (elem, name, bytes) in [(Elem::F32, "mse", 4.0), (Elem::BF16, "mse_bf16", 2.0)] {
            let k = sets(3 * n * bytes as usize);
            let (xs, ys, da) = if elem == Elem::F32 {
                (
                    rand_bufs(d, k, n, 91)?,
                    rand_bufs(d, k, n, 92)?,
                    bufs(d, k, n, 0.0)?,
                )
            } else {
                (
                    bf16_bufs(d, k, n, 91)?,
                    bf16_bufs(d, k, n, 92)?,
                    bf16_bufs(d, k, n, 93)?,
                )
            };
            b.row(name, "2^24", 1, 2.0 * bytes * e, k, &mut |i| {
                loss::mse_partial(d, [p(&xs, i), p(&ys, i), part.ptr()], n, elem)?;
                reduce::loads_in_flight(d, part.ptr(), sum.ptr(), 1, parts, 1, 0)?;
                ew::unary_vec4_f32(d, sum.ptr(), mean.ptr(), 1, 12, 1.0 / n as f32)
            })?;
            let bwd = format!("mse_bwd{}", if elem == Elem::F32 { "" } else { "_bf16" });
            b.row(&bwd, "2^24", 1, 3.0 * bytes * e, k, &mut |i| {
                let ptrs = [p(&xs, i), p(&ys, i), g1.ptr(), p(&da, i), DevPtr::NULL];
                loss::mse_bwd(d, ptrs, n, 2.0 / n as f32, elem)
            })?;
        }
    }

    // ---- the cross-entropy of bf16 logits with its mean: step 4's 16-bit kernels (2 bytes a
    // logit read, and written backward) and `_widened` (the cast to f32 first, and backward the
    // f32 gradient cast back), the same op's bytes counted for both
    {
        use camel_cuda::kernels::shape::{self as sh, Elem};
        let (bf, f32_) = (Elem::BF16, Elem::F32);
        for (r, c) in [(16384usize, 65usize), (1024, 16384)] {
            let (size, n) = (format!("{r}x{c}"), r * c);
            let e = n as f64;
            let k = sets(2 * n);
            let (xs, dxs) = (bf16_bufs(d, k, n, 41)?, bf16_bufs(d, k, n, 42)?);
            let (xf, dxf) = (buf(d, n, 0.0)?, buf(d, n, 0.0)?);
            let tg = idx_buf(d, r, c, 43)?;
            let (means, st) = (bufs(d, k, 1, 0.0)?, bufs(d, k, 2 * r, 0.0)?);
            let g1 = buf(d, 1, 1.0)?;
            let err = d.alloc(32)?;
            d.memset_zero(&err)?;
            let (pt, pg1, pe, pxf, pdxf) = (tg.ptr(), g1.ptr(), err.ptr(), xf.ptr(), dxf.ptr());
            let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
            b.row("cross_entropy_bf16+mean", &size, 4, 2.0 * e, k, &mut |i| {
                let ptrs = [p(&xs, i), pt, p(&means, i), p(&st, i)];
                loss::fused_mean_typed(d, ptrs, r, c, pe, bf).map(|_| ())
            })?;
            b.row(
                "cross_entropy_bf16_widened+mean",
                &size,
                4,
                2.0 * e,
                k,
                &mut |i| {
                    sh::cast(d, p(&xs, i), pxf, n, bf, f32_)?;
                    loss::fused_mean(d, pxf, pt, p(&means, i), p(&st, i), r, c, pe)
                },
            )?;
            b.row(
                "cross_entropy_bwd_bf16+mean",
                &size,
                4,
                4.0 * e,
                k,
                &mut |i| {
                    let ptrs = [p(&xs, i), pt, p(&st, i), pg1, p(&dxs, i)];
                    loss::fused_mean_bwd_typed(d, ptrs, r, c, pe, bf).map(|_| ())
                },
            )?;
            b.row(
                "cross_entropy_bwd_bf16_widened+mean",
                &size,
                4,
                4.0 * e,
                k,
                &mut |i| {
                    sh::cast(d, p(&xs, i), pxf, n, bf, f32_)?;
                    loss::fused_mean_bwd(d, pxf, pt, p(&st, i), pg1, pdxf, r, c, pe)?;
                    sh::cast(d, pdxf, p(&dxs, i), n, f32_, bf)
                },
            )?;
        }
    }

    // ---- embedding: 2^28 / 768 tokens into a GPT-2 sized table; and 2^20 elements (16384
    // tokens × 64 into 1000 rows), below the backend's EMBEDDING_SORTED_MIN, where step 2 wins.
    // Rotated by the output's size (the small table is rotated with it).
    for (v, dim, tokens) in [
        (50257usize, 768usize, (1usize << 28) / 768),
        (1000, 64, 16384),
    ] {
        let e = (tokens * dim) as f64;
        let k = sets(4 * tokens * dim);
        let tables = rand_bufs(d, k, v * dim, 9)?;
        let idx = (0..k)
            .map(|i| idx_buf(d, tokens, v, 10 + i as u64))
            .collect::<Result<Vec<_>>>()?;
        let outs = bufs(d, k, tokens * dim, 0.0)?;
        let grads = bufs(d, k, v * dim, 0.0)?;
        let err = d.alloc(32)?;
        d.memset_zero(&err)?;
        let pe = err.ptr();
        let p = |v: &[Buffer], i: usize| -> DevPtr { v[i].ptr() };
        let size = format!("{tokens}x{dim}");
        // every step's launcher has the same signature: (dev, src, idx, dst, n, v, dim, err)
        type EmbLaunch =
            fn(&CudaDevice, DevPtr, DevPtr, DevPtr, usize, usize, usize, DevPtr) -> Result<()>;
        let fwd: [EmbLaunch; 2] = [emb::index_select_rows_f32, emb::index_select_rows_warp_f32];
        for (step, f) in (1..).zip(fwd) {
            b.row("embedding", &size, step, 8.0 * e, k, &mut |i| {
                f(
                    d,
                    p(&tables, i),
                    p(&idx, i),
                    p(&outs, i),
                    tokens,
                    v,
                    dim,
                    pe,
                )
            })?;
        }
        // backward, as the backend runs it (`index_add_rows`). Bytes it must move: the
        // upstream rows read once (4 B/element), the indices (8 B/token) and the [v, dim]
        // gradient written once. Steps 1–2 (as PyTorch's index_add would) zero the gradient and
        // then add every row atomically, a read-modify-write per element in L2; step 3 (and
        // PyTorch's embedding_dense_backward, which sorts the indices) group the tokens by row
        // first (step 4 in two launches, with plain stores of all but long groups). Every
        // repetition starts from scratch, so the atomics see the same values.
        let bwd_bytes = 4.0 * e + 8.0 * tokens as f64 + 4.0 * (v * dim) as f64;
        // steps 1–2 add into a zeroed gradient; steps 3–4 write every row themselves
        let bwd: [(bool, EmbLaunch); 4] = [
            (true, emb::index_add_rows_f32),
            (true, emb::index_add_rows_warp_f32),
            (false, emb::index_add_rows_sorted_f32),
            (false, emb::index_add_rows_grouped_f32),
        ];
        for (step, (zero, f)) in (1..).zip(bwd) {
            b.row("embedding_bwd", &size, step, bwd_bytes, k, &mut |i| {
                if zero {
                    d.memset_zero(&grads[i])?;
                }
                f(d, p(&outs, i), p(&idx, i), p(&grads, i), tokens, v, dim, pe)
            })?;
        }
    }

    // ---- optimizers over 10M parameters in 10 tensors of 1M (step 1: one launch each),
    // rotated by Adam's footprint (p, g, m, v)
    {
        let sizes = [1_000_000usize; 10];
        let total: usize = sizes.iter().sum();
        let k = sets(16 * total);
        let mut sets_of = Vec::with_capacity(k);
        let mut keep = Vec::new();
        for s in 0..k as u64 {
            let mk = |seed: u64| -> Result<Vec<Buffer>> {
                sizes
                    .iter()
                    .map(|&n| rand_buf(d, n, seed + 100 * s))
                    .collect()
            };
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
                    // the Adam rows' decay (SGD does the same arithmetic at any decay)
                    wd: 0.01,
                    step: 0.0,
                })
                .collect();
            sets_of.push(ts);
            keep.push((ps, gs, ms, vs));
        }
        let tf = total as f64;
        b.row("adam", "10M", 1, 28.0 * tf, k, &mut |i| {
            for t in &sets_of[i] {
                optim::adam_f32(
                    d,
                    t.p,
                    t.g,
                    t.s1,
                    t.s2,
                    t.n,
                    1e-4,
                    0.9,
                    0.999,
                    1e-8,
                    0.01,
                    true,
                    0.1,
                    0.001,
                    Guard::NONE,
                    0.0,
                )?;
            }
            Ok(())
        })?;
        b.row("adam", "10M", 2, 28.0 * tf, k, &mut |i| {
            optim::adam_multi_f32(d, &sets_of[i], 1e-4, 0.9, 0.999, 1e-8, true, Guard::NONE)
        })?;
        // Adam's loads-first kernel is its step 4 (opt-in): at step 3 the backend keeps step 2's
        b.row("adam", "10M", 4, 28.0 * tf, k, &mut |i| {
            optim::adam_multi_loads_first(d, &sets_of[i], 1e-4, 0.9, 0.999, 1e-8, true, Guard::NONE)
        })?;
        b.row("sgd_momentum", "10M", 1, 20.0 * tf, k, &mut |i| {
            for t in &sets_of[i] {
                optim::sgd_f32(d, t.p, t.g, t.s1, t.n, 1e-4, 0.9, 0.0, Guard::NONE)?;
            }
            Ok(())
        })?;
        b.row("sgd_momentum", "10M", 2, 20.0 * tf, k, &mut |i| {
            optim::sgd_multi_f32(d, &sets_of[i], 1e-4, 0.9, Guard::NONE)
        })?;
        b.row("sgd_momentum", "10M", 3, 20.0 * tf, k, &mut |i| {
            optim::sgd_multi_loads_first(d, &sets_of[i], 1e-4, 0.9, Guard::NONE)
        })?;
        // plain SGD (momentum 0: no buffer read or written): p and g read, p written
        b.row("sgd", "10M", 2, 12.0 * tf, k, &mut |i| {
            optim::sgd_multi_f32(d, &sets_of[i], 1e-4, 0.0, Guard::NONE)
        })?;
        b.row("sgd", "10M", 3, 12.0 * tf, k, &mut |i| {
            optim::sgd_multi_loads_first(d, &sets_of[i], 1e-4, 0.0, Guard::NONE)
        })?;
        drop(keep);
    }
    d.synchronize()?;
    Ok(())
}
