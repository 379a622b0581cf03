//! Ladder steps of the memory-bound kernels that promise the *same arithmetic* as the step below
//! them, checked through their launchers: the optimizer updates' step 3 against step 2 (within
//! a few ulp: FMA contraction may differ between inlined copies; and, where step 2 cannot run,
//! pointers not 16-byte aligned, against step 1), LayerNorm backward step 3 against step 2 (the
//! same formula summed in other orders, within rounding), and the forwards' step 4 (softmax, LayerNorm: cache
//! hints only) against step 3. The values themselves are checked against CPU references in
//! camel-core's `memory_ops` tests. Embedding backward's step 3 (tokens grouped by row) is a
//! different algorithm, so it is checked against an f64 CPU reference here, at every size and
//! skew its launcher handles. GPU only: skips without a device.

use camel_cuda::kernels::ladder::Step;
use camel_cuda::kernels::optim::Guard;
use camel_cuda::kernels::{embedding as emb, layernorm as ln, optim};
use camel_cuda::{test_device, CudaDevice, DevPtr};

/// Values in [lo, hi) from a small LCG (no RNG dependency).
fn rand_vec(n: usize, lo: f32, hi: f32, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

fn assert_bits(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            a.to_bits() == b.to_bits(),
            "{what}: element {i}: {a:e} vs {b:e} (bits {:#x} vs {:#x})",
            a.to_bits(),
            b.to_bits()
        );
    }
}

fn assert_near(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= atol + rtol * b.abs(),
            "{what}: element {i}: {a:e} vs {b:e}"
        );
    }
}

/// Tensor sizes of one multi-tensor table: single elements, a float4 tail of 3, exactly one
/// chunk (4096), one chunk and one element, three chunks and a partial one, and a partial one.
const SIZES: [usize; 7] = [1, 7, 4096, 4097, 4096 * 3 + 5, 5000, 2];

/// The optimizer state of one run: per tensor p, g, s1, s2 on the host.
#[derive(Clone)]
struct State {
    p: Vec<Vec<f32>>,
    g: Vec<Vec<f32>>,
    s1: Vec<Vec<f32>>,
    s2: Vec<Vec<f32>>,
}

fn state() -> State {
    state_for(&SIZES)
}

fn state_for(sizes: &[usize]) -> State {
    let mk = |seed: u64, lo: f32, hi: f32| -> Vec<Vec<f32>> {
        sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| rand_vec(n, lo, hi, seed * 100 + k as u64))
            .collect()
    };
    State {
        p: mk(1, -1.0, 1.0),
        g: mk(2, -1.0, 1.0),
        s1: mk(3, -0.5, 0.5),
        s2: mk(4, 0.0, 0.01), // Adam's v ≥ 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// SGD; momentum 0 passes null momentum buffers.
    Sgd {
        momentum: f32,
    },
    Adam {
        decoupled: bool,
    },
}

/// Which kernel runs the update.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Via {
    PerTensor, // step 1
    Multi2,
    Multi3,
}

