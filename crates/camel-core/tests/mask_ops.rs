//! The masking family against plain-f64 references on every device and every step of the
//! elementwise ladder: comparisons (tensor and scalar, broadcasting, NaN), where_cond,
//! masked_fill, triu/tril, the i64 arange, clamp, abs, minimum/maximum; gradchecks of each
//! differentiable op; error cases checked for their message. Sizes 1, 7, 127 and 1031 (no tile
//! boundary).

mod common;
use camel_core::backend::ladder::Family;
use camel_core::testing::for_each_step;
use camel_core::{Device, Result, Tensor};
use common::*;

const SIZES: [usize; 4] = [1, 7, 127, 1031];

/// NumPy broadcasting of several operands, written out: the output shape and, per output
/// element, each operand's flat index.
fn bcast_index(shapes: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let n = shapes.iter().map(|s| s.len()).max().unwrap();
    let pad = |s: &[usize]| {
        let mut p = vec![1; n - s.len()];
        p.extend_from_slice(s);
        p
    };
    let padded: Vec<Vec<usize>> = shapes.iter().map(|s| pad(s)).collect();
    let out_shape: Vec<usize> = (0..n)
        .map(|d| padded.iter().map(|p| p[d]).max().unwrap())
        .collect();
    let idx = (0..numel(&out_shape))
        .map(|i| {
            let ix = unravel(i, &out_shape);
            padded
                .iter()
                .map(|p| {
                    let j: Vec<usize> = ix.iter().zip(p).map(|(&x, &s)| x % s).collect();
                    ravel(&j, p)
                })
                .collect()
        })
        .collect();
    (out_shape, idx)
}

/// Values on a coarse grid (so two tensors tie often) with a NaN every 13th element.
fn grid_with_nans(n: usize, seed: u64) -> Vec<f32> {
    rand_vec(n, -2.0, 2.0, seed)
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            if i % 13 == 5 {
                f32::NAN
            } else {
                (v * 2.0).round() / 2.0
            }
        })
        .collect()
}

/// Exact comparison where a NaN in the reference must be a NaN in the result.
fn check_nan(what: &str, shape: &[usize], want: &[f64], f: impl Fn(Device) -> Result<Tensor>) {
    for dev in devices() {
        let out = f(dev).unwrap_or_else(|e| panic!("{what} on {dev}: {e}"));
        assert_eq!(out.device(), dev, "{what}: device");
        assert_eq!(out.shape(), shape, "{what} on {dev}: shape");
        let got = out.to_vec().unwrap();
        assert_eq!(got.len(), want.len(), "{what} on {dev}: length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let ok = if w.is_nan() {
                g.is_nan()
            } else {
                g as f64 == w
            };
            assert!(ok, "{what} on {dev}: element {i}: got {g}, reference {w}");
        }
    }
}

/// The error of `r` must name every one of `parts`.
fn err_names(r: Result<Tensor>, parts: &[&str]) {
    let msg = match r {
        Ok(t) => panic!(
            "expected an error naming {parts:?}, got a tensor of shape {:?}",
            t.shape()
        ),
        Err(e) => e.to_string(),
    };
    for p in parts {
        assert!(msg.contains(p), "error {msg:?} does not name {p:?}");
    }
}

