//! The memory-bound ops on awkward sizes — rows of 1, 7, 33, 65, 1000 and 4097
//! columns, which cross every kernel choice (warp per row ≤ 1024 < block per row; float4 when
//! the length is a multiple of 4, scalar else; the two-pass split reduction for few long rows;
//! softmax step 3's groups of 1 … 16 lanes packing several short rows per warp) —
//! against plain-f64 references and, on a GPU, against the CPU. Plus: LayerNorm (values,
//! gradcheck), fused softmax / cross-entropy backward, GELU backward, embedding backward with
//! repeated indices, ±1e4 logits, and the multi-tensor optimizer step.
//!
//! On a GPU every test runs at every step of its ladder families (the tables of
//! `camel_cuda::kernels::ladder`), in this one process: [`every_step`] selects each step on the
//! test's thread, runs the family's default step again with programmatic dependent launch off,
//! and LayerNorm's steps also with the separate column-sum kernel of the backward.

mod common;
use camel_core::backend::ladder::{Family, Step};
use camel_core::config::{self, Experiments};
use camel_core::{Tensor, UpdateRule};
use common::*;

/// Runs `body` at every step of every family in `families` when a GPU answers (the CPU ignores
/// the selection, so without one it runs once), then at the defaults with programmatic dependent
/// launch off; LayerNorm's steps that sum dγ/dβ in the kernel run again with the separate
/// column-sum kernel.
fn every_step(families: &[Family], body: fn()) {
    if camel_core::testing::gpu().is_none() {
        body();
        return;
    }
    for &family in families {
        camel_core::testing::for_each_step(family, |_| body());
        if family == Family::LayerNorm {
            let unfused = Experiments {
                layernorm_fused_colsum: false,
                ..Experiments::default()
            };
            for step in [Step::Three, Step::Four] {
                config::with_scoped_experiments(unfused.clone(), || {
                    config::with_step(family, step, body)
                });
            }
        }
    }
    let plain = Experiments {
        pdl: false,
        ..Experiments::default()
    };
    config::with_scoped_experiments(plain, body);
}

const COLS: [usize; 6] = [1, 7, 33, 65, 1000, 4097];
const ROWS: [usize; 3] = [1, 7, 33];

/// Reductions and softmax-like ops accumulate in f32 over up to 4097 terms.
const ROWTOL: Tol = Tol {
    atol: 1e-5,
    rtol: 2e-4,
};

fn ref_ln(x: &[f32], g: &[f32], b: &[f32], cols: usize, eps: f64) -> Vec<f64> {
    let mut out = Vec::new();
    for row in x.chunks(cols) {
        let mu = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
        let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / cols as f64;
        for (c, &v) in row.iter().enumerate() {
            out.push((v as f64 - mu) / (var + eps).sqrt() * g[c] as f64 + b[c] as f64);
        }
    }
    out
}

#[test]
fn layer_norm_matches_reference() {
    every_step(
        &[Family::LayerNorm],
        layer_norm_matches_reference_at_one_step,
    );
}

fn layer_norm_matches_reference_at_one_step() {
    // plus the lengths around the register-resident step 3's shapes (a warp per row, ≤ 1024)
    let cases = ROWS
        .iter()
        .flat_map(|&r| COLS.iter().map(move |&c| (r, c)))
        .chain([96, 768, 1024, 1025].map(|c| (9, c)));
    for (rows, cols) in cases {
        {
            let seed = (rows * 10_000 + cols) as u64;
            // an offset mean checks the variance is computed about the mean (Welford)
            let x: Vec<f32> = rand_vec(rows * cols, -2.0, 2.0, seed)
                .iter()
                .map(|v| v + 100.0)
                .collect();
            let g = rand_vec(cols, 0.5, 1.5, seed ^ 1);
            let b = rand_vec(cols, -1.0, 1.0, seed ^ 2);
            let want = ref_ln(&x, &g, &b, cols, 1e-5);
            let tol = Tol {
                atol: 2e-4,
                rtol: 1e-3,
            };
            check(
                &format!("layer_norm [{rows},{cols}]"),
                &[rows, cols],
                &want,
                tol,
                |d| {
                    t(&x, &[rows, cols], d).layer_norm(&t(&g, &[cols], d), &t(&b, &[cols], d), 1e-5)
                },
            );
        }
    }
}

#[test]
fn layer_norm_gradcheck() {
    every_step(&[Family::LayerNorm], layer_norm_gradcheck_at_one_step);
}

fn layer_norm_gradcheck_at_one_step() {
    for (rows, cols) in [(1, 1), (2, 3), (3, 7), (2, 8)] {
        let ins = [
            hf(
                rand_vec(rows * cols, -2.0, 2.0, 7 + cols as u64),
                &[rows, cols],
            ),
            hf(rand_vec(cols, 0.5, 1.5, 8), &[cols]),
            hf(rand_vec(cols, -1.0, 1.0, 9), &[cols]),
        ];
        gradcheck_all(
            &format!("layer_norm [{rows},{cols}]"),
            |a| a[0].layer_norm(&a[1], &a[2], 1e-5),
            &ins,
        );
    }
}