/// Runs one update of `st` on the GPU and returns the new state. `offset` floats shift every
/// buffer off its allocation's (aligned) start: 1 makes every pointer misaligned for float4.
fn run(dev: &CudaDevice, st: &State, kind: Kind, via: Via, offset: usize) -> State {
    let up = |v: &Vec<f32>| {
        let mut h = vec![0.0f32; offset];
        h.extend_from_slice(v);
        dev.htod(&h).unwrap()
    };
    let bufs: Vec<_> = (0..st.p.len())
        .map(|k| (up(&st.p[k]), up(&st.g[k]), up(&st.s1[k]), up(&st.s2[k])))
        .collect();
    let at = |b: &camel_cuda::Buffer| b.ptr().add::<f32>(offset);
    let (lr, wd) = (0.01f32, 0.1f32);
    let no_momentum = kind == Kind::Sgd { momentum: 0.0 };
    let ts: Vec<optim::MultiTensor> = bufs
        .iter()
        .enumerate()
        .map(|(k, (p, g, s1, s2))| optim::MultiTensor {
            p: at(p),
            g: at(g),
            s1: if no_momentum { DevPtr::NULL } else { at(s1) },
            s2: at(s2),
            n: st.p[k].len(),
            // per-tensor bias corrections (tensor k at step k + 1)
            bc1: 1.0 - 0.9f32.powi(k as i32 + 1),
            bc2: 1.0 - 0.999f32.powi(k as i32 + 1),
            wd,
            step: 0.0,
        })
        .collect();
    let (b1, b2, eps) = (0.9f32, 0.999f32, 1e-8f32);
    match (kind, via) {
        (Kind::Sgd { momentum }, Via::PerTensor) => {
            for t in &ts {
                optim::sgd_f32(dev, t.p, t.g, t.s1, t.n, lr, momentum, wd, Guard::NONE).unwrap();
            }
        }
        (Kind::Sgd { momentum }, Via::Multi2) => {
            optim::sgd_multi_f32(dev, &ts, lr, momentum, Guard::NONE).unwrap()
        }
        (Kind::Sgd { momentum }, Via::Multi3) => {
            optim::sgd_multi_loads_first(dev, &ts, lr, momentum, Guard::NONE).unwrap()
        }
        (Kind::Adam { decoupled }, Via::PerTensor) => {
            for t in &ts {
                optim::adam_f32(
                    dev,
                    t.p,
                    t.g,
                    t.s1,
                    t.s2,
                    t.n,
                    lr,
                    b1,
                    b2,
                    eps,
                    wd,
                    decoupled,
                    t.bc1,
                    t.bc2,
                    Guard::NONE,
                    0.0,
                )
                .unwrap();
            }
        }
        (Kind::Adam { decoupled }, Via::Multi2) => {
            optim::adam_multi_f32(dev, &ts, lr, b1, b2, eps, decoupled, Guard::NONE).unwrap()
        }
        (Kind::Adam { decoupled }, Via::Multi3) => {
            optim::adam_multi_loads_first(dev, &ts, lr, b1, b2, eps, decoupled, Guard::NONE)
                .unwrap()
        }
    }
    let down = |b: &camel_cuda::Buffer, n: usize| -> Vec<f32> {
        dev.dtoh_vec::<f32>(b, offset + n).unwrap()[offset..].to_vec()
    };
    let mut out = st.clone();
    for (k, (p, _, s1, s2)) in bufs.iter().enumerate() {
        let n = st.p[k].len();
        out.p[k] = down(p, n);
        out.s1[k] = down(s1, n);
        out.s2[k] = down(s2, n);
    }
    out
}

const KINDS: [Kind; 4] = [
    Kind::Sgd { momentum: 0.9 },
    Kind::Sgd { momentum: 0.0 },
    Kind::Adam { decoupled: false },
    Kind::Adam { decoupled: true },
];

/// Step 3 against step 2: the same formula, but nvcc may contract a different multiply-add into
/// an FMA in each inlined copy (on the H100 Adam's m differed by 1 ulp in the scalar tail), so
/// within a few ulp rather than bit for bit.
#[test]
fn optimizer_step3_matches_step2() {
    let Some(dev) = test_device() else { return };
    let st = state();
    for kind in KINDS {
        let want = run(&dev, &st, kind, Via::Multi2, 0);
        let got = run(&dev, &st, kind, Via::Multi3, 0);
        for (k, n) in SIZES.iter().enumerate() {
            let what = |b: &str| format!("{kind:?} tensor {k} ({n} elements) {b}");
            assert_near(&what("p"), &got.p[k], &want.p[k], 1e-7, 1e-6);
            // state buffers: untouched by SGD without momentum, so equal to the input too
            assert_near(&what("s1"), &got.s1[k], &want.s1[k], 1e-7, 1e-6);
            assert_near(&what("s2"), &got.s2[k], &want.s2[k], 1e-7, 1e-6);
        }
        if kind == (Kind::Sgd { momentum: 0.0 }) {
            assert_bits(
                "SGD without momentum keeps s1",
                &got.s1.concat(),
                &st.s1.concat(),
            );
        }
    }
}