type Cmp = fn(&Tensor, &Tensor) -> Result<Tensor>;
type CmpS = fn(&Tensor, f32) -> Result<Tensor>;
/// A comparison: its name, tensor form, scalar form and f64 reference.
type Comparison = (&'static str, Cmp, CmpS, fn(f64, f64) -> bool);

fn comparisons() -> [Comparison; 6] {
    [
        ("eq", Tensor::eq, Tensor::eq_scalar, |a, b| a == b),
        ("ne", Tensor::ne, Tensor::ne_scalar, |a, b| a != b),
        ("lt", Tensor::lt, Tensor::lt_scalar, |a, b| a < b),
        ("le", Tensor::le, Tensor::le_scalar, |a, b| a <= b),
        ("gt", Tensor::gt, Tensor::gt_scalar, |a, b| a > b),
        ("ge", Tensor::ge, Tensor::ge_scalar, |a, b| a >= b),
    ]
}

#[test]
fn comparisons_give_ieee_masks_with_broadcasting() {
    for_each_step(Family::Elementwise, |step| {
        for n in SIZES {
            let cases: [(Vec<usize>, Vec<usize>); 3] = [
                (vec![n], vec![n]),
                (vec![3, n], vec![n]),
                (vec![n, 1], vec![1, 5]),
            ];
            for (sa, sb) in cases {
                let a = grid_with_nans(numel(&sa), n as u64);
                let b = grid_with_nans(numel(&sb), n as u64 + 1);
                let (out_shape, idx) = bcast_index(&[&sa, &sb]);
                for (name, f, _, r) in comparisons() {
                    let want: Vec<f64> = idx
                        .iter()
                        .map(|ix| r(a[ix[0]] as f64, b[ix[1]] as f64) as i32 as f64)
                        .collect();
                    let what = format!("{name} {sa:?} vs {sb:?} at step {}", step.name);
                    check(&what, &out_shape, &want, EXACT, |d| {
                        let out = f(&t(&a, &sa, d), &t(&b, &sb, d))?;
                        assert!(!out.requires_grad());
                        Ok(out)
                    });
                }
            }
            let a = grid_with_nans(n, 7 * n as u64);
            for s in [0.5f32, -1.0, f32::INFINITY, f32::NAN] {
                for (name, _, f, r) in comparisons() {
                    let want: Vec<f64> = a
                        .iter()
                        .map(|&v| r(v as f64, s as f64) as i32 as f64)
                        .collect();
                    check(
                        &format!("{name}_scalar({s}) [{n}]"),
                        &[n],
                        &want,
                        EXACT,
                        |d| f(&t(&a, &[n], d), s),
                    );
                }
            }
        }
    });
}

#[test]
fn comparisons_do_not_record_grad_and_eq_mask_is_eq() {
    for d in devices() {
        let a = t(&[1.0, 2.0, f32::NAN], &[3], d)
            .requires_grad_(true)
            .unwrap();
        let b = t(&[1.0, 3.0, f32::NAN], &[3], d);
        assert_eq!(a.eq(&b).unwrap().to_vec().unwrap(), [1.0, 0.0, 0.0]);
        assert_eq!(a.eq_mask(&b).unwrap().to_vec().unwrap(), [1.0, 0.0, 0.0]);
        assert_eq!(a.ne(&b).unwrap().to_vec().unwrap(), [0.0, 1.0, 1.0]);
        assert!(!a.lt(&b).unwrap().requires_grad());
        assert!(!a.gt_scalar(0.0).unwrap().requires_grad());
        err_names(a.eq(&t(&[1.0, 2.0], &[2], d)), &["eq", "[3]", "[2]"]);
        let i = ti(&[1, 2, 3], &[3], d);
        err_names(i.lt_scalar(1.0), &["lt_scalar"]);
    }
}

#[test]
fn where_cond_selects_with_broadcasting() {
    for_each_step(Family::Elementwise, |_| {
        for n in SIZES {
            let (sm, sa, sb) = (vec![3, n], vec![n], vec![3, 1]);
            let m: Vec<f32> = rand_vec(3 * n, 0.0, 1.0, n as u64)
                .iter()
                .map(|&v| {
                    if v < 0.5 {
                        0.0
                    } else if v < 0.75 {
                        1.0
                    } else {
                        -2.0
                    }
                })
                .collect();
            let a = rand_vec(n, -2.0, 2.0, 1);
            // inf and NaN in on_false only where the mask picks on_true must never show.
            let b = vec![f32::INFINITY, f32::NAN, -1.5];
            let (out_shape, idx) = bcast_index(&[&sm, &sa, &sb]);
            let want: Vec<f64> = idx
                .iter()
                .map(|ix| if m[ix[0]] != 0.0 { a[ix[1]] } else { b[ix[2]] } as f64)
                .collect();
            check_nan(
                &format!("where_cond {sm:?} {sa:?} {sb:?}"),
                &out_shape,
                &want,
                |d| t(&m, &sm, d).where_cond(&t(&a, &sa, d), &t(&b, &sb, d)),
            );
        }
    });
    for d in devices() {
        let m = t(&[1.0, 0.0], &[2], d);
        err_names(
            m.where_cond(&t(&[1.0; 3], &[3], d), &t(&[0.0; 2], &[2], d)),
            &["where_cond", "[3]", "[2]"],
        );
        err_names(
            m.where_cond(&ti(&[1, 2], &[2], d), &t(&[0.0; 2], &[2], d)),
            &["where_cond", "i64"],
        );
    }
}

#[test]
fn where_cond_gradcheck() {
    let m: Vec<f32> = (0..21).map(|i| (i % 3 == 0) as i32 as f32).collect();
    let f = move |x: &[Tensor]| {
        let mask = t(&m, &[3, 7], x[0].device());
        mask.where_cond(&x[0], &x[1])
    };
    gradcheck_all(
        "where_cond [3,7] ← [7], [3,1]",
        f,
        &[
            hf(rand_vec(7, -1.0, 1.0, 2), &[7]),
            hf(rand_vec(3, -1.0, 1.0, 3), &[3, 1]),
        ],
    );
}

#[test]
fn masked_fill_fills_where_set() {
    for_each_step(Family::Elementwise, |_| {
        for n in SIZES {
            let shape = [4, n];
            let x = rand_vec(4 * n, -2.0, 2.0, n as u64);
            let mrow: Vec<f32> = (0..n).map(|j| (j % 3 == 1) as i32 as f32).collect();
            let want: Vec<f64> = (0..4 * n)
                .map(|i| {
                    if mrow[i % n] != 0.0 {
                        f64::NEG_INFINITY
                    } else {
                        x[i] as f64
                    }
                })
                .collect();
            check_nan(
                &format!("masked_fill -inf [4,{n}] by [{n}]"),
                &shape,
                &want,
                |d| t(&x, &shape, d).masked_fill(&t(&mrow, &[n], d), f32::NEG_INFINITY),
            );
        }
    });
    for d in devices() {
        let x = t(&[1.0; 6], &[2, 3], d);
        err_names(
            x.masked_fill(&t(&[1.0; 12], &[2, 2, 3], d), 0.0),
            &["masked_fill", "[2, 3]", "[2, 2, 3]"],
        );
        err_names(
            x.masked_fill(&t(&[1.0; 2], &[2], d), 0.0),
            &["masked_fill", "[2]"],
        );
    }
}

#[test]
fn masked_fill_gradcheck() {
    let m: Vec<f32> = (0..7).map(|j| (j % 2) as f32).collect();
    gradcheck_all(
        "masked_fill [3,7]",
        move |x: &[Tensor]| {
            x[0].masked_fill(&t(&m, &[1, 7], x[0].device()), -5.0)?
                .mul(&x[0])
        },
        &[hf(rand_vec(21, -1.0, 1.0, 4), &[3, 7])],
    );
}

fn ref_triangle(x: &[f32], shape: &[usize], k: i64, upper: bool) -> Vec<f64> {
    let (r, c) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let (j, ii) = ((i % c) as i64, ((i / c) % r) as i64);
            let keep = if upper { j - ii >= k } else { j - ii <= k };
            if keep {
                v as f64
            } else {
                0.0
            }
        })
        .collect()
}