/// Analytic gradients of `Σ w ⊙ f(inputs)` (fixed random weights) on every device, compared
/// with the CPU's; for the large shapes gradcheck would be too slow.
fn grads_match(
    what: &str,
    f: impl Fn(&[Tensor]) -> camel_core::Result<Tensor>,
    ins: &[Host],
    n_out: usize,
    tol: Tol,
) {
    let w = rand_vec(n_out, -1.0, 1.0, 4242);
    let run = |dev| -> Vec<Option<Vec<f32>>> {
        let leaves: Vec<Tensor> = ins
            .iter()
            .map(|h| match h {
                Host::F32(..) => h.on(dev).requires_grad_(true).unwrap(),
                Host::I64(..) => h.on(dev),
            })
            .collect();
        let out = f(&leaves).unwrap();
        let wt = t(&w, out.shape(), dev);
        out.mul(&wt).unwrap().sum().unwrap().backward().unwrap();
        leaves
            .iter()
            .map(|l| l.grad().map(|g| g.to_vec().unwrap()))
            .collect()
    };
    let cpu = run(camel_core::Device::Cpu);
    for g in cpu.iter().flatten() {
        assert!(
            g.iter().all(|v| v.is_finite()),
            "{what}: non-finite CPU grad"
        );
    }
    for dev in devices().into_iter().filter(|d| d.is_cuda()) {
        let got = run(dev);
        for (i, (c, g)) in cpu.iter().zip(&got).enumerate() {
            if let (Some(c), Some(g)) = (c, g) {
                assert_close(&format!("{what}: grad {i} {dev} vs cpu"), g, &f64s(c), tol);
            }
        }
    }
}

#[test]
fn layer_norm_backward_large_rows() {
    every_step(
        &[Family::LayerNorm],
        layer_norm_backward_large_rows_at_one_step,
    );
}

fn layer_norm_backward_large_rows_at_one_step() {
    for &rows in &ROWS {
        for &cols in &COLS {
            let seed = (rows * 7 + cols) as u64;
            let ins = [
                hf(rand_vec(rows * cols, -2.0, 2.0, seed), &[rows, cols]),
                hf(rand_vec(cols, 0.5, 1.5, seed ^ 3), &[cols]),
                hf(rand_vec(cols, -1.0, 1.0, seed ^ 4), &[cols]),
            ];
            let tol = Tol {
                atol: 1e-4,
                rtol: 2e-3,
            };
            grads_match(
                &format!("layer_norm [{rows},{cols}]"),
                |a| a[0].layer_norm(&a[1], &a[2], 1e-5),
                &ins,
                rows * cols,
                tol,
            );
        }
    }
}

#[test]
fn layer_norm_backward_step3_shapes() {
    every_step(
        &[Family::LayerNorm],
        layer_norm_backward_step3_shapes_at_one_step,
    );
}

fn layer_norm_backward_step3_shapes_at_one_step() {
    // LayerNorm backward step 3 picks (VEC, NV) from the row length (a warp per row ≤ 1024,
    // float4 when cols % 4 == 0) and walks rows grid-stride, keeping dγ/dβ in registers: lengths
    // around its register shapes, and 3001 rows so every warp visits several rows (at most
    // 4 blocks × 8 warps per SM) and the partial rows of dγ/dβ are many.
    let cases = [37usize, 129, 132, 513, 640, 1023, 1024, 1025]
        .map(|c| (37usize, c))
        .into_iter()
        .chain([(3001, 768), (3001, 100), (3001, 33)]);
    for (rows, cols) in cases {
        let seed = (rows * 13 + cols) as u64;
        let ins = [
            hf(rand_vec(rows * cols, -2.0, 2.0, seed), &[rows, cols]),
            hf(rand_vec(cols, 0.5, 1.5, seed ^ 3), &[cols]),
            hf(rand_vec(cols, -1.0, 1.0, seed ^ 4), &[cols]),
        ];
        // dγ, dβ sum over up to 3001 rows of f32 terms
        let tol = Tol {
            atol: 1e-4 * (rows as f64).sqrt(),
            rtol: 2e-3,
        };
        grads_match(
            &format!("layer_norm [{rows},{cols}]"),
            |a| a[0].layer_norm(&a[1], &a[2], 1e-5),
            &ins,
            rows * cols,
            tol,
        );
    }
}

fn ref_softmax_rows(x: &[f32], cols: usize, log: bool) -> Vec<f64> {
    let mut out = Vec::new();
    for row in x.chunks(cols) {
        let mx = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let s: f64 = row.iter().map(|&v| (v as f64 - mx).exp()).sum();
        for &v in row {
            let v = v as f64;
            out.push(if log {
                v - mx - s.ln()
            } else {
                (v - mx).exp() / s
            });
        }
    }
    out
}

#[test]
fn softmax_rows_of_every_length() {
    every_step(&[Family::Softmax], softmax_rows_of_every_length_at_one_step);
}