/// More tensors than one launch's parameter table holds (64): steps 2 and 3 split them over
/// several launches, each numbering its blocks from 0; every tensor must match step 1's
/// one-launch-per-tensor update (empty tensors included, which take no table entry).
#[test]
fn optimizer_multi_tensor_tables_over_several_launches() {
    let Some(dev) = test_device() else { return };
    let sizes: Vec<usize> = (0..150)
        .map(|k| {
            if k % 6 == 3 {
                0
            } else {
                [1, 7, 300, 0, 4097, 33][k % 6] + k
            }
        })
        .collect();
    let st = state_for(&sizes);
    for kind in KINDS {
        let want = run(&dev, &st, kind, Via::PerTensor, 0);
        for via in [Via::Multi2, Via::Multi3] {
            let got = run(&dev, &st, kind, via, 0);
            for (k, n) in sizes.iter().enumerate() {
                let what = |b: &str| format!("{kind:?} {via:?} tensor {k} ({n} elements) {b}");
                assert_near(&what("p"), &got.p[k], &want.p[k], 1e-7, 1e-6);
                assert_near(&what("s1"), &got.s1[k], &want.s1[k], 1e-7, 1e-6);
                assert_near(&what("s2"), &got.s2[k], &want.s2[k], 1e-7, 1e-6);
            }
        }
    }
}

#[test]
fn optimizer_step3_unaligned_pointers_run_scalar() {
    // Pointers one float past an aligned start: step 3 takes its scalar path (step 2's float4
    // would fault), compared with the per-tensor step 1 (the same formulas).
    let Some(dev) = test_device() else { return };
    let st = state();
    for kind in KINDS {
        let want = run(&dev, &st, kind, Via::PerTensor, 1);
        let got = run(&dev, &st, kind, Via::Multi3, 1);
        for (k, n) in SIZES.iter().enumerate() {
            let what = |b: &str| format!("{kind:?} tensor {k} ({n} elements) {b}");
            assert_near(&what("p"), &got.p[k], &want.p[k], 1e-6, 1e-5);
            assert_near(&what("s1"), &got.s1[k], &want.s1[k], 1e-6, 1e-5);
            assert_near(&what("s2"), &got.s2[k], &want.s2[k], 1e-6, 1e-5);
        }
    }
}

/// LayerNorm backward of `[rows, cols]` by step 3 (or step 2): `(dx, dγ, dβ)`.
fn ln_bwd(dev: &CudaDevice, rows: usize, cols: usize, step: Step) -> [Vec<f32>; 3] {
    let seed = (rows * 31 + cols) as u64;
    let x = dev.htod(&rand_vec(rows * cols, -2.0, 2.0, seed)).unwrap();
    let g = dev
        .htod(&rand_vec(rows * cols, -1.0, 1.0, seed ^ 1))
        .unwrap();
    let gamma = dev.htod(&rand_vec(cols, 0.5, 1.5, seed ^ 2)).unwrap();
    let beta = dev.htod(&rand_vec(cols, -1.0, 1.0, seed ^ 3)).unwrap();
    let y = dev.alloc((rows * cols).max(1) * 4).unwrap();
    let mean = dev.alloc(rows.max(1) * 4).unwrap();
    let rstd = dev.alloc(rows.max(1) * 4).unwrap();
    let dx = dev.alloc((rows * cols).max(1) * 4).unwrap();
    let dg = dev.alloc(cols * 4).unwrap();
    let db = dev.alloc(cols * 4).unwrap();
    let (px, pg, pw, pb) = (x.ptr(), g.ptr(), gamma.ptr(), beta.ptr());
    let (py, pm, pr, pd, pdg, pdb) = (
        y.ptr(),
        mean.ptr(),
        rstd.ptr(),
        dx.ptr(),
        dg.ptr(),
        db.ptr(),
    );
    ln::row_registers(dev, px, pw, pb, py, pm, pr, rows, cols, 1e-5).unwrap();
    (ln::at(step).backward)(dev, px, pw, pg, pm, pr, pd, pdg, pdb, rows, cols).unwrap();
    [
        dev.dtoh_vec::<f32>(&dx, rows * cols).unwrap(),
        dev.dtoh_vec::<f32>(&dg, cols).unwrap(),
        dev.dtoh_vec::<f32>(&db, cols).unwrap(),
    ]
}

#[test]
fn layernorm_backward_step3_matches_step2() {
    // Step 3 (the row and each lane's dγ/dβ in registers, the block's warps added from their
    // own shared-memory slices) against step 2 (shared-memory sums per row): the same formula,
    // summed in other orders. Every register shape of step 3 (float4 and scalar rows up to 1024
    // columns), 1025 (both run step 2), few rows (fewer than a block's warps), 3001 rows (every
    // warp visits several rows, every warp of a block adds a slice) and no rows at all.
    layernorm_backward_matches_step2(Step::Three);
}