#[test]
fn triu_tril_keep_their_triangle() {
    for (rows, cols) in [(1, 1), (7, 7), (7, 127), (33, 1031), (127, 1)] {
        let shape = [2, rows, cols];
        // NaNs outside the triangle are written as 0.
        let x = grid_with_nans(numel(&shape), rows as u64);
        for k in [-2i64, 0, 1, 5] {
            for upper in [true, false] {
                let name = if upper { "triu" } else { "tril" };
                let want = ref_triangle(&x, &shape, k, upper);
                check_nan(&format!("{name}({k}) {shape:?}"), &shape, &want, |d| {
                    let x = t(&x, &shape, d);
                    if upper {
                        x.triu(k)
                    } else {
                        x.tril(k)
                    }
                });
            }
        }
    }
    for d in devices() {
        err_names(t(&[1.0; 3], &[3], d).triu(0), &["triu", "[3]", "rank"]);
        err_names(t(&[1.0], &[], d).tril(0), &["tril", "rank"]);
    }
}

#[test]
fn triu_tril_gradcheck() {
    gradcheck_all(
        "triu(1) [2,3,7]",
        |x: &[Tensor]| x[0].triu(1),
        &[hf(rand_vec(42, -1.0, 1.0, 5), &[2, 3, 7])],
    );
    gradcheck_all(
        "tril(-1) [7,3] of a transpose",
        |x: &[Tensor]| x[0].transpose(0, 1)?.tril(-1),
        &[hf(rand_vec(21, -1.0, 1.0, 6), &[3, 7])],
    );
}