fn softmax_rows_of_every_length_at_one_step() {
    for &rows in &ROWS {
        for &cols in &COLS {
            let x = rand_vec(rows * cols, -10.0, 10.0, (rows + cols) as u64);
            for log in [false, true] {
                check(
                    &format!("softmax(log={log}) [{rows},{cols}]"),
                    &[rows, cols],
                    &ref_softmax_rows(&x, cols, log),
                    ROWTOL,
                    |d| {
                        let xt = t(&x, &[rows, cols], d);
                        if log {
                            xt.log_softmax()
                        } else {
                            xt.softmax()
                        }
                    },
                );
                let ins = [hf(x.clone(), &[rows, cols])];
                grads_match(
                    &format!("softmax(log={log}) backward [{rows},{cols}]"),
                    |a| {
                        if log {
                            a[0].log_softmax()
                        } else {
                            a[0].softmax()
                        }
                    },
                    &ins,
                    rows * cols,
                    Tol {
                        atol: 1e-5,
                        rtol: 1e-3,
                    },
                );
            }
        }
    }
}

/// Softmax and log-softmax of `x` (`rows` × `cols`) against f64 on every device, and their
/// backward against the CPU's.
fn softmax_and_grads_match(x: &[f32], rows: usize, cols: usize) {
    for log in [false, true] {
        let f = |xt: &Tensor| {
            if log {
                xt.log_softmax()
            } else {
                xt.softmax()
            }
        };
        check(
            &format!("softmax(log={log}) [{rows},{cols}]"),
            &[rows, cols],
            &ref_softmax_rows(x, cols, log),
            ROWTOL,
            |d| f(&t(x, &[rows, cols], d)),
        );
        grads_match(
            &format!("softmax(log={log}) backward [{rows},{cols}]"),
            |a| f(&a[0]),
            &[hf(x.to_vec(), &[rows, cols])],
            rows * cols,
            Tol {
                atol: 1e-5,
                rtol: 1e-3,
            },
        );
    }
}

#[test]
fn softmax_every_step3_shape() {
    every_step(&[Family::Softmax], softmax_every_step3_shape_at_one_step);
}

fn softmax_every_step3_shape_at_one_step() {
    // Softmax step 3 (forward and backward) picks its lane group and register count from the
    // row length: lengths on each side of its boundaries (groups of 1 … 16 lanes, a warp, a
    // block of 128 … 1024, past 16384 step 2), float4 and scalar, 37 rows so the last block is
    // partly empty.
    let rows = 37;
    for cols in [
        2usize, 8, 31, 64, 65, 127, 128, 129, 513, 1024, 1025, 4096, 16384, 16385,
    ] {
        let x = rand_vec(rows * cols, -20.0, 20.0, cols as u64);
        softmax_and_grads_match(&x, rows, cols);
    }
}

#[test]
fn softmax_and_cross_entropy_every_short_row_shape() {
    every_step(
        &[Family::Softmax, Family::CrossEntropy],
        softmax_and_cross_entropy_every_short_row_shape_at_one_step,
    );
}

fn softmax_and_cross_entropy_every_short_row_shape_at_one_step() {
    // Short rows (fewer than 128 floats, or 128 float4s) get a lane group of 1 … 16 and exactly
    // as many slots a lane as the row needs (`softmax3_shape`): every length from 1 to 128
    // columns and every multiple of 4 up to 516 reaches each (G, VEC, NV) that softmax step 3 and
    // cross-entropy steps 3–4 instantiate, with padding in the last slot of every width. Forward,
    // backward and the mean loss against f64, 21 rows (the last block partly empty).
    let rows = 21;
    for cols in (1usize..=128).chain((132..=516).step_by(4)) {
        let x = rand_vec(rows * cols, -9.0, 9.0, 1000 + cols as u64);
        softmax_and_grads_match(&x, rows, cols);
        let tg = rand_idx(rows, cols, 77 + cols as u64);
        ce_mean_matches(&x, &tg, rows, cols);
        grads_match(
            &format!("cross_entropy backward [{rows},{cols}]"),
            |a| a[0].cross_entropy(&a[1]),
            &[hf(x.clone(), &[rows, cols]), hi(tg.clone(), &[rows])],
            1,
            Tol {
                atol: 1e-6,
                rtol: 1e-3,
            },
        );
    }
}

#[test]
fn softmax_huge_logits_long_rows() {
    every_step(
        &[Family::Softmax, Family::CrossEntropy],
        softmax_huge_logits_long_rows_at_one_step,
    );
}