#[test]
fn layernorm_backward_step4_matches_step2() {
    // Step 4 (a pair of warps per row, the row's sums met behind a named barrier, γ in
    // registers) on the same cases, which hold every register shape of step 4 too (64 threads
    // a row: 1 to 4 float4 or 1 to 16 scalars a thread), rows fewer than a block's pairs, and
    // 3001 rows (every pair visits several rows, both parities of the exchange buffer in use).
    layernorm_backward_matches_step2(Step::Four);
}

fn layernorm_backward_matches_step2(step: Step) {
    let Some(dev) = test_device() else { return };
    let cases = [
        1usize, 4, 7, 33, 100, 101, 128, 129, 132, 257, 384, 513, 640, 768, 1023, 1024, 1025,
    ]
    .map(|c| (37usize, c))
    .into_iter()
    .chain([
        (3001, 768),
        (3001, 1024),
        (3001, 100),
        (3001, 33),
        (3, 768),
        (0, 64),
        (1, 1),
    ]);
    for (rows, cols) in cases {
        let [dx2, dg2, db2] = ln_bwd(&dev, rows, cols, Step::Two);
        let [dx3, dg3, db3] = ln_bwd(&dev, rows, cols, step);
        let what = |b: &str| {
            let n = step.number();
            format!("layernorm backward step {n} [{rows}, {cols}] {b}")
        };
        // dx: two row sums over `cols` terms; dγ, dβ: sums over `rows` terms
        assert_near(&what("dx"), &dx3, &dx2, 1e-5 * (cols as f32).sqrt(), 1e-4);
        let tol = 1e-5 * (rows.max(1) as f32).sqrt();
        assert_near(&what("dgamma"), &dg3, &dg2, tol, 1e-4);
        assert_near(&what("dbeta"), &db3, &db2, tol, 1e-4);
        // the column sum (in the kernel when the grid is all resident: its counters must come
        // back to zero) gives the same bits on a second run
        let [dx3b, dg3b, db3b] = ln_bwd(&dev, rows, cols, step);
        assert_bits(&what("dx, second run"), &dx3b, &dx3);
        assert_bits(&what("dgamma, second run"), &dg3b, &dg3);
        assert_bits(&what("dbeta, second run"), &db3b, &db3);
    }
}

#[test]
fn forward_step4_is_step3_bit_for_bit() {
    // Softmax / log-softmax and LayerNorm forward step 4 add cache hints only: every shape
    // family (groups of 1 … 32 lanes, warp rows, block rows, past the registers), float4 and
    // scalar.
    use camel_cuda::kernels::softmax;
    let Some(dev) = test_device() else { return };
    for (rows, cols) in [
        (37usize, 1usize),
        (37, 7),
        (37, 65),
        (37, 100),
        (37, 768),
        (37, 1000),
        (37, 1024),
        (9, 4097),
        (5, 16384),
        (3, 16385),
    ] {
        let x = dev
            .htod(&rand_vec(rows * cols, -4.0, 4.0, (rows * cols) as u64))
            .unwrap();
        let y3 = dev.alloc(rows * cols * 4).unwrap();
        let y4 = dev.alloc(rows * cols * 4).unwrap();
        for log in [false, true] {
            softmax::warp_registers(&dev, x.ptr(), y3.ptr(), rows, cols, log).unwrap();
            softmax::streaming(&dev, x.ptr(), y4.ptr(), rows, cols, log).unwrap();
            assert_bits(
                &format!("softmax [{rows}, {cols}] log {log}"),
                &dev.dtoh_vec::<f32>(&y4, rows * cols).unwrap(),
                &dev.dtoh_vec::<f32>(&y3, rows * cols).unwrap(),
            );
        }
        let gamma = dev.htod(&rand_vec(cols, 0.5, 1.5, 5)).unwrap();
        let beta = dev.htod(&rand_vec(cols, -1.0, 1.0, 6)).unwrap();
        let stats: Vec<_> = (0..4).map(|_| dev.alloc(rows * 4).unwrap()).collect();
        let (pw, pb) = (gamma.ptr(), beta.ptr());
        ln::row_registers(
            &dev,
            x.ptr(),
            pw,
            pb,
            y3.ptr(),
            stats[0].ptr(),
            stats[1].ptr(),
            rows,
            cols,
            1e-5,
        )
        .unwrap();
        ln::streaming(
            &dev,
            x.ptr(),
            pw,
            pb,
            y4.ptr(),
            stats[2].ptr(),
            stats[3].ptr(),
            rows,
            cols,
            1e-5,
        )
        .unwrap();
        let what = format!("layernorm [{rows}, {cols}]");
        assert_bits(
            &what,
            &dev.dtoh_vec::<f32>(&y4, rows * cols).unwrap(),
            &dev.dtoh_vec::<f32>(&y3, rows * cols).unwrap(),
        );
        for k in 0..2 {
            assert_bits(
                &format!("{what} stats {k}"),
                &dev.dtoh_vec::<f32>(&stats[2 + k], rows).unwrap(),
                &dev.dtoh_vec::<f32>(&stats[k], rows).unwrap(),
            );
        }
    }
}

