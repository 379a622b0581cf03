//! Reductions, softmax, norms, losses, dropout and the masking ops on f16 and bf16 tensors: each
//! computes in f32 and rounds its result once to the input's dtype, on every device. The references are
//! computed in f64 from the 16-bit values, so the bound of every check is one rounding to the
//! dtype (half an ulp, taken as a whole ulp) plus the op's f32 error.

mod common;
use camel_core::{autocast, DType, Device, Generator, Tensor};
use common::{devices, rand_idx, rand_vec, round_to_half as round};

/// One unit in the last place of `dtype` at `x` (f16's subnormals are 2⁻²⁴ apart).
fn ulp(x: f64, dtype: DType) -> f64 {
    let bits = if dtype == DType::F16 { 10 } else { 7 };
    let e = x.abs().max(1e-30).log2().floor();
    let u = 2f64.powf(e - bits as f64);
    if dtype == DType::F16 {
        u.max(2f64.powi(-24))
    } else {
        u
    }
}

fn on(x: &[f32], shape: &[usize], dtype: DType, dev: Device) -> Tensor {
    Tensor::from_vec(x.to_vec(), shape, dev)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

/// `got` (of `dtype`) against `want`: within an ulp of the dtype plus `f32_err(want)`.
fn assert_rounded(
    what: &str,
    got: &Tensor,
    want: &[f64],
    dtype: DType,
    f32_err: impl Fn(f64) -> f64,
) {
    assert_eq!(got.dtype(), dtype, "{what}: dtype");
    let g = got.to_vec().unwrap();
    assert_eq!(g.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in g.iter().zip(want).enumerate() {
        let tol = ulp(w, dtype) + f32_err(w);
        assert!(
            (g as f64 - w).abs() <= tol,
            "{what} [{i}]: got {g}, reference {w}, bound {tol:e}"
        );
    }
}

fn row_softmax(x: &[f64], log: bool) -> Vec<f64> {
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = x.iter().map(|v| (v - m).exp()).sum();
    x.iter()
        .map(|v| {
            if log {
                v - m - s.ln()
            } else {
                (v - m).exp() / s
            }
        })
        .collect()
}

#[test]
fn reductions_softmax_norms_and_losses_round_once_from_f32() {
    let rows = 3;
    for dtype in [DType::F16, DType::BF16] {
        for cols in [1usize, 7, 127, 1031] {
            let n = rows * cols;
            let x = round(&rand_vec(n, -3.0, 3.0, cols as u64), dtype);
            let y = round(&rand_vec(n, -3.0, 3.0, 7 + cols as u64), dtype);
            let gamma = round(&rand_vec(cols, 0.5, 1.5, 3), dtype);
            let beta = round(&rand_vec(cols, -0.5, 0.5, 4), dtype);
            let targets = rand_idx(rows, cols, 5);
            let xr: Vec<Vec<f64>> = x
                .chunks(cols)
                .map(|r| r.iter().map(|&v| v as f64).collect())
                .collect();
            // f64 references
            let sums: Vec<f64> = xr.iter().map(|r| r.iter().sum()).collect();
            let abs_sum: f64 = x.iter().map(|v| v.abs() as f64).sum();
            let mean = sums.iter().sum::<f64>() / n as f64;
            let maxes: Vec<f64> = xr
                .iter()
                .map(|r| r.iter().cloned().fold(f64::NEG_INFINITY, f64::max))
                .collect();
            let argmax: Vec<i64> = xr
                .iter()
                .zip(&maxes)
                .map(|(r, m)| r.iter().position(|v| v == m).unwrap() as i64)
                .collect();
            let soft: Vec<f64> = xr.iter().flat_map(|r| row_softmax(r, false)).collect();
            let logsoft: Vec<f64> = xr.iter().flat_map(|r| row_softmax(r, true)).collect();
            let var: Vec<f64> = xr
                .iter()
                .map(|r| {
                    let m = r.iter().sum::<f64>() / cols as f64;
                    let ss: f64 = r.iter().map(|v| (v - m) * (v - m)).sum();
                    ss / (cols as f64 - 1.0)
                })
                .collect();
            let ln: Vec<f64> = xr
                .iter()
                .flat_map(|r| {
                    let m = r.iter().sum::<f64>() / cols as f64;
                    let v = r.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / cols as f64;
                    let rs = 1.0 / (v + 1e-5).sqrt();
                    r.iter()
                        .enumerate()
                        .map(|(j, x)| (x - m) * rs * gamma[j] as f64 + beta[j] as f64)
                        .collect::<Vec<_>>()
                })
                .collect();
            let ce = xr
                .iter()
                .zip(&targets)
                .map(|(r, &t)| -row_softmax(r, true)[t as usize])
                .sum::<f64>()
                / rows as f64;
            let mse = x
                .iter()
                .zip(&y)
                .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
                .sum::<f64>()
                / n as f64;
            for dev in devices() {
                let what = |op: &str| format!("{dev} {dtype} {op} cols={cols}");
                let t = on(&x, &[rows, cols], dtype, dev);
                // an f32 sum errs by at most n·2⁻²⁴·Σ|x|
                let acc = |_: f64| n as f64 * 2f64.powi(-24) * abs_sum;
                assert_rounded(
                    &what("sum_dim"),
                    &t.sum_dim(-1, false).unwrap(),
                    &sums,
                    dtype,
                    acc,
                );
                let s = t.sum().unwrap();
                assert_rounded(&what("sum"), &s, &[sums.iter().sum()], dtype, acc);
                let m = t.mean().unwrap();
                assert_rounded(&what("mean"), &m, &[mean], dtype, |_| acc(0.0) / n as f64);
                assert_rounded(
                    &what("max_dim"),
                    &t.max_dim(-1, false).unwrap(),
                    &maxes,
                    dtype,
                    |_| 0.0,
                );
                let am = t.argmax_last().unwrap();
                assert_eq!(am.dtype(), DType::I64, "{}", what("argmax"));
                assert_eq!(am.to_vec_i64().unwrap(), argmax, "{}", what("argmax"));
                let rel = |tol: f64| move |w: f64| tol * (1.0 + w.abs());
                assert_rounded(
                    &what("softmax"),
                    &t.softmax().unwrap(),
                    &soft,
                    dtype,
                    rel(1e-6),
                );
                assert_rounded(
                    &what("log_softmax"),
                    &t.log_softmax().unwrap(),
                    &logsoft,
                    dtype,
                    rel(1e-5),
                );
                if cols > 1 {
                    let v = t.var_dims(&[-1], 1, false).unwrap();
                    assert_rounded(&what("var_dims"), &v, &var, dtype, rel(1e-5));
                }
                let (g, b) = (
                    on(&gamma, &[cols], dtype, dev),
                    on(&beta, &[cols], dtype, dev),
                );
                let l = t.layer_norm(&g, &b, 1e-5).unwrap();
                assert_rounded(&what("layer_norm"), &l, &ln, dtype, rel(1e-4));
                let tt = Tensor::from_vec_i64(targets.clone(), &[rows], dev).unwrap();
                let c = t.cross_entropy(&tt).unwrap();
                assert_rounded(&what("cross_entropy"), &c, &[ce], dtype, rel(1e-5));
                let u = on(&y, &[rows, cols], dtype, dev);
                assert_rounded(&what("mse"), &t.mse(&u).unwrap(), &[mse], dtype, rel(1e-5));
            }
        }
    }
}

/// Sums of 16-bit tensors along every path of the reduction kernels (rows a warp or a block
/// each, vectorized or not; a long middle dim split into chunks; a middle dim the step-2 kernel
/// takes, where the input widens first), `sum_to` and the means: the f64 sum of the 16-bit
/// values, rounded once to the dtype (f32 inside an autocast scope).
#[test]
fn sums_of_16_bit_tensors_accumulate_in_f32_on_every_path() {
    // (shape, dim): -1 the last dim
    let cases: [(&[usize], isize); 7] = [
        (&[600, 1100], -1),
        (&[600, 1101], -1),
        (&[1000, 33], -1),
        (&[1000, 64], -1),
        (&[300, 129], 0),
        (&[2, 50, 7], 1),
        (&[1, 4097], -1),
    ];
    for dtype in [DType::F16, DType::BF16] {
        for (ci, &(shape, dim)) in cases.iter().enumerate() {
            let n: usize = shape.iter().product();
            let x = round(&rand_vec(n, -2.0, 2.0, 70 + ci as u64), dtype);
            let d = if dim < 0 {
                shape.len() - 1
            } else {
                dim as usize
            };
            let (outer, len, inner) = (
                shape[..d].iter().product::<usize>(),
                shape[d],
                shape[d + 1..].iter().product::<usize>(),
            );
            let (mut want, mut abs) = (vec![0.0f64; outer * inner], vec![0.0f64; outer * inner]);
            for o in 0..outer {
                for k in 0..len {
                    for i in 0..inner {
                        let v = x[(o * len + k) * inner + i] as f64;
                        want[o * inner + i] += v;
                        abs[o * inner + i] += v.abs();
                    }
                }
            }
            let err = |j: usize| len as f64 * 2f64.powi(-24) * abs[j];
            for dev in devices() {
                let what = format!("{dev} {dtype} sum {shape:?} dim {dim}");
                let t = on(&x, shape, dtype, dev);
                for scope in [false, true] {
                    let s = if scope {
                        camel_core::autocast(dtype, || t.sum_dim(dim, false)).unwrap()
                    } else {
                        t.sum_dim(dim, false)
                    }
                    .unwrap();
                    let out = if scope { DType::F32 } else { dtype };
                    assert_eq!(s.dtype(), out, "{what} autocast={scope}");
                    let got = s.to_vec().unwrap();
                    for (j, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        let tol = if scope { 0.0 } else { ulp(w, dtype) } + err(j);
                        assert!(
                            (g as f64 - w).abs() <= tol,
                            "{what} autocast={scope} [{j}]: got {g}, reference {w}, bound {tol:e}"
                        );
                    }
                }
                // the mean rounds once: the f32 sum times 1/len, then the dtype
                let m = t.mean_dim(dim, false).unwrap().to_vec().unwrap();
                for (j, (&g, &w)) in m.iter().zip(&want).enumerate() {
                    let w = w / len as f64;
                    let tol = ulp(w, dtype) + err(j) / len as f64 + 2f64.powi(-23) * w.abs();
                    assert!((g as f64 - w).abs() <= tol, "{what} mean [{j}]: {g} vs {w}");
                }
                // sum_to, the backward of broadcasting, over the reduced dim
                let mut keep = shape.to_vec();
                keep[d] = 1;
                let st = t.sum_to(&keep).unwrap();
                assert_eq!(st.dtype(), dtype, "{what} sum_to");
                let got = st.to_vec().unwrap();
                for (j, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    let tol = ulp(w, dtype) + err(j);
                    assert!(
                        (g as f64 - w).abs() <= tol,
                        "{what} sum_to [{j}]: {g} vs {w}"
                    );
                }
                // the gradient of a sum: ones, in the dtype
                let tg = on(&x, shape, dtype, dev).requires_grad_(true).unwrap();
                tg.sum_dim(dim, false)
                    .unwrap()
                    .sum()
                    .unwrap()
                    .backward()
                    .unwrap();
                let gr = tg.grad().unwrap();
                assert_eq!(gr.dtype(), dtype, "{what} grad");
                assert!(
                    gr.to_vec().unwrap().iter().all(|&v| v == 1.0),
                    "{what} grad"
                );
            }
        }
    }
}

/// A 16-bit accumulator stops growing long before these sums: bf16 at 256 + 1, f16 at
/// 2048 + 1. f32 accumulation gives them exactly.
#[test]
fn long_sums_accumulate_in_f32() {
    for dev in devices() {
        for dtype in [DType::F16, DType::BF16] {
            let ones = Tensor::ones(&[4096], dev).unwrap().to_dtype(dtype).unwrap();
            assert_eq!(ones.sum().unwrap().item().unwrap(), 4096.0, "{dev} {dtype}");
            let m = Tensor::ones(&[3, 4096], dev)
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            assert_eq!(
                m.sum_dim(1, false).unwrap().to_vec().unwrap(),
                [4096.0; 3],
                "{dev} {dtype} rows"
            );
            assert_eq!(
                m.sum_dims(&[0, 1], false).unwrap().item().unwrap(),
                12288.0,
                "{dev} {dtype} sum_dims"
            );
            assert_eq!(m.mean_dim(1, true).unwrap().shape(), [3, 1]);
            assert_eq!(
                m.mean_dims(&[1], false).unwrap().to_vec().unwrap(),
                [1.0; 3]
            );
        }
    }
}

/// Softmax and log-softmax of 16-bit rows at awkward lengths (a row held by one thread, by a few,
/// by a warp, by a block, and past the rows the 16-bit kernels hold): the output is the f64
/// softmax rounded once (within an ulp plus the f32 error), and the gradient is the f64 backward
/// of the rounded output `y` and upstream gradient `g` (`y ⊙ (g − Σ g⊙y)`, `g − exp(y) Σ g`),
/// rounded once. That is what PyTorch's 16-bit softmax backward computes too: it keeps the
/// 16-bit output, not an f32 copy.
#[test]
fn softmax_backward_reads_the_rounded_output() {
    for dtype in [DType::F16, DType::BF16] {
        for (rows, cols) in [(3, 1), (5, 7), (3, 127), (2, 1000), (2, 4097), (1, 16385)] {
            let n = rows * cols;
            let x = round(&rand_vec(n, -4.0, 4.0, cols as u64), dtype);
            let w = round(&rand_vec(n, -1.0, 1.0, 3 + cols as u64), dtype);
            for dev in devices() {
                for log in [false, true] {
                    let what = format!("{dev} {dtype} log={log} [{rows}, {cols}]");
                    let xt = on(&x, &[rows, cols], dtype, dev)
                        .requires_grad_(true)
                        .unwrap();
                    let wt = on(&w, &[rows, cols], dtype, dev);
                    let y = if log {
                        xt.log_softmax().unwrap()
                    } else {
                        xt.softmax().unwrap()
                    };
                    // the forward against f64
                    let want: Vec<f64> = x
                        .chunks(cols)
                        .flat_map(|r| {
                            row_softmax(&r.iter().map(|&v| v as f64).collect::<Vec<_>>(), log)
                        })
                        .collect();
                    assert_rounded(&what, &y, &want, dtype, |v| 1e-6 * (1.0 + v.abs()));
                    // the backward, g = w exactly (the product's gradient rounds w·1 to itself)
                    y.mul(&wt).unwrap().sum().unwrap().backward().unwrap();
                    let got = xt.grad().unwrap();
                    assert_eq!(got.dtype(), dtype, "{what}");
                    let got = got.to_vec().unwrap();
                    let yv = y.to_vec().unwrap();
                    for r in 0..rows {
                        let (yr, gr) =
                            (&yv[r * cols..(r + 1) * cols], &w[r * cols..(r + 1) * cols]);
                        let dot: f64 = if log {
                            gr.iter().map(|&g| g as f64).sum()
                        } else {
                            yr.iter().zip(gr).map(|(&y, &g)| y as f64 * g as f64).sum()
                        };
                        // the f32 sum's error bound, n·2⁻²⁴·Σ|term|
                        let dot_err = cols as f64
                            * 2f64.powi(-24)
                            * if log {
                                gr.iter().map(|&g| g.abs() as f64).sum::<f64>()
                            } else {
                                yr.iter()
                                    .zip(gr)
                                    .map(|(&y, &g)| (y * g).abs() as f64)
                                    .sum::<f64>()
                            };
                        for c in 0..cols {
                            let (yi, gi) = (yr[c] as f64, gr[c] as f64);
                            let (want, err) = if log {
                                let e = yi.exp();
                                (gi - e * dot, e * (dot_err + 2f64.powi(-21) * dot.abs()))
                            } else {
                                (yi * (gi - dot), yi.abs() * dot_err)
                            };
                            let tol =
                                ulp(want, dtype) + err + 2f64.powi(-22) * (gi.abs() + want.abs());
                            let g = got[r * cols + c] as f64;
                            assert!(
                                (g - want).abs() <= tol,
                                "{what} grad [{r}, {c}]: got {g}, reference {want}, bound {tol:e}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The cross-entropy of 16-bit logits at awkward row lengths (past the rows its 16-bit kernels
/// hold too): the f64 mean loss rounded once (f32 inside an autocast scope), and the gradient
/// `(softmax(x) − onehot(t)) / rows` rounded once to the logits' dtype.
#[test]
fn cross_entropy_of_16_bit_logits_computes_in_f32() {
    for dtype in [DType::F16, DType::BF16] {
        for (rows, cols) in [(3, 1), (5, 7), (3, 127), (2, 1000), (2, 4097), (1, 16385)] {
            let n = rows * cols;
            let x = round(&rand_vec(n, -4.0, 4.0, 5 + cols as u64), dtype);
            let targets = rand_idx(rows, cols, 6 + cols as u64);
            let probs: Vec<f64> = x
                .chunks(cols)
                .flat_map(|r| row_softmax(&r.iter().map(|&v| v as f64).collect::<Vec<_>>(), false))
                .collect();
            let loss: f64 = (0..rows)
                .map(|r| -probs[r * cols + targets[r] as usize].ln())
                .sum::<f64>()
                / rows as f64;
            for dev in devices() {
                for scope in [false, true] {
                    let what = format!("{dev} {dtype} autocast={scope} [{rows}, {cols}]");
                    let xt = on(&x, &[rows, cols], dtype, dev)
                        .requires_grad_(true)
                        .unwrap();
                    let tt = Tensor::from_vec_i64(targets.clone(), &[rows], dev).unwrap();
                    let l = if scope {
                        camel_core::autocast(dtype, || xt.cross_entropy(&tt)).unwrap()
                    } else {
                        xt.cross_entropy(&tt)
                    }
                    .unwrap();
                    let out = if scope { DType::F32 } else { dtype };
                    let err = |v: f64| 1e-5 * (1.0 + v.abs());
                    assert_rounded(&what, &l, &[loss], out, err);
                    l.backward().unwrap();
                    let want: Vec<f64> = (0..n)
                        .map(|i| {
                            let hot = if targets[i / cols] as usize == i % cols {
                                1.0
                            } else {
                                0.0
                            };
                            (probs[i] - hot) / rows as f64
                        })
                        .collect();
                    let g = xt.grad().unwrap();
                    assert_rounded(&format!("{what} grad"), &g, &want, dtype, |v| {
                        1e-5 * v.abs() + 1e-9
                    });
                }
            }
        }
    }
}

/// LayerNorm with x, γ and β all f16 or bf16 at awkward row lengths (past the rows its 16-bit
/// kernels hold too): y is the f64 layer norm of the 16-bit values rounded once, and dx, dγ and
/// dβ the f64 backward of the 16-bit x, γ and upstream gradient, each rounded once.
#[test]
fn layer_norm_in_16_bits_rounds_each_output_once() {
    let (rows, eps) = (3usize, 1e-5f32);
    for dtype in [DType::F16, DType::BF16] {
        for cols in [1usize, 7, 127, 768, 1000, 1025] {
            let n = rows * cols;
            let x = round(&rand_vec(n, -3.0, 3.0, 50 + cols as u64), dtype);
            let gamma = round(&rand_vec(cols, 0.5, 1.5, 51), dtype);
            let beta = round(&rand_vec(cols, -0.5, 0.5, 52), dtype);
            let w = round(&rand_vec(n, -1.0, 1.0, 53 + cols as u64), dtype);
            // f64 references
            let (mut y, mut dx) = (vec![0.0; n], vec![0.0; n]);
            let (mut dx_err, mut dg, mut db) = (vec![0.0; n], vec![0.0; cols], vec![0.0; cols]);
            let (mut dg_err, mut db_err) = (vec![0.0; cols], vec![0.0; cols]);
            for r in 0..rows {
                let xr: Vec<f64> = x[r * cols..(r + 1) * cols]
                    .iter()
                    .map(|&v| v as f64)
                    .collect();
                let m = xr.iter().sum::<f64>() / cols as f64;
                let v = xr.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / cols as f64;
                let rs = 1.0 / (v + eps as f64).sqrt();
                let xh: Vec<f64> = xr.iter().map(|a| (a - m) * rs).collect();
                let gh: Vec<f64> = (0..cols)
                    .map(|c| w[r * cols + c] as f64 * gamma[c] as f64)
                    .collect();
                let s1 = gh.iter().sum::<f64>() / cols as f64;
                let s2 = gh.iter().zip(&xh).map(|(a, b)| a * b).sum::<f64>() / cols as f64;
                let a1 = gh.iter().map(|a| a.abs()).sum::<f64>() / cols as f64;
                let a2 = gh.iter().zip(&xh).map(|(a, b)| (a * b).abs()).sum::<f64>() / cols as f64;
                for c in 0..cols {
                    let i = r * cols + c;
                    y[i] = xh[c] * gamma[c] as f64 + beta[c] as f64;
                    dx[i] = rs * (gh[c] - s1 - xh[c] * s2);
                    dx_err[i] = 1e-5 * rs * (gh[c].abs() + a1 + xh[c].abs() * a2);
                    dg[c] += w[i] as f64 * xh[c];
                    db[c] += w[i] as f64;
                    dg_err[c] += 1e-5 * (w[i] as f64 * xh[c]).abs();
                    db_err[c] += 1e-5 * (w[i] as f64).abs();
                }
            }
            for dev in devices() {
                let what = |o: &str| format!("{dev} {dtype} layer_norm {o} [{rows}, {cols}]");
                let leaf = |v: &[f32], shape: &[usize]| {
                    on(v, shape, dtype, dev).requires_grad_(true).unwrap()
                };
                let (xt, gt, bt) = (
                    leaf(&x, &[rows, cols]),
                    leaf(&gamma, &[cols]),
                    leaf(&beta, &[cols]),
                );
                let out = xt.layer_norm(&gt, &bt, eps).unwrap();
                assert_rounded(&what("y"), &out, &y, dtype, |v| 1e-5 * (1.0 + v.abs()));
                let wt = on(&w, &[rows, cols], dtype, dev);
                out.mul(&wt).unwrap().sum().unwrap().backward().unwrap();
                for (name, t, want, err) in [
                    ("dx", &xt, &dx, &dx_err),
                    ("dgamma", &gt, &dg, &dg_err),
                    ("dbeta", &bt, &db, &db_err),
                ] {
                    let got = t.grad().unwrap();
                    assert_eq!(got.dtype(), dtype, "{}", what(name));
                    for (i, g) in got.to_vec().unwrap().into_iter().enumerate() {
                        let tol = ulp(want[i], dtype) + err[i] + 1e-7;
                        assert!(
                            (g as f64 - want[i]).abs() <= tol,
                            "{} [{i}]: got {g}, reference {}, bound {tol:e}",
                            what(name),
                            want[i]
                        );
                    }
                }
            }
        }
    }
}

/// Gradients come back in the input's dtype: the f32 gradient of the widened input, rounded once.
#[test]
fn gradients_come_back_in_the_input_dtype() {
    let (rows, cols) = (5, 33);
    for dtype in [DType::F16, DType::BF16] {
        let x = round(&rand_vec(rows * cols, -2.0, 2.0, 11), dtype);
        let w = rand_vec(rows * cols, -1.0, 1.0, 12);
        let targets = rand_idx(rows, cols, 13);
        for dev in devices() {
            type Loss = fn(&Tensor, &Tensor, &Tensor) -> camel_core::Result<Tensor>;
            // softmax and log-softmax compute their backward from the rounded output:
            // `softmax_backward_reads_the_rounded_output` checks them
            let losses: [(&str, Loss); 2] = [
                ("max", |x, w, _| {
                    x.max_dim(1, false)?
                        .mul(&w.narrow(1, 0, 1)?.reshape(&[5])?)?
                        .sum()
                }),
                ("cross_entropy", |x, _, t| x.cross_entropy(t)),
            ];
            let tt = Tensor::from_vec_i64(targets.clone(), &[rows], dev).unwrap();
            for (name, f) in losses {
                let xh = on(&x, &[rows, cols], dtype, dev)
                    .requires_grad_(true)
                    .unwrap();
                let wh = on(&w, &[rows, cols], dtype, dev);
                f(&xh, &wh, &tt).unwrap().backward().unwrap();
                let gh = xh.grad().unwrap();
                assert_eq!(gh.dtype(), dtype, "{dev} {name}");
                // the same loss on the widened values in f32
                let xf = Tensor::from_vec(x.clone(), &[rows, cols], dev)
                    .unwrap()
                    .requires_grad_(true)
                    .unwrap();
                let wf = wh.to_dtype(DType::F32).unwrap();
                f(&xf, &wf, &tt).unwrap().backward().unwrap();
                let gf = xf.grad().unwrap().to_vec().unwrap();
                let gh = gh.to_vec().unwrap();
                for i in 0..gf.len() {
                    // the upstream gradient is itself rounded to the dtype: allow two ulps
                    let tol = 2.0 * ulp(gf[i] as f64, dtype) + 1e-6;
                    assert!(
                        (gh[i] as f64 - gf[i] as f64).abs() <= tol,
                        "{dev} {dtype} {name} grad [{i}]: {} vs f32 {}",
                        gh[i],
                        gf[i]
                    );
                }
            }
            // layer norm: all three gradients in the dtype
            let xh = on(&x, &[rows, cols], dtype, dev)
                .requires_grad_(true)
                .unwrap();
            let g = Tensor::ones(&[cols], dev).unwrap().to_dtype(dtype).unwrap();
            let g = g.requires_grad_(true).unwrap();
            let b = Tensor::zeros(&[cols], dev)
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            let b = b.requires_grad_(true).unwrap();
            let wh = on(&w, &[rows, cols], dtype, dev);
            xh.layer_norm(&g, &b, 1e-5)
                .unwrap()
                .mul(&wh)
                .unwrap()
                .sum()
                .unwrap()
                .backward()
                .unwrap();
            for (name, t) in [("x", &xh), ("gamma", &g), ("beta", &b)] {
                assert_eq!(t.grad().unwrap().dtype(), dtype, "{dev} layer_norm d{name}");
            }
        }
    }
}

/// Dropout on a 16-bit tensor draws the mask an f32 tensor of the same shape draws from the same
/// generator state, and scales by 1/(1−p) rounded once.
#[test]
fn dropout_keeps_the_f32_mask_and_the_dtype() {
    for dtype in [DType::F16, DType::BF16] {
        // lengths with and without a tail of the groups of four, and a view one element in
        // (misaligned for the grouped loads)
        for (n, skip) in [(1usize, 0usize), (7, 0), (1031, 0), (4096, 0), (4097, 1)] {
            let x = round(&rand_vec(n, -2.0, 2.0, 21 + n as u64), dtype);
            let u = round(&rand_vec(n - skip, -1.0, 1.0, 22 + n as u64), dtype);
            for dev in devices() {
                let what = format!("{dev} {dtype} n={n} skip={skip}");
                let xh = on(&x, &[n], dtype, dev).requires_grad_(true).unwrap();
                let xv = xh.narrow(0, skip, n - skip).unwrap();
                let yh = xv.dropout_with(0.3, &mut Generator::new(9)).unwrap();
                assert_eq!(yh.dtype(), dtype);
                let xf = Tensor::from_vec(x[skip..].to_vec(), &[n - skip], dev).unwrap();
                let yf = xf.dropout_with(0.3, &mut Generator::new(9)).unwrap();
                let mask: Vec<f32> = yf
                    .to_vec()
                    .unwrap()
                    .iter()
                    .zip(&x[skip..])
                    .map(|(&y, &x)| if y == 0.0 && x != 0.0 { 0.0 } else { 1.0 })
                    .collect();
                assert_eq!(
                    yh.to_vec().unwrap(),
                    round(&yf.to_vec().unwrap(), dtype),
                    "{what}"
                );
                // backward: the upstream gradient times the same mask and scale, rounded once
                let uh = on(&u, &[n - skip], dtype, dev);
                yh.mul(&uh).unwrap().sum().unwrap().backward().unwrap();
                let g = xh.grad().unwrap();
                assert_eq!(g.dtype(), dtype, "{what}");
                let g = g.to_vec().unwrap();
                let want: Vec<f32> = u
                    .iter()
                    .zip(&mask)
                    .map(|(&u, &m)| {
                        if m == 0.0 {
                            0.0
                        } else {
                            u * (1.0 / (1.0 - 0.3f32))
                        }
                    })
                    .collect();
                assert!(g[..skip].iter().all(|&v| v == 0.0), "{what}");
                assert_eq!(g[skip..], round(&want, dtype)[..], "{what} backward");
                assert_eq!(xh.dropout(0.3, false).unwrap().dtype(), dtype);
            }
        }
    }
}

/// Mixing 16-bit and f32 operands in the norms and losses is an error outside an autocast scope.
#[test]
fn mixed_dtypes_are_refused_outside_autocast() {
    for dev in devices() {
        let x = Tensor::ones(&[2, 4], dev)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let g32 = Tensor::ones(&[4], dev).unwrap();
        let err = x.layer_norm(&g32, &g32, 1e-5).unwrap_err().to_string();
        assert!(err.contains("layer_norm"), "{err}");
        let err = x
            .mse(&Tensor::ones(&[2, 4], dev).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("mse"), "{err}");
    }
}

/// `where_cond`, `masked_fill`, `triu`/`tril`, `clamp` and `pad` on 16-bit tensors read and write
/// the input's dtype and give the f32 op's result on the widened values, rounded once (so
/// exactly, but for a fill value or bound the dtype cannot hold), with gradients in that dtype
/// equal to the f32 op's gradient rounded. A select takes a mask of any float dtype, and an inf
/// or NaN in the branch not taken never reaches the output.
#[test]
fn masking_ops_round_the_f32_result_once() {
    for (r, c) in [(1usize, 1usize), (7, 33), (2, 1031)] {
        for dtype in [DType::F16, DType::BF16] {
            let other = if dtype == DType::F16 {
                DType::BF16
            } else {
                DType::F16
            };
            let mut x = round(&rand_vec(r * c, -3.0, 3.0, 31 + c as u64), dtype);
            let mut y = round(&rand_vec(r * c, -3.0, 3.0, 32 + c as u64), dtype);
            // the select's untaken branch holds a NaN and an inf
            x[0] = 1.0;
            y[0] = f32::NAN;
            if r * c > 1 {
                x[1] = -1.0;
                y[1] = f32::INFINITY;
            }
            let w = round(&rand_vec((r + 3) * (c + 3), -1.0, 1.0, 33), dtype);
            for dev in devices() {
                type Op = fn(&Tensor, &Tensor, DType) -> camel_core::Result<Tensor>;
                let ops: [(&str, Op); 9] = [
                    ("where_cond", |x, y, _| x.gt_scalar(0.0)?.where_cond(x, y)),
                    ("where_cond, an f32 mask", |x, y, _| {
                        let m = x.to_dtype(DType::F32)?.gt_scalar(0.0)?;
                        m.where_cond(x, y)
                    }),
                    ("where_cond, a mask of the other 16-bit dtype", |x, y, o| {
                        let m = x.gt_scalar(0.0)?.to_dtype(o)?;
                        m.where_cond(x, y)
                    }),
                    ("masked_fill", |x, _, _| {
                        x.masked_fill(&x.lt_scalar(0.5)?, -0.1)
                    }),
                    ("triu", |x, _, _| x.triu(1)),
                    ("tril", |x, _, _| x.tril(-2)),
                    ("clamp", |x, _, _| x.clamp(-0.3, 1.7)),
                    ("pad", |x, _, _| x.pad(&[(1, 2), (0, 3)], 0.1)),
                    ("where_cond scalar", |x, y, _| {
                        let z = Tensor::zeros(&[], x.device())?.to_dtype(x.dtype())?;
                        y.lt(x)?.where_cond(&z, y)
                    }),
                ];
                for (name, f) in ops {
                    let what = format!("{dev} {dtype} {name} [{r}, {c}]");
                    let xh = on(&x, &[r, c], dtype, dev).requires_grad_(true).unwrap();
                    let yh = on(&y, &[r, c], dtype, dev);
                    let got = f(&xh, &yh, other).unwrap();
                    assert_eq!(got.dtype(), dtype, "{what}");
                    let xf = Tensor::from_vec(x.clone(), &[r, c], dev)
                        .unwrap()
                        .requires_grad_(true)
                        .unwrap();
                    let yf = Tensor::from_vec(y.clone(), &[r, c], dev).unwrap();
                    let want = f(&xf, &yf, other).unwrap();
                    let (g, wv) = (got.to_vec().unwrap(), want.to_vec().unwrap());
                    let wr = round(&wv, dtype);
                    assert_eq!(g.len(), wr.len(), "{what}");
                    for (i, (a, b)) in g.iter().zip(&wr).enumerate() {
                        assert!(
                            a == b || (a.is_nan() && b.is_nan()),
                            "{what} [{i}]: {a} vs {b}"
                        );
                    }
                    if name == "where_cond scalar" {
                        continue;
                    }
                    // the gradient of Σ w·op(x): w (of the dtype, so exact) where x reaches the
                    // output, 0 elsewhere
                    let n = got.numel();
                    let wt = |d: DType| on(&w[..n], got.shape(), d, dev);
                    got.mul(&wt(dtype))
                        .unwrap()
                        .sum()
                        .unwrap()
                        .backward()
                        .unwrap();
                    want.mul(&wt(DType::F32))
                        .unwrap()
                        .sum()
                        .unwrap()
                        .backward()
                        .unwrap();
                    let gh = xh.grad().unwrap();
                    assert_eq!(gh.dtype(), dtype, "{what} grad");
                    assert_eq!(
                        gh.to_vec().unwrap(),
                        round(&xf.grad().unwrap().to_vec().unwrap(), dtype),
                        "{what} grad"
                    );
                }
                // the values of a select share one dtype
                let xh = on(&x, &[r, c], dtype, dev);
                let xf = Tensor::from_vec(x.clone(), &[r, c], dev).unwrap();
                let err = xh.gt_scalar(0.0).unwrap().where_cond(&xh, &xf).unwrap_err();
                assert!(err.to_string().contains("where_cond"), "{err}");
            }
        }
    }
}

/// The maximum and minimum of 16-bit tensors along the last dim and a middle dim (the
/// reduction kernels' row and column paths) are elements of the input, in its dtype; a NaN
/// wins; tied extremes share the gradient equally; argmax and argmin give the first extreme or
/// the first NaN.
#[test]
fn extremes_of_16_bit_tensors_are_elements_of_the_input() {
    for (rows, cols) in [
        (1usize, 1usize),
        (7, 7),
        (127, 3),
        (3, 1031),
        (2, 4097),
        (1000, 5),
    ] {
        for dtype in [DType::F16, DType::BF16] {
            // few distinct values, so ties are common
            let mut x: Vec<f32> = round(&rand_vec(rows * cols, -8.0, 8.0, cols as u64), dtype)
                .iter()
                .map(|v| v.round())
                .collect();
            let nan_row = rows / 2;
            if cols > 2 {
                x[nan_row * cols + cols / 2] = f32::NAN;
            }
            let row = |r: usize| &x[r * cols..(r + 1) * cols];
            for dev in devices() {
                let what = format!("{dev} {dtype} [{rows}, {cols}]");
                let t = on(&x, &[rows, cols], dtype, dev);
                for min in [false, true] {
                    let pick = |a: f32, b: f32| if min { a.min(b) } else { a.max(b) };
                    let better = |v: f32, best: f32| if min { v < best } else { v > best };
                    // along the last dim
                    let want: Vec<f32> = (0..rows)
                        .map(|r| {
                            let rv = row(r);
                            if rv.iter().any(|v| v.is_nan()) {
                                f32::NAN
                            } else {
                                rv.iter().cloned().fold(rv[0], pick)
                            }
                        })
                        .collect();
                    let arg: Vec<i64> = (0..rows)
                        .map(|r| {
                            let rv = row(r);
                            if let Some(i) = rv.iter().position(|v| v.is_nan()) {
                                return i as i64;
                            }
                            let mut b = 0;
                            for (i, &v) in rv.iter().enumerate() {
                                if better(v, rv[b]) {
                                    b = i;
                                }
                            }
                            b as i64
                        })
                        .collect();
                    let got = if min {
                        t.min_dim(-1, false)
                    } else {
                        t.max_dim(-1, false)
                    }
                    .unwrap();
                    assert_eq!(got.dtype(), dtype, "{what}");
                    let g = got.to_vec().unwrap();
                    for r in 0..rows {
                        assert!(
                            g[r] == want[r] || (g[r].is_nan() && want[r].is_nan()),
                            "{what} min={min} row {r}: {} vs {}",
                            g[r],
                            want[r]
                        );
                    }
                    let a = if min {
                        t.argmin_last()
                    } else {
                        t.argmax_last()
                    }
                    .unwrap();
                    assert_eq!(a.to_vec_i64().unwrap(), arg, "{what} arg, min={min}");
                    // along dim 0 (a middle dim of [1, rows, cols])
                    let got = if min {
                        t.min_dim(0, true)
                    } else {
                        t.max_dim(0, true)
                    }
                    .unwrap();
                    assert_eq!(got.shape(), [1, cols], "{what}");
                    let g = got.to_vec().unwrap();
                    for c in 0..cols {
                        let col: Vec<f32> = (0..rows).map(|r| x[r * cols + c]).collect();
                        let w = if col.iter().any(|v| v.is_nan()) {
                            f32::NAN
                        } else {
                            col.iter().cloned().fold(col[0], pick)
                        };
                        assert!(
                            g[c] == w || (g[c].is_nan() && w.is_nan()),
                            "{what} min={min} col {c}: {} vs {w}",
                            g[c]
                        );
                    }
                }
            }
        }
    }
    // ties share the gradient: [1, 3, 3, 2] → [0, ½, ½, 0] times the upstream gradient
    for dtype in [DType::F16, DType::BF16] {
        for dev in devices() {
            let x = on(&[1.0, 3.0, 3.0, 2.0], &[1, 4], dtype, dev)
                .requires_grad_(true)
                .unwrap();
            let u = on(&[0.75], &[1], dtype, dev);
            x.max_dim(1, false)
                .unwrap()
                .mul(&u)
                .unwrap()
                .sum()
                .unwrap()
                .backward()
                .unwrap();
            let g = x.grad().unwrap();
            assert_eq!(g.dtype(), dtype);
            assert_eq!(
                g.to_vec().unwrap(),
                [0.0, 0.375, 0.375, 0.0],
                "{dev} {dtype}"
            );
        }
    }
}

/// The variance of 16-bit tensors over one and several dims: the f64 variance of the 16-bit
/// values rounded once (f32 inside an autocast scope), and its gradient `2(x − mean)/(n − k)`
/// times the upstream gradient, rounded once to the dtype.
#[test]
fn variance_of_16_bit_tensors_accumulates_in_f32() {
    for (a, b, c) in [
        (1usize, 2usize, 1usize),
        (3, 7, 5),
        (2, 127, 3),
        (1, 1031, 4),
    ] {
        for dtype in [DType::F16, DType::BF16] {
            let x = round(&rand_vec(a * b * c, -3.0, 3.0, b as u64), dtype);
            for dev in devices() {
                for (dims, corr) in [(vec![-1isize], 1usize), (vec![0, 1], 0)] {
                    let what = format!("{dev} {dtype} [{a}, {b}, {c}] dims {dims:?}");
                    // the reduced groups of the f64 reference
                    let groups: Vec<Vec<usize>> = if dims == [-1] {
                        (0..a * b).map(|o| (o * c..(o + 1) * c).collect()).collect()
                    } else {
                        (0..c)
                            .map(|k| (0..a * b).map(|o| o * c + k).collect())
                            .collect()
                    };
                    let n = groups[0].len();
                    if n <= corr {
                        continue;
                    }
                    let stats: Vec<(f64, f64)> = groups
                        .iter()
                        .map(|g| {
                            let m = g.iter().map(|&i| x[i] as f64).sum::<f64>() / n as f64;
                            let ss: f64 = g.iter().map(|&i| (x[i] as f64 - m).powi(2)).sum();
                            (m, ss / (n - corr) as f64)
                        })
                        .collect();
                    let want: Vec<f64> = stats.iter().map(|s| s.1).collect();
                    let t = on(&x, &[a, b, c], dtype, dev).requires_grad_(true).unwrap();
                    let v = t.var_dims(&dims, corr, false).unwrap();
                    assert_rounded(&what, &v, &want, dtype, |w| 1e-5 * (1.0 + w.abs()));
                    let inside = autocast(dtype, || t.var_dims(&dims, corr, false)).unwrap();
                    assert_eq!(inside.unwrap().dtype(), DType::F32, "{what} autocast");
                    // backward with an upstream gradient of 1 per output
                    v.sum().unwrap().backward().unwrap();
                    let g = t.grad().unwrap();
                    assert_eq!(g.dtype(), dtype, "{what} grad");
                    let mut gw = vec![0.0f64; x.len()];
                    for (grp, (m, _)) in groups.iter().zip(&stats) {
                        for &i in grp {
                            gw[i] = 2.0 * (x[i] as f64 - m) / (n - corr) as f64;
                        }
                    }
                    assert_rounded(&format!("{what} grad"), &g, &gw, dtype, |_| 1e-5);
                }
            }
        }
    }
}

/// The scaled, masked softmax of 16-bit scores at awkward lengths (past the rows its 16-bit
/// kernels hold too), causal or not: the f64 softmax of the visible keys rounded once, 0 on the
/// masked keys, and the backward computed from the rounded output, rounded once.
#[test]
fn masked_softmax_in_16_bits_rounds_each_output_once() {
    let scale = 0.37f32;
    for (b, tq, tk) in [
        (1usize, 1usize, 1usize),
        (2, 7, 7),
        (1, 5, 127),
        (1, 3, 1000),
        (1, 2, 4097),
        (1, 1, 16385),
    ] {
        for dtype in [DType::F16, DType::BF16] {
            let n = b * tq * tk;
            let x = round(&rand_vec(n, -8.0, 8.0, tk as u64), dtype);
            let w = round(&rand_vec(n, -1.0, 1.0, 5 + tk as u64), dtype);
            for dev in devices() {
                for causal in [false, true] {
                    let what = format!("{dev} {dtype} [{b}, {tq}, {tk}] causal={causal}");
                    let xt = on(&x, &[b, tq, tk], dtype, dev)
                        .requires_grad_(true)
                        .unwrap();
                    let y = xt.scaled_masked_softmax(scale, causal).unwrap();
                    let visible = |r: usize| if causal { r % tq + 1 + tk - tq } else { tk };
                    let want: Vec<f64> = x
                        .chunks(tk)
                        .enumerate()
                        .flat_map(|(r, row)| {
                            let v = visible(r);
                            let s: Vec<f64> =
                                row[..v].iter().map(|&e| (scale * e) as f64).collect();
                            let mut o = row_softmax(&s, false);
                            o.resize(tk, 0.0);
                            o
                        })
                        .collect();
                    assert_rounded(&what, &y, &want, dtype, |v| 1e-6 * (1.0 + v.abs()));
                    let inside = autocast(dtype, || xt.scaled_masked_softmax(scale, causal));
                    assert_eq!(inside.unwrap().unwrap().dtype(), DType::F32, "{what}");
                    // backward from the rounded output y, upstream gradient w (exact)
                    let wt = on(&w, &[b, tq, tk], dtype, dev);
                    y.mul(&wt).unwrap().sum().unwrap().backward().unwrap();
                    let got = xt.grad().unwrap();
                    assert_eq!(got.dtype(), dtype, "{what}");
                    let (got, yv) = (got.to_vec().unwrap(), y.to_vec().unwrap());
                    for r in 0..b * tq {
                        let v = visible(r);
                        let (yr, gr) = (&yv[r * tk..r * tk + v], &w[r * tk..r * tk + v]);
                        let dot: f64 = yr.iter().zip(gr).map(|(&y, &g)| y as f64 * g as f64).sum();
                        let dot_err = v as f64
                            * 2f64.powi(-24)
                            * yr.iter()
                                .zip(gr)
                                .map(|(&y, &g)| (y * g).abs() as f64)
                                .sum::<f64>();
                        for c in 0..tk {
                            let g = got[r * tk + c] as f64;
                            if c >= v {
                                assert_eq!(g, 0.0, "{what} masked grad [{r}, {c}]");
                                continue;
                            }
                            let (yi, gi) = (yr[c] as f64, gr[c] as f64);
                            let want = scale as f64 * yi * (gi - dot);
                            let tol = ulp(want, dtype)
                                + scale as f64 * yi.abs() * dot_err
                                + 2f64.powi(-22) * (gi.abs() + want.abs());
                            assert!(
                                (g - want).abs() <= tol,
                                "{what} grad [{r}, {c}]: got {g}, reference {want}, bound {tol:e}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The MSE of two 16-bit tensors: the f64 mean of the squared differences of their values,
/// rounded once (f32 inside an autocast scope), and the gradients `±2(a − b)/n` times the
/// upstream gradient, rounded once, at lengths that take one block, several, and more elements
/// than the grid's threads, on aligned tensors (four elements a load) and on views one element
/// in (one a load).
#[test]
fn mse_of_16_bit_tensors_sums_in_f32() {
    for (n, skip) in [
        (1usize, 0usize),
        (7, 0),
        (127, 1),
        (1031, 0),
        (1031, 1),
        (200_003, 0),
        (200_003, 1),
    ] {
        for dtype in [DType::F16, DType::BF16] {
            let x = round(&rand_vec(n + skip, -3.0, 3.0, n as u64), dtype);
            let y = round(&rand_vec(n + skip, -3.0, 3.0, 1 + n as u64), dtype);
            let (xs, ys) = (&x[skip..], &y[skip..]);
            let sq: Vec<f64> = xs
                .iter()
                .zip(ys)
                .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
                .collect();
            let want = sq.iter().sum::<f64>() / n as f64;
            for dev in devices() {
                let what = format!("{dev} {dtype} n={n} skip={skip}");
                let af = on(&x, &[n + skip], dtype, dev)
                    .requires_grad_(true)
                    .unwrap();
                let bf = on(&y, &[n + skip], dtype, dev)
                    .requires_grad_(true)
                    .unwrap();
                let (a, b) = (
                    af.narrow(0, skip, n).unwrap(),
                    bf.narrow(0, skip, n).unwrap(),
                );
                let l = a.mse(&b).unwrap();
                // an f32 sum errs by at most n·2⁻²⁴·Σ term
                assert_rounded(&what, &l, &[want], dtype, |w| n as f64 * 2f64.powi(-24) * w);
                let inside = autocast(dtype, || a.mse(&b)).unwrap().unwrap();
                assert_eq!(inside.dtype(), DType::F32, "{what} autocast");
                let got = inside.item().unwrap() as f64;
                let tol = (n as f64 * 2f64.powi(-24) + 2f64.powi(-23)) * want;
                assert!(
                    (got - want).abs() <= tol,
                    "{what} autocast: {got} vs {want}"
                );
                // upstream gradient 3 (exact in every dtype)
                l.mul_scalar(3.0).unwrap().backward().unwrap();
                let mut ga = vec![0.0f64; skip];
                ga.extend(
                    xs.iter()
                        .zip(ys)
                        .map(|(&p, &q)| 3.0 * 2.0 * (p as f64 - q as f64) / n as f64),
                );
                let gb: Vec<f64> = ga.iter().map(|v| -v).collect();
                let tol = |w: f64| 2f64.powi(-21) * w.abs();
                assert_rounded(&format!("{what} da"), &af.grad().unwrap(), &ga, dtype, tol);
                assert_rounded(&format!("{what} db"), &bf.grad().unwrap(), &gb, dtype, tol);
            }
        }
    }
}