fn softmax_huge_logits_long_rows_at_one_step() {
    // ±1e4 in short rows (step 3's lane groups) and rows long enough for the block-per-row
    // kernels, with and without float4.
    for cols in [1usize, 7, 33, 65, 1000, 4097] {
        let x: Vec<f32> = (0..2 * cols)
            .map(|i| if i % 3 == 0 { 1e4 } else { -1e4 })
            .collect();
        for d in devices() {
            let xt = t(&x, &[2, cols], d).requires_grad_(true).unwrap();
            let y = xt.log_softmax().unwrap();
            y.sum().unwrap().backward().unwrap();
            let v = y.to_vec().unwrap();
            let g = xt.grad().unwrap().to_vec().unwrap();
            assert!(
                v.iter().chain(&g).all(|v| v.is_finite()),
                "{d}: log_softmax of ±1e4 over {cols} columns is not finite"
            );
            // values too, in rows of equal huge logits (log Σ must not round at the ulp of 1e4)
            let eq: Vec<f32> = (0..2 * cols)
                .map(|i| {
                    if i < cols {
                        -1e4
                    } else {
                        1e4 - (i % 5) as f32 * 0.5
                    }
                })
                .collect();
            for log in [false, true] {
                let e = t(&eq, &[2, cols], d);
                let got = if log { e.log_softmax() } else { e.softmax() };
                assert_close(
                    &format!("{d}: softmax(log={log}) of equal ±1e4 over {cols}"),
                    &got.unwrap().to_vec().unwrap(),
                    &ref_softmax_rows(&eq, cols, log),
                    Tol {
                        atol: 1e-5,
                        rtol: 1e-4,
                    },
                );
            }
            let s = t(&x, &[2, cols], d).softmax().unwrap().to_vec().unwrap();
            assert!(s.iter().all(|v| v.is_finite()), "{d}: softmax ±1e4");
            let tg = ti(&[(1 % cols) as i64, 0], &[2], d);
            let ce = t(&x, &[2, cols], d).requires_grad_(true).unwrap();
            let l = ce.cross_entropy(&tg).unwrap();
            l.backward().unwrap();
            assert!(l.item().unwrap().is_finite(), "{d}: CE ±1e4");
            let g = ce.grad().unwrap().to_vec().unwrap();
            assert!(g.iter().all(|v| v.is_finite()), "{d}: CE grad ±1e4");
        }
        // the backward of equal huge logits against the CPU's (softmax backward step 3 holds
        // these rows in registers like the forward)
        let eq: Vec<f32> = (0..2 * cols)
            .map(|i| 1e4 - (i % 5) as f32 * 0.5 - if i < cols { 2e4 } else { 0.0 })
            .collect();
        for log in [false, true] {
            grads_match(
                &format!("softmax(log={log}) backward of ±1e4 over {cols}"),
                |a| {
                    if log {
                        a[0].log_softmax()
                    } else {
                        a[0].softmax()
                    }
                },
                &[hf(eq.clone(), &[2, cols])],
                2 * cols,
                Tol {
                    atol: 1e-5,
                    rtol: 1e-3,
                },
            );
        }
    }
}

/// The mean cross-entropy of `x` (`rows` × `cols`) with targets `tg` against f64 on every device.
fn ce_mean_matches(x: &[f32], tg: &[i64], rows: usize, cols: usize) {
    let lsm = ref_softmax_rows(x, cols, true);
    let want = (0..rows)
        .map(|r| -lsm[r * cols + tg[r] as usize])
        .sum::<f64>()
        / rows as f64;
    check(
        &format!("cross_entropy [{rows},{cols}]"),
        &[],
        &[want],
        ROWTOL,
        |d| t(x, &[rows, cols], d).cross_entropy(&ti(tg, &[rows], d)),
    );
}

#[test]
fn cross_entropy_rows_of_every_length() {
    every_step(
        &[Family::CrossEntropy],
        cross_entropy_rows_of_every_length_at_one_step,
    );
}

fn cross_entropy_rows_of_every_length_at_one_step() {
    for &rows in &ROWS {
        for &cols in &COLS {
            let seed = (rows * 3 + cols) as u64;
            let x = rand_vec(rows * cols, -8.0, 8.0, seed);
            let tg = rand_idx(rows, cols, seed ^ 11);
            ce_mean_matches(&x, &tg, rows, cols);
            // dx = (softmax − onehot) / rows
            let sm = ref_softmax_rows(&x, cols, false);
            let dwant: Vec<f64> = (0..rows * cols)
                .map(|i| {
                    let hot = if (i % cols) as i64 == tg[i / cols] {
                        1.0
                    } else {
                        0.0
                    };
                    (sm[i] - hot) / rows as f64
                })
                .collect();
            for d in devices() {
                let xt = t(&x, &[rows, cols], d).requires_grad_(true).unwrap();
                xt.cross_entropy(&ti(&tg, &[rows], d))
                    .unwrap()
                    .backward()
                    .unwrap();
                assert_close(
                    &format!("cross_entropy grad [{rows},{cols}] on {d}"),
                    &xt.grad().unwrap().to_vec().unwrap(),
                    &dwant,
                    Tol {
                        atol: 1e-6,
                        rtol: 1e-3,
                    },
                );
            }
        }
    }
}

#[test]
fn cross_entropy_every_step3_shape() {
    every_step(
        &[Family::CrossEntropy],
        cross_entropy_every_step3_shape_at_one_step,
    );
}