/// Embedding backward steps 3 (count, scan, fill, zero, gather) and 4 (the grouping in one
/// launch, a gather that stores each short group's row once) against an f64 reference: rows of
/// 1, 7, 33, 768 and 1000 (float4 and scalar gathers, and a misaligned upstream gradient that
/// forces the scalar one), empty rows, repeated indices, a skewed index (most tokens on one
/// row, spread over many chunks and summed atomically), groups of exactly 128 and 129 tokens
/// (step 4's bound between a stored and an atomically added row), bad indices (skipped and
/// recorded), a table of several scan tiles, and (step 4) more tiles and more tokens than its
/// resident grid holds in one pass (the ranks past the registers).
/// The output is poisoned with NaN: every row must be written. Step 4 runs the cases one after
/// another on the device's shared zero counters, so a launch that left them dirty fails the next.
#[test]
fn embedding_backward_step3_grouped_by_row() {
    embedding_backward_grouped(3);
}

#[test]
fn embedding_backward_step4_one_launch_grouping() {
    embedding_backward_grouped(4);
}

fn embedding_backward_grouped(step: usize) {
    let Some(dev) = test_device() else { return };
    let launch = match step {
        3 => emb::index_add_rows_sorted_f32,
        _ => emb::index_add_rows_grouped_f32,
    };
    let mut seed = 70u64;
    let mut lcg = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    for (n, v, d, skew, bad, g_off) in [
        (1usize, 1usize, 1usize, false, false, 0usize),
        (37, 5, 7, false, false, 0),
        (1000, 1000, 33, false, false, 0),
        (4000, 300, 768, true, false, 0),
        (3001, 64, 1000, false, true, 0),
        (2048, 4096, 768, false, false, 1), // most rows empty; g misaligned: scalar gather
        (0, 3, 4, false, false, 0),         // no tokens: the whole gradient is zeros
        (20000, 10001, 4, false, false, 0), // the scan over several 4096-row tiles
        (257, 2, 7, false, false, 0),       // groups of 128 (stored) and 129 (added) tokens
        (300, 40, 12, false, false, 0),     // ... at rows 0 and 1, then a few short groups
        // more tiles (700 of 1024 rows) and tokens (2.1 per thread) than a resident grid of
        // 132 SMs × 5 blocks holds: tiles and ranks past one pass
        (1_400_000, 716_801, 1, false, false, 0),
    ] {
        let mut idx: Vec<i64> = (0..n)
            .map(|i| {
                if skew && i % 4 != 0 {
                    (v / 2) as i64
                } else if (n, v) == (257, 2) {
                    (i % 2) as i64 // 129 × row 0, 128 × row 1
                } else if (n, v) == (300, 40) && i < 257 {
                    (i / 129) as i64 // 129 × row 0, 128 × row 1, shuffled below
                } else {
                    (lcg() % v) as i64
                }
            })
            .collect();
        if (n, v) == (300, 40) {
            for i in (1..n).rev() {
                idx.swap(i, lcg() % (i + 1));
            }
        }
        if bad {
            idx[n / 2] = -1;
            idx[n - 1] = v as i64;
        }
        let g = rand_vec(n * d + g_off, -1.0, 1.0, (n * d) as u64);
        let mut want = vec![0.0f64; v * d];
        for (i, &r) in idx.iter().enumerate() {
            if (0..v as i64).contains(&r) {
                for c in 0..d {
                    want[r as usize * d + c] += g[g_off + i * d + c] as f64;
                }
            }
        }
        let dg = dev.htod(&g).unwrap();
        let di = dev.htod(&idx).unwrap();
        let dout = dev.htod(&vec![f32::NAN; v * d]).unwrap();
        let err = dev.htod(&[0i64; 4]).unwrap();
        let gp = DevPtr(dg.ptr().0 + 4 * g_off as u64);
        launch(&dev, gp, di.ptr(), dout.ptr(), n, v, d, err.ptr()).unwrap();
        let got: Vec<f32> = dev.dtoh_vec(&dout, v * d).unwrap();
        for (k, (&a, &b)) in got.iter().zip(&want).enumerate() {
            // f32 sums of up to n terms in an order the atomics choose
            let tol = 1e-5 * (n as f64).sqrt().max(1.0) * 4.0;
            assert!(
                (a as f64 - b).abs() <= tol,
                "step {step}, n={n} v={v} d={d} skew={skew}: element {k} (row {}): got {a}, want {b}",
                k / d
            );
        }
        let e: Vec<i64> = dev.dtoh_vec(&err, 4).unwrap();
        if bad {
            assert_eq!(e[0], 1, "n={n}: a bad index must be recorded");
            assert!(e[2] == -1 || e[2] == v as i64, "recorded index {}", e[2]);
            assert_eq!(e[3], v as i64);
        } else {
            assert_eq!(e[0], 0, "n={n} v={v} d={d}: no index error expected");
        }
    }
}