#[test]
fn arange_i64() {
    for n in SIZES {
        let want: Vec<i64> = (0..n as i64).collect();
        check_i64(&format!("arange(0, {n}, 1)"), &[n], &want, |d| {
            Tensor::arange(0, n as i64, 1, d)
        });
        let want: Vec<i64> = (0..n as i64).map(|i| 5 - 3 * i).collect();
        let end = 5 - 3 * n as i64 + 1;
        check_i64(&format!("arange(5, {end}, -3)"), &[n], &want, |d| {
            Tensor::arange(5, end, -3, d)
        });
    }
    check_i64("arange(-7, 8, 5)", &[3], &[-7, -2, 3], |d| {
        Tensor::arange(-7, 8, 5, d)
    });
    check_i64("arange(2, 2, 1)", &[0], &[], |d| Tensor::arange(2, 2, 1, d));
    check_i64(
        "arange near i64::MAX",
        &[2],
        &[i64::MAX - 3, i64::MAX - 1],
        |d| Tensor::arange(i64::MAX - 3, i64::MAX, 2, d),
    );
    // from one end of i64 to the other: `i · step` overflows i64 though every value fits
    let step = i64::MAX / 2 + 1;
    check_i64(
        "arange(i64::MIN, i64::MAX, 2^62)",
        &[4],
        &[i64::MIN, i64::MIN / 2, 0, step],
        |d| Tensor::arange(i64::MIN, i64::MAX, step, d),
    );
    check_i64(
        "arange(i64::MAX, i64::MIN, -2^62)",
        &[4],
        &[i64::MAX, step - 1, -1, -step - 1],
        |d| Tensor::arange(i64::MAX, i64::MIN, -step, d),
    );
    for d in devices() {
        assert_eq!(
            Tensor::arange(0, 3, 1, d).unwrap().dtype(),
            camel_core::DType::I64
        );
        err_names(Tensor::arange(0, 5, 0, d), &["arange", "step", "non-zero"]);
        err_names(Tensor::arange(5, 0, 1, d), &["arange", "away"]);
        err_names(
            Tensor::arange(i64::MIN, i64::MAX, 1, d),
            &["arange", "too many"],
        );
    }
}

#[test]
fn clamp_and_abs() {
    for_each_step(Family::Elementwise, |_| {
        for n in SIZES {
            let x = grid_with_nans(n, 3 * n as u64);
            for (lo, hi) in [
                (-0.5f32, 0.7f32),
                (f32::NEG_INFINITY, 0.3),
                (0.1, f32::INFINITY),
                (1.0, -1.0),
            ] {
                let want: Vec<f64> = x
                    .iter()
                    .map(|&v| {
                        if v.is_nan() {
                            f64::NAN
                        } else {
                            (v.max(lo)).min(hi) as f64
                        }
                    })
                    .collect();
                check_nan(&format!("clamp({lo}, {hi}) [{n}]"), &[n], &want, |d| {
                    t(&x, &[n], d).clamp(lo, hi)
                });
            }
            let want: Vec<f64> = x.iter().map(|&v| (v as f64).abs()).collect();
            check_nan(&format!("abs [{n}]"), &[n], &want, |d| t(&x, &[n], d).abs());
        }
    });
    for d in devices() {
        err_names(t(&[1.0], &[1], d).clamp(f32::NAN, 1.0), &["clamp", "NaN"]);
        // gradient of clamp: 1 inside, 0 outside; of abs: sign, 0 at 0.
        let x = t(&[-2.0, -0.5, 0.0, 0.5, 2.0], &[5], d)
            .requires_grad_(true)
            .unwrap();
        x.clamp(-1.0, 1.0)
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        assert_eq!(
            x.grad().unwrap().to_vec().unwrap(),
            [0.0, 1.0, 1.0, 1.0, 0.0]
        );
        let x = t(&[-2.0, 0.0, 3.0], &[3], d).requires_grad_(true).unwrap();
        x.abs().unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(x.grad().unwrap().to_vec().unwrap(), [-1.0, 0.0, 1.0]);
    }
}

#[test]
fn clamp_abs_gradcheck() {
    // Values at least 0.05 away from the kinks (±0.5 for clamp, 0 for abs) so the central
    // difference never straddles one.
    let x: Vec<f32> = rand_away(21, 0.05, 1.0, 7)
        .iter()
        .map(|&v| v + 0.5 * v.signum())
        .collect();
    gradcheck_all(
        "clamp(-0.5, 0.5) [3,7]",
        |x: &[Tensor]| x[0].clamp(-0.5, 0.5),
        &[hf(x.clone(), &[3, 7])],
    );
    gradcheck_all(
        "clamp(-inf, 0.5) [3,7]",
        |x: &[Tensor]| x[0].clamp(f32::NEG_INFINITY, 0.5),
        &[hf(x, &[3, 7])],
    );
    gradcheck_all(
        "abs [7]",
        |x: &[Tensor]| x[0].abs(),
        &[hf(rand_away(7, 0.05, 1.0, 8), &[7])],
    );
}