fn cross_entropy_every_step3_shape_at_one_step() {
    // Cross-entropy step 3: rows ≤ 16384 in softmax step 3's register layout (lengths on each
    // side of its shape boundaries), longer rows a block each with a scalar prologue up to the
    // first 16-byte boundary, unrolled float4, a scalar tail: lengths of every residue mod 4, so
    // consecutive rows start at every alignment (50257: the GPT-2 vocabulary). Random logits
    // and ±1e4 ones; the mean loss and the gradient against f64.
    let rows = 37;
    for cols in [
        2usize, 8, 31, 64, 65, 127, 128, 129, 1025, 4096, 16384, 16385, 16386, 16388, 20003, 50257,
    ] {
        for huge in [false, true] {
            let seed = cols as u64 ^ u64::from(huge);
            let x: Vec<f32> = if huge {
                (0..rows * cols)
                    .map(|i| if (i * 7) % 5 == 0 { 1e4 } else { -1e4 } - (i % 3) as f32)
                    .collect()
            } else {
                rand_vec(rows * cols, -8.0, 8.0, seed)
            };
            let tg = rand_idx(rows, cols, seed ^ 11);
            let lsm = ref_softmax_rows(&x, cols, true);
            let want = (0..rows)
                .map(|r| -lsm[r * cols + tg[r] as usize])
                .sum::<f64>()
                / rows as f64;
            let ltol = Tol {
                atol: 1e-5,
                rtol: if huge { 1e-4 } else { 2e-4 },
            };
            check(
                &format!("cross_entropy [{rows},{cols}] huge={huge}"),
                &[],
                &[want],
                ltol,
                |d| t(&x, &[rows, cols], d).cross_entropy(&ti(&tg, &[rows], d)),
            );
            let sm = ref_softmax_rows(&x, cols, false);
            let dwant: Vec<f64> = (0..rows * cols)
                .map(|i| {
                    let hot = f64::from(u8::from((i % cols) as i64 == tg[i / cols]));
                    (sm[i] - hot) / rows as f64
                })
                .collect();
            for d in devices() {
                let xt = t(&x, &[rows, cols], d).requires_grad_(true).unwrap();
                xt.cross_entropy(&ti(&tg, &[rows], d))
                    .unwrap()
                    .backward()
                    .unwrap();
                assert_close(
                    &format!("cross_entropy grad [{rows},{cols}] huge={huge} on {d}"),
                    &xt.grad().unwrap().to_vec().unwrap(),
                    &dwant,
                    Tol {
                        atol: 1e-6,
                        rtol: 1e-3,
                    },
                );
            }
        }
    }
}

#[test]
fn cross_entropy_mean_over_many_blocks() {
    every_step(
        &[Family::CrossEntropy],
        cross_entropy_mean_over_many_blocks_at_one_step,
    );
}

fn cross_entropy_mean_over_many_blocks_at_one_step() {
    // Cross-entropy step 4 (the default) fuses the mean: each block stores its rows' summed
    // losses as a marked word and the grid's last block adds them in block order. Enough rows
    // for hundreds to thousands of blocks (32 rows a block at 65 columns, 512 at 1, one at
    // 20003), grids that end in a partly used block, a target out of range in between (the
    // words must still be left at zero: the run after it is checked, as is each shape after a
    // larger grid's), and the same bits from a second run (the order of the additions is fixed).
    for (rows, cols) in [
        (16_385usize, 65usize),
        (70_001, 1),
        (3001, 7),
        (255, 1024),
        (300, 20_003),
    ] {
        let seed = (rows ^ cols) as u64;
        let x = rand_vec(rows * cols, -6.0, 6.0, seed);
        let tg = rand_idx(rows, cols, seed ^ 5);
        let lsm = ref_softmax_rows(&x, cols, true);
        let want = (0..rows)
            .map(|r| -lsm[r * cols + tg[r] as usize])
            .sum::<f64>()
            / rows as f64;
        let tol = Tol {
            atol: 1e-5,
            rtol: 2e-5 * (rows as f64).sqrt(),
        };
        check(
            &format!("cross_entropy [{rows},{cols}]"),
            &[],
            &[want],
            tol,
            |d| t(&x, &[rows, cols], d).cross_entropy(&ti(&tg, &[rows], d)),
        );
        let Some(d) = camel_core::testing::gpu() else {
            continue;
        };
        // a bad target: an error at the read, then the same op again is right and repeatable
        let mut bad = tg.clone();
        bad[rows / 2] = cols as i64;
        let e = t(&x, &[rows, cols], d)
            .cross_entropy(&ti(&bad, &[rows], d))
            .and_then(|l| l.item());
        assert!(e.is_err(), "[{rows},{cols}]: a target of {cols} gave {e:?}");
        let run = || {
            let xt = t(&x, &[rows, cols], d).requires_grad_(true).unwrap();
            let l = xt.cross_entropy(&ti(&tg, &[rows], d)).unwrap();
            l.backward().unwrap();
            (l.item().unwrap(), xt.grad().unwrap().to_vec().unwrap())
        };
        let (l1, g1) = run();
        let (l2, g2) = run();
        assert_close(
            &format!("cross_entropy [{rows},{cols}] after an error"),
            &[l1],
            &[want],
            tol,
        );
        assert_eq!(
            l1.to_bits(),
            l2.to_bits(),
            "[{rows},{cols}]: {l1} then {l2}"
        );
        assert!(
            g1 == g2,
            "[{rows},{cols}]: the gradient changed between two runs"
        );
        // one row's gradient against f64: (softmax − onehot) / rows
        let r = rows - 1;
        let sm = ref_softmax_rows(&x[r * cols..], cols, false);
        let dwant: Vec<f64> = (0..cols)
            .map(|c| (sm[c] - f64::from(u8::from(c as i64 == tg[r]))) / rows as f64)
            .collect();
        assert_close(
            &format!("cross_entropy grad, last row of [{rows},{cols}]"),
            &g1[r * cols..],
            &dwant,
            Tol {
                atol: 1e-9,
                rtol: 1e-3,
            },
        );
    }
}