/// Steps 3 and 4 of the embedding backward refuse token or row counts their int32 offsets
/// cannot hold, before touching any memory (the pointers here are null), with an error naming
/// the step and the counts.
#[test]
fn embedding_backward_grouped_refuses_int32_overflow() {
    let Some(dev) = test_device() else { return };
    let big = i32::MAX as usize;
    for (step, launch) in [
        (
            3,
            emb::index_add_rows_sorted_f32 as fn(_, _, _, _, _, _, _, _) -> _,
        ),
        (4, emb::index_add_rows_grouped_f32),
    ] {
        for (n, v) in [(big, 10usize), (10, big)] {
            let e = launch(
                &dev,
                DevPtr::NULL,
                DevPtr::NULL,
                DevPtr::NULL,
                n,
                v,
                4,
                DevPtr::NULL,
            )
            .expect_err("an int32 overflow must be refused");
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("step {step}")) && msg.contains(&n.to_string()),
                "step {step}, n={n} v={v}: {msg}"
            );
        }
    }
    dev.synchronize().unwrap();
}

#[test]
fn block_rows_past_65535() {
    // "One block per row" kernels with more rows than 65535: the grid is 1-D (rows_grid) and
    // every row must still be computed exactly once. 65537 rows of 1028 columns (float4, a block
    // per row): the last-dim sum and max of reduce steps 1–3 and softmax steps 1–3 (step 3's
    // block rows), each output poisoned with NaN first, against f64 on the host.
    use camel_cuda::kernels::{elementwise as ew, reduce, softmax};
    let Some(dev) = test_device() else { return };
    let (rows, cols) = (65_537usize, 1028usize);
    let xs = rand_vec(rows * cols, -1.0, 1.0, 65_537);
    let x = dev.htod(&xs).unwrap();
    let y = dev.alloc(rows * cols * 4).unwrap();
    let (px, py) = (x.ptr(), y.ptr());
    let sum: Vec<f32> = xs
        .chunks(cols)
        .map(|r| r.iter().map(|&v| v as f64).sum::<f64>() as f32)
        .collect();
    let max: Vec<f32> = xs
        .chunks(cols)
        .map(|r| r.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)))
        .collect();
    type Reduce =
        fn(&CudaDevice, DevPtr, DevPtr, usize, usize, usize, i32) -> camel_cuda::Result<()>;
    let steps: [(&str, Reduce); 3] = [
        ("reduce step 1", reduce::block_per_output),
        ("reduce step 2", reduce::warp_shuffle),
        ("reduce step 3", reduce::loads_in_flight),
    ];
    for (name, f) in steps {
        for (op, want) in [(0, &sum), (1, &max)] {
            ew::fill_f32(&dev, py, rows, f32::NAN).unwrap();
            f(&dev, px, py, rows, cols, 1, op).unwrap();
            let got = dev.dtoh_vec::<f32>(&y, rows).unwrap();
            let what = format!("{name}, op {op}, [{rows}, {cols}]");
            assert_near(&what, &got, want, 1e-4, 1e-4);
        }
    }
    // softmax: the reference for every row, checked in full
    let mut want = Vec::with_capacity(rows * cols);
    for r in xs.chunks(cols) {
        let m = r.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        let s: f64 = r.iter().map(|&v| (v as f64 - m).exp()).sum();
        want.extend(r.iter().map(|&v| ((v as f64 - m).exp() / s) as f32));
    }
    type Softmax = fn(&CudaDevice, DevPtr, DevPtr, usize, usize, bool) -> camel_cuda::Result<()>;
    let steps: [(&str, Softmax); 3] = [
        ("softmax step 1", softmax::block_per_row),
        ("softmax step 2", softmax::online_warp),
        ("softmax step 3", softmax::warp_registers),
    ];
    for (name, f) in steps {
        ew::fill_f32(&dev, py, rows * cols, f32::NAN).unwrap();
        f(&dev, px, py, rows, cols, false).unwrap();
        let got = dev.dtoh_vec::<f32>(&y, rows * cols).unwrap();
        assert_near(
            &format!("{name}, [{rows}, {cols}]"),
            &got,
            &want,
            1e-7,
            1e-4,
        );
    }
}