#[test]
fn minimum_maximum_broadcast_and_propagate_nan() {
    for_each_step(Family::Elementwise, |_| {
        for n in SIZES {
            for (sa, sb) in [
                (vec![n], vec![n]),
                (vec![2, n], vec![1, n]),
                (vec![n, 1], vec![3]),
            ] {
                let a = grid_with_nans(numel(&sa), n as u64 + 11);
                let b = grid_with_nans(numel(&sb), n as u64 + 12);
                let (out_shape, idx) = bcast_index(&[&sa, &sb]);
                for max in [false, true] {
                    let want: Vec<f64> = idx
                        .iter()
                        .map(|ix| {
                            let (x, y) = (a[ix[0]] as f64, b[ix[1]] as f64);
                            if x.is_nan() || y.is_nan() {
                                f64::NAN
                            } else if max {
                                x.max(y)
                            } else {
                                x.min(y)
                            }
                        })
                        .collect();
                    let name = if max { "maximum" } else { "minimum" };
                    check_nan(&format!("{name} {sa:?} {sb:?}"), &out_shape, &want, |d| {
                        let (x, y) = (t(&a, &sa, d), t(&b, &sb, d));
                        if max {
                            x.maximum(&y)
                        } else {
                            x.minimum(&y)
                        }
                    });
                }
            }
        }
    });
    for d in devices() {
        // the gradient goes to the chosen side, half to each on a tie
        let a = t(&[1.0, 5.0, 2.0], &[3], d).requires_grad_(true).unwrap();
        let b = t(&[3.0, 4.0, 2.0], &[3], d).requires_grad_(true).unwrap();
        a.minimum(&b).unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(a.grad().unwrap().to_vec().unwrap(), [1.0, 0.0, 0.5]);
        assert_eq!(b.grad().unwrap().to_vec().unwrap(), [0.0, 1.0, 0.5]);
        err_names(
            a.maximum(&t(&[1.0, 2.0], &[2], d)),
            &["maximum", "[3]", "[2]"],
        );
    }
}

#[test]
fn minimum_maximum_gradcheck() {
    let a = rand_vec(21, -1.0, 1.0, 9);
    // b is a ± 0.1 or 7-wide broadcast away from a, so no central difference crosses a tie.
    let b: Vec<f32> = (0..7)
        .map(|j| if j % 2 == 0 { 2.0 } else { -2.0 })
        .collect();
    let a2: Vec<f32> = a
        .iter()
        .enumerate()
        .map(|(i, &v)| v + if i % 2 == 0 { 0.1 } else { -0.1 })
        .collect();
    gradcheck_all(
        "minimum [3,7] [7]",
        |x: &[Tensor]| x[0].minimum(&x[1]),
        &[hf(a.clone(), &[3, 7]), hf(b.clone(), &[7])],
    );
    gradcheck_all(
        "maximum [3,7] [7]",
        |x: &[Tensor]| x[0].maximum(&x[1]),
        &[hf(a.clone(), &[3, 7]), hf(b, &[7])],
    );
    gradcheck_all(
        "maximum [21] [21]",
        |x: &[Tensor]| x[0].maximum(&x[1]),
        &[hf(a, &[21]), hf(a2, &[21])],
    );
}

#[test]
fn causal_mask_composes_from_arange_and_comparisons() {
    // The attention pattern: mask key j for query i when j > i, then -inf before softmax.
    for d in devices() {
        let n = 7;
        let q = Tensor::arange_f32(0.0, n as f32, 1.0, d)
            .unwrap()
            .reshape(&[n, 1])
            .unwrap();
        let k = Tensor::arange_f32(0.0, n as f32, 1.0, d)
            .unwrap()
            .reshape(&[1, n])
            .unwrap();
        let mask = k.gt(&q).unwrap();
        let ones = Tensor::ones(&[n, n], d).unwrap();
        assert_eq!(
            mask.to_vec().unwrap(),
            ones.triu(1).unwrap().to_vec().unwrap()
        );
        let s = Tensor::zeros(&[n, n], d)
            .unwrap()
            .masked_fill(&mask, f32::NEG_INFINITY)
            .unwrap();
        let p = s.softmax().unwrap().to_vec().unwrap();
        for i in 0..n {
            for j in 0..n {
                let want = if j > i { 0.0 } else { 1.0 / (i + 1) as f32 };
                assert!(
                    (p[i * n + j] - want).abs() < 1e-6,
                    "softmax row {i} col {j} on {d}"
                );
            }
        }
    }
}