#[test]
fn sum_and_max_along_last_dim_and_all() {
    every_step(
        &[Family::Reduce],
        sum_and_max_along_last_dim_and_all_at_one_step,
    );
}

fn sum_and_max_along_last_dim_and_all_at_one_step() {
    let mut shapes: Vec<Vec<usize>> = Vec::new();
    for &rows in &ROWS {
        for &cols in &COLS {
            shapes.push(vec![rows, cols]);
        }
    }
    shapes.push(vec![1000, 4097]); // many long rows: a block per row
    shapes.push(vec![1100, 4096]); // the same with float4 (reduce step 3: 4 loads in flight)
    shapes.push(vec![1100, 1030]); // a block per row, scalar, an unrolled body and a remainder
    shapes.push(vec![300, 1000]); // a warp per row, float4, 250 float4: body + remainder
    shapes.push(vec![1, 300_001]); // one very long row: the two-pass split
    for shape in shapes {
        let (rows, cols) = (shape[0], shape[1]);
        // distinct values (no ties) for max, values in [-1, 1) for sums
        let x = rand_distinct(rows * cols, 1e-3, (rows ^ cols) as u64);
        let xs = rand_vec(rows * cols, -1.0, 1.0, (rows + cols) as u64);
        let sum: Vec<f64> = xs
            .chunks(cols)
            .map(|r| r.iter().map(|&v| v as f64).sum())
            .collect();
        let max: Vec<f64> = x
            .chunks(cols)
            .map(|r| r.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64)))
            .collect();
        // f32 sums of n values in [-1, 1): error grows like √n
        let stol = Tol {
            atol: 1e-5 * (cols as f64).sqrt(),
            rtol: 1e-4,
        };
        check(&format!("sum_dim {shape:?}"), &[rows], &sum, stol, |d| {
            t(&xs, &shape, d).sum_dim(-1, false)
        });
        check(&format!("max_dim {shape:?}"), &[rows], &max, EXACT, |d| {
            t(&x, &shape, d).max_dim(-1, false)
        });
        let all: f64 = sum.iter().sum();
        let atol = Tol {
            atol: 1e-5 * ((rows * cols) as f64).sqrt() * 10.0,
            rtol: 1e-4,
        };
        check(&format!("sum {shape:?}"), &[], &[all], atol, |d| {
            t(&xs, &shape, d).sum()
        });
        let mx = max.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        check(&format!("max {shape:?}"), &[], &[mx], EXACT, |d| {
            t(&x, &shape, d).max()
        });
    }
    // a middle dim: [7, 1000, 33] summed over dim 1
    let shape = [7usize, 1000, 33];
    let x = rand_vec(numel(&shape), -1.0, 1.0, 5);
    let mut want = vec![0.0f64; 7 * 33];
    for o in 0..7 {
        for dd in 0..1000 {
            for i in 0..33 {
                want[o * 33 + i] += x[(o * 1000 + dd) * 33 + i] as f64;
            }
        }
    }
    check(
        "sum_dim(1) [7,1000,33]",
        &[7, 33],
        &want,
        Tol {
            atol: 1e-4,
            rtol: 1e-4,
        },
        |d| t(&x, &shape, d).sum_dim(1, false),
    );
}

#[test]
fn max_propagates_nan() {
    every_step(&[Family::Reduce], max_propagates_nan_at_one_step);
}

fn max_propagates_nan_at_one_step() {
    // many rows along the last dim (reduce step 3's unrolled accumulators), NaN in one row
    let (rows, cols) = (1100usize, 4100usize);
    let mut x = rand_vec(rows * cols, -1.0, 1.0, 2);
    x[517 * cols + 3001] = f32::NAN;
    for d in devices() {
        let m = t(&x, &[rows, cols], d)
            .max_dim(-1, false)
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(m[517].is_nan(), "{d}: row max with a NaN gave {}", m[517]);
        assert!(m[516].is_finite() && m[518].is_finite(), "{d}: NaN leaked");
    }
    for cols in [7usize, 4097, 300_001] {
        let mut x = rand_vec(cols, -1.0, 1.0, 1);
        x[cols / 2] = f32::NAN;
        for d in devices() {
            let m = t(&x, &[cols], d).max().unwrap().item().unwrap();
            assert!(m.is_nan(), "{d}: max over {cols} with a NaN gave {m}");
        }
    }
}

#[test]
fn elementwise_float4_tails() {
    every_step(&[Family::Elementwise], elementwise_float4_tails_at_one_step);
}