/// The 16-bit elementwise ops and casts move eight elements a thread when every pointer is
/// 16-byte aligned and one a thread otherwise: the same f32 arithmetic rounded once, so the two
/// paths agree bit for bit. Buffers that start one element past an aligned address take the
/// second path.
#[test]
fn half_vec8_and_scalar_paths_agree_bit_for_bit() {
    use camel_cuda::kernels::elementwise as ew;
    use camel_cuda::kernels::shape::{cast, Elem};
    let Some(dev) = test_device() else { return };
    for elem in [Elem::F16, Elem::BF16] {
        let other = if elem == Elem::F16 {
            Elem::BF16
        } else {
            Elem::F16
        };
        for n in [1usize, 7, 8, 9, 1031, (1 << 20) + 3] {
            let to16 = |v: &[f32]| -> Vec<u16> {
                v.iter()
                    .map(|&x| match elem {
                        Elem::F16 => half::f16::from_f32(x).to_bits(),
                        _ => half::bf16::from_f32(x).to_bits(),
                    })
                    .collect()
            };
            let (a, b) = (
                to16(&rand_vec(n, -3.0, 3.0, n as u64)),
                to16(&rand_vec(n, 0.5, 2.0, 2 * n as u64)),
            );
            // the data at element `off` of each buffer: 0 is aligned, 1 is not
            let run = |off: usize, what: &str| -> Vec<u16> {
                let pad = |v: &[u16]| -> Vec<u16> {
                    let mut p = vec![0u16; off];
                    p.extend_from_slice(v);
                    p
                };
                let (da, db) = (dev.htod(&pad(&a)).unwrap(), dev.htod(&pad(&b)).unwrap());
                let (out, tmp) = (
                    dev.alloc(2 * (n + off)).unwrap(),
                    dev.alloc(2 * (n + off)).unwrap(),
                );
                let at = |buf: &camel_cuda::Buffer| buf.ptr().add::<u16>(off);
                match what {
                    "gelu" => ew::unary_half(&dev, elem, at(&da), at(&out), n, 4, 0.0),
                    "div" => ew::binary_half(&dev, elem, at(&da), at(&db), at(&out), n, 3),
                    _ => cast(&dev, at(&da), at(&tmp), n, elem, other)
                        .and_then(|_| cast(&dev, at(&tmp), at(&out), n, other, elem)),
                }
                .unwrap();
                let v: Vec<u16> = dev.dtoh_vec(&out, n + off).unwrap();
                v[off..].to_vec()
            };
            for what in ["gelu", "div", "cast there and back"] {
                assert_eq!(run(0, what), run(1, what), "{elem:?} {what} n={n}");
            }
        }
    }
}