fn elementwise_float4_tails_at_one_step() {
    for n in [1usize, 7, 33, 1000, 4097] {
        let a = rand_vec(n, -3.0, 3.0, n as u64);
        let b = rand_away(n, 0.5, 2.0, n as u64 ^ 9);
        let f = |g: &dyn Fn(f64, f64) -> f64| -> Vec<f64> {
            a.iter()
                .zip(&b)
                .map(|(&x, &y)| g(x as f64, y as f64))
                .collect()
        };
        check(&format!("add {n}"), &[n], &f(&|x, y| x + y), ELEM, |d| {
            t(&a, &[n], d).add(&t(&b, &[n], d))
        });
        check(&format!("mul {n}"), &[n], &f(&|x, y| x * y), ELEM, |d| {
            t(&a, &[n], d).mul(&t(&b, &[n], d))
        });
        check(
            &format!("relu {n}"),
            &[n],
            &f(&|x, _| x.max(0.0)),
            ELEM,
            |d| t(&a, &[n], d).relu(),
        );
        check(
            &format!("scale {n}"),
            &[n],
            &f(&|x, _| 0.37 * x),
            ELEM,
            |d| t(&a, &[n], d).mul_scalar(0.37),
        );
        let gelu = |x: f64| {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
        };
        check(&format!("gelu {n}"), &[n], &f(&|x, _| gelu(x)), ELEM, |d| {
            t(&a, &[n], d).gelu()
        });
        // gelu backward with upstream grad b: b · gelu'(a), central difference in f64
        let want = f(&|x, y| y * (gelu(x + 1e-6) - gelu(x - 1e-6)) / 2e-6);
        for d in devices() {
            let x = t(&a, &[n], d).requires_grad_(true).unwrap();
            x.gelu().unwrap().backward_with(&t(&b, &[n], d)).unwrap();
            assert_close(
                &format!("gelu backward {n} on {d}"),
                &x.grad().unwrap().to_vec().unwrap(),
                &want,
                Tol {
                    atol: 1e-5,
                    rtol: 1e-4,
                },
            );
        }
    }
}

#[test]
fn embedding_backward_with_repeated_indices() {
    every_step(
        &[Family::Embedding],
        embedding_backward_with_repeated_indices_at_one_step,
    );
}

fn embedding_backward_with_repeated_indices_at_one_step() {
    for dim in [1usize, 7, 33, 1000] {
        let v = 5;
        let idx: Vec<i64> = (0..37).map(|i| [0, 3, 3, 1, 3, 0, 4][i % 7]).collect();
        let n = idx.len();
        let table = rand_vec(v * dim, -1.0, 1.0, dim as u64);
        let g = rand_vec(n * dim, -1.0, 1.0, dim as u64 ^ 5);
        let fwd: Vec<f64> = idx
            .iter()
            .flat_map(|&i| {
                table[i as usize * dim..(i as usize + 1) * dim]
                    .iter()
                    .map(|&x| x as f64)
            })
            .collect();
        check(&format!("embedding d={dim}"), &[n, dim], &fwd, EXACT, |d| {
            t(&table, &[v, dim], d).embedding(&ti(&idx, &[n], d))
        });
        check_embedding_backward(&format!("d={dim}"), &table, &idx, &g, v, dim);
    }
}

/// The table's gradient after `embedding(idx)` and a backward pass with upstream `g`, on every
/// device, against the f64 sums of `g`'s rows per index.
fn check_embedding_backward(
    what: &str,
    table: &[f32],
    idx: &[i64],
    g: &[f32],
    v: usize,
    dim: usize,
) {
    let n = idx.len();
    let mut want = vec![0.0f64; v * dim];
    for (k, &i) in idx.iter().enumerate() {
        for c in 0..dim {
            want[i as usize * dim + c] += g[k * dim + c] as f64;
        }
    }
    for d in devices() {
        let w = t(table, &[v, dim], d).requires_grad_(true).unwrap();
        w.embedding(&ti(idx, &[n], d))
            .unwrap()
            .backward_with(&t(g, &[n, dim], d))
            .unwrap();
        assert_close(
            &format!("embedding backward {what} on {d}"),
            &w.grad().unwrap().to_vec().unwrap(),
            &want,
            ELEM,
        );
    }
}

/// Large enough for the CUDA backend's embedding-backward steps 3 and 4 (tokens grouped by row,
/// from `EMBEDDING_SORTED_MIN` upstream elements), with repeated indices and unused rows.
#[test]
fn embedding_backward_large_grouped_by_row() {
    every_step(
        &[Family::Embedding],
        embedding_backward_large_grouped_by_row_at_one_step,
    );
}

fn embedding_backward_large_grouped_by_row_at_one_step() {
    let (n, v, dim) = (4096usize, 300usize, 4096usize);
    #[cfg(feature = "cuda")]
    assert!(n * dim >= camel_core::backend::cuda::EMBEDDING_SORTED_MIN);
    let idx: Vec<i64> = (0..n).map(|i| ((i * 7919) % 250) as i64).collect(); // rows 250.. unused
    let table = rand_vec(v * dim, -1.0, 1.0, 3);
    let g = rand_vec(n * dim, -1.0, 1.0, 4);
    check_embedding_backward(
        &format!("{n}×{dim} into {v} rows"),
        &table,
        &idx,
        &g,
        v,
        dim,
    );
}

#[test]
fn multi_tensor_update_matches_one_by_one() {
    every_step(
        &[Family::Optim],
        multi_tensor_update_matches_one_by_one_at_one_step,
    );
}

fn multi_tensor_update_matches_one_by_one_at_one_step() {
    // one table of several tensors: single elements, a float4 tail, exactly one chunk of the
    // multi-tensor kernels (4096), a chunk and one, three chunks and a partial one
    let sizes = [1usize, 7, 4096, 4097, 5000, 4096 * 3 + 5];
    let rules = |t: i32| {
        [
            UpdateRule::Sgd {
                lr: 0.1,
                momentum: 0.9,
                weight_decay: 0.01,
            },
            UpdateRule::Sgd {
                lr: 0.1,
                momentum: 0.0,
                weight_decay: 0.0,
            },
            UpdateRule::Adam {
                lr: 0.01,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.1,
                decoupled: false,
                bc1: 1.0 - 0.9f32.powi(t),
                bc2: 1.0 - 0.999f32.powi(t),
            },
            UpdateRule::Adam {
                lr: 0.01,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.1,
                decoupled: true,
                bc1: 1.0 - 0.9f32.powi(t),
                bc2: 1.0 - 0.999f32.powi(t),
            },
        ]
    };
    for which in 0..4 {
        let nbuf = match rules(1)[which] {
            UpdateRule::Sgd { momentum, .. } => usize::from(momentum != 0.0),
            UpdateRule::Adam { .. } => 2,
        };
        let p0: Vec<Vec<f32>> = sizes
            .iter()
            .map(|&n| rand_vec(n, -1.0, 1.0, n as u64))
            .collect();
        let gs: Vec<Vec<f32>> = sizes
            .iter()
            .map(|&n| rand_vec(n, -1.0, 1.0, n as u64 ^ 3))
            .collect();
        // reference: apply_update one tensor at a time on the CPU, three steps, with per-tensor
        // step counts (tensor k starts at step k+1, so bias corrections differ per tensor)
        let run = |dev, multi: bool| -> Vec<Vec<f32>> {
            let ps: Vec<Tensor> = p0
                .iter()
                .zip(&sizes)
                .map(|(p, &n)| t(p, &[n], dev))
                .collect();
            let gts: Vec<Tensor> = gs
                .iter()
                .zip(&sizes)
                .map(|(g, &n)| t(g, &[n], dev))
                .collect();
            let states: Vec<Vec<Tensor>> = ps
                .iter()
                .map(|p| (0..nbuf).map(|_| p.zeros_like().unwrap()).collect())
                .collect();
            for step in 1..=3 {
                let rs: Vec<UpdateRule> = (0..sizes.len())
                    .map(|k| rules(step + k as i32)[which])
                    .collect();
                if multi {
                    Tensor::apply_updates(&ps, &gts, &states, &rs).unwrap();
                } else {
                    for k in 0..sizes.len() {
                        let refs: Vec<&Tensor> = states[k].iter().collect();
                        ps[k].apply_update(&gts[k], &refs, &rs[k]).unwrap();
                    }
                }
            }
            ps.iter().map(|p| p.to_vec().unwrap()).collect()
        };
        let want = run(camel_core::Device::Cpu, false);
        for d in devices() {
            let got = run(d, true);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_close(
                    &format!("rule {which} tensor {k} ({} elements) on {d}", sizes[k]),
                    g,
                    &f64s(w),
                    Tol {
                        atol: 1e-6,
                        rtol: 1e-5,
                    },
                );
            }
        }
    }
}

#[test]
fn multi_tensor_update_rejects_bad_input() {
    every_step(
        &[Family::Optim],
        multi_tensor_update_rejects_bad_input_at_one_step,
    );
}

fn multi_tensor_update_rejects_bad_input_at_one_step() {
    let d = camel_core::Device::Cpu;
    let p = Tensor::zeros(&[3], d).unwrap();
    let g = Tensor::zeros(&[3], d).unwrap();
    let adam = UpdateRule::Adam {
        lr: 0.1,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        decoupled: false,
        bc1: 0.1,
        bc2: 0.001,
    };
    // Adam without its two state buffers
    assert!(Tensor::apply_updates(
        std::slice::from_ref(&p),
        std::slice::from_ref(&g),
        &[vec![]],
        &[adam]
    )
    .is_err());
    // the same parameter twice
    let st = || {
        vec![
            Tensor::zeros(&[3], d).unwrap(),
            Tensor::zeros(&[3], d).unwrap(),
        ]
    };
    assert!(Tensor::apply_updates(
        &[p.clone(), p.clone()],
        &[g.clone(), Tensor::zeros(&[3], d).unwrap()],
        &[st(), st()],
        &[adam, adam]
    )
    .is_err());
    // length mismatch
    assert!(Tensor::apply_updates(&[p], &[], &[], &[]).is_err());
}