/// The MSE's kernels read four elements a load where every pointer is aligned to four elements
/// and one otherwise (buffers that start one element in). Both forwards' partial sums add up to
/// the f64 sum of the squared differences within the f32 sums' rounding, and the two backwards,
/// the same arithmetic element by element, agree bit for bit.
#[test]
fn mse_vec_and_scalar_paths() {
    use camel_cuda::kernels::loss;
    use camel_cuda::kernels::shape::Elem;
    let Some(dev) = test_device() else { return };
    for elem in [Elem::F32, Elem::F16, Elem::BF16] {
        let esz = elem.bytes();
        // a value's bits in `elem` (little-endian bytes) and the value those bits hold
        let enc = |v: &[f32]| -> (Vec<u8>, Vec<f64>) {
            let mut bytes = Vec::with_capacity(v.len() * esz);
            let mut vals = Vec::with_capacity(v.len());
            for &x in v {
                match elem {
                    Elem::F16 => {
                        let h = half::f16::from_f32(x);
                        bytes.extend(h.to_bits().to_le_bytes());
                        vals.push(h.to_f64());
                    }
                    Elem::BF16 => {
                        let h = half::bf16::from_f32(x);
                        bytes.extend(h.to_bits().to_le_bytes());
                        vals.push(h.to_f64());
                    }
                    _ => {
                        bytes.extend(x.to_le_bytes());
                        vals.push(x as f64);
                    }
                }
            }
            (bytes, vals)
        };
        for n in [1usize, 7, 1031, 200_003] {
            let (ab, av) = enc(&rand_vec(n, -3.0, 3.0, n as u64));
            let (bb, bv) = enc(&rand_vec(n, -3.0, 3.0, 7 + n as u64));
            let want: f64 = av.iter().zip(&bv).map(|(x, y)| (x - y) * (x - y)).sum();
            let run = |off: usize| -> (f64, Vec<u8>) {
                let pad = |v: &[u8]| -> Vec<u8> {
                    let mut p = vec![0u8; off * esz];
                    p.extend_from_slice(v);
                    p
                };
                let (da, db) = (dev.htod(&pad(&ab)).unwrap(), dev.htod(&pad(&bb)).unwrap());
                let parts = loss::mse_blocks(&dev, n);
                let part = dev.alloc(4 * parts).unwrap();
                let g = dev.htod(&[1.5f32]).unwrap();
                let ga = dev.htod(&vec![0xffu8; esz * (n + off)]).unwrap(); // poisoned: NaN
                let at = |b: &camel_cuda::Buffer| b.ptr().byte_add(off * esz);
                loss::mse_partial(&dev, [at(&da), at(&db), part.ptr()], n, elem).unwrap();
                let ptrs = [at(&da), at(&db), g.ptr(), at(&ga), DevPtr::NULL];
                loss::mse_bwd(&dev, ptrs, n, 0.25, elem).unwrap();
                let p: Vec<f32> = dev.dtoh_vec(&part, parts).unwrap();
                let gv: Vec<u8> = dev.dtoh_vec(&ga, esz * (n + off)).unwrap();
                (p.iter().map(|&x| x as f64).sum(), gv[off * esz..].to_vec())
            };
            let ((s0, g0), (s1, g1)) = (run(0), run(1));
            let tol = n as f64 * 2f64.powi(-23) * want + 1e-30;
            for (what, s) in [("aligned", s0), ("one element in", s1)] {
                assert!(
                    (s - want).abs() <= tol,
                    "{elem:?} n={n} {what}: Σ partials {s} vs {want}"
                );
            }
            assert_eq!(g0, g1, "{elem:?} n={n}: the gradients of the two paths");
            // and the gradient is (0.25 · 1.5) · (a − b) in f32, rounded once to the dtype
            let d: Vec<f32> = av
                .iter()
                .zip(&bv)
                .map(|(&x, &y)| 0.375f32 * (x as f32 - y as f32))
                .collect();
            let (gw, _) = enc(&d);
            assert_eq!(g0, gw, "{elem:?} n={n}: the gradient");
        }
    }
}
