//! Reductions against plain-f64 references: sum/mean/max over everything or one dim (keepdim
//! both ways, negative dims) and argmax_last. Tolerance for sums and means: |got − ref| ≤
//! 1e-5·(Σ|x| over the reduced elements) + 1e-5 (f32 accumulation); max and argmax are exact.

mod common;
use camel_core::backend::ladder::Family;
use camel_core::testing::for_each_step;
use camel_core::Tensor;
use common::*;
use proptest::prelude::*;

/// Reduce `x` (shape `shape`) along `d` with `f` over the reduced values; returns the keepdim
/// shape, the results and Σ|x| of each reduced group.
fn ref_reduce(
    x: &[f32],
    shape: &[usize],
    d: usize,
    f: impl Fn(&[f64]) -> f64,
) -> (Vec<usize>, Vec<f64>, Vec<f64>) {
    let mut out_shape = shape.to_vec();
    out_shape[d] = 1;
    let (mut out, mut mag) = (Vec::new(), Vec::new());
    for o in 0..numel(&out_shape) {
        let mut idx = unravel(o, &out_shape);
        let mut group = Vec::new();
        for k in 0..shape[d] {
            idx[d] = k;
            group.push(x[ravel(&idx, shape)] as f64);
        }
        out.push(f(&group));
        mag.push(group.iter().map(|v| v.abs()).sum());
    }
    (out_shape, out, mag)
}

fn sum(v: &[f64]) -> f64 {
    v.iter().sum()
}
fn mean(v: &[f64]) -> f64 {
    sum(v) / v.len() as f64
}
fn max(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
}
fn min(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::INFINITY, f64::min)
}

/// Each group of the reduction of `x` (shape `shape`) over the sorted dims `ds`, in the order of
/// the keepdim-shaped output; returns that shape and the groups.
fn ref_reduce_dims(x: &[f32], shape: &[usize], ds: &[usize]) -> (Vec<usize>, Vec<Vec<f64>>) {
    let mut keep = shape.to_vec();
    for &d in ds {
        keep[d] = 1;
    }
    let mut groups = vec![Vec::new(); numel(&keep)];
    for (i, &v) in x.iter().enumerate() {
        let mut idx = unravel(i, shape);
        for &d in ds {
            idx[d] = 0;
        }
        groups[ravel(&idx, &keep)].push(v as f64);
    }
    (keep, groups)
}

/// The variance of values in [-2, 2] (about 1.3) in f32 two passes: relative error 1e-4.
const VAR: Tol = Tol {
    atol: 1e-5,
    rtol: 1e-4,
};

/// Tolerance for a sum over elements whose absolute values add up to `mag`.
fn sum_tol(mag: f64) -> Tol {
    Tol {
        atol: 1e-5 * mag + 1e-5,
        rtol: 0.0,
    }
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn reduce_dim(shape in awkward_shape(), seed in any::<u64>(), dsel in 0usize..3,
                  keepdim in any::<bool>(), negative in any::<bool>()) {
        let rank = shape.len();
        let d = dsel % rank;
        let dim = if negative { d as isize - rank as isize } else { d as isize };
        let x = rand_vec(numel(&shape), -2.0, 2.0, seed);
        let mut out_shape = shape.clone();
        if keepdim { out_shape[d] = 1 } else { out_shape.remove(d); }
        let what = |op: &str| format!("{op}(dim {dim}, keepdim {keepdim}) of {shape:?}");
        for (name, f, exact) in [("sum", sum as fn(&[f64]) -> f64, false), ("mean", mean, false), ("max", max, true), ("min", min, true)] {
            let (_, want, mag) = ref_reduce(&x, &shape, d, f);
            let mag = mag.iter().cloned().fold(0.0, f64::max) / if name == "mean" { shape[d] as f64 } else { 1.0 };
            let tol = if exact { EXACT } else { sum_tol(mag) };
            check(&what(name), &out_shape, &want, tol, |dev| {
                let x = t(&x, &shape, dev);
                match name {
                    "sum" => x.sum_dim(dim, keepdim),
                    "mean" => x.mean_dim(dim, keepdim),
                    "min" => x.min_dim(dim, keepdim),
                    _ => x.max_dim(dim, keepdim),
                }
            });
        }
    }

    #[test]
    fn reduce_all(shape in awkward_shape(), seed in any::<u64>()) {
        let x = rand_vec(numel(&shape), -2.0, 2.0, seed);
        let xs = f64s(&x);
        let mag: f64 = xs.iter().map(|v| v.abs()).sum();
        check(&format!("sum {shape:?}"), &[], &[sum(&xs)], sum_tol(mag), |d| t(&x, &shape, d).sum());
        check(&format!("mean {shape:?}"), &[], &[mean(&xs)], sum_tol(mag / xs.len() as f64), |d| {
            t(&x, &shape, d).mean()
        });
        check(&format!("max {shape:?}"), &[], &[max(&xs)], EXACT, |d| t(&x, &shape, d).max());
        check(&format!("min {shape:?}"), &[], &[min(&xs)], EXACT, |d| t(&x, &shape, d).min());
    }

    #[test]
    fn argmax_last(shape in awkward_shape(), seed in any::<u64>()) {
        let x = rand_distinct(numel(&shape), 0.01, seed);
        let cols = *shape.last().unwrap();
        let want: Vec<i64> = x
            .chunks(cols)
            .map(|row| {
                let mut best = 0;
                for j in 0..row.len() {
                    if row[j] > row[best] { best = j; }
                }
                best as i64
            })
            .collect();
        check_i64(&format!("argmax_last {shape:?}"), &shape[..shape.len() - 1], &want, |d| {
            t(&x, &shape, d).argmax_last()
        });
        let want: Vec<i64> = x
            .chunks(cols)
            .map(|row| {
                let mut best = 0;
                for j in 0..row.len() {
                    if row[j] < row[best] { best = j; }
                }
                best as i64
            })
            .collect();
        check_i64(&format!("argmin_last {shape:?}"), &shape[..shape.len() - 1], &want, |d| {
            t(&x, &shape, d).argmin_last()
        });
    }

    #[test]
    fn reduce_dims(shape in prop::collection::vec(dim(), 1..=4), seed in any::<u64>(),
                   pick in any::<u8>(), keepdim in any::<bool>(), negative in any::<bool>()) {
        let rank = shape.len();
        // a subset of the dims from the bits of `pick` (never empty), some given negatively
        let mut ds: Vec<usize> = (0..rank).filter(|d| pick >> d & 1 == 1).collect();
        if ds.is_empty() { ds.push(pick as usize % rank); }
        let dims: Vec<isize> = ds.iter().rev()
            .map(|&d| if negative { d as isize - rank as isize } else { d as isize })
            .collect();
        let x = rand_vec(numel(&shape), -2.0, 2.0, seed);
        let (keep, want) = ref_reduce_dims(&x, &shape, &ds);
        let out_shape: Vec<usize> = if keepdim { keep } else {
            (0..rank).filter(|d| !ds.contains(d)).map(|d| shape[d]).collect()
        };
        let var = |c: usize| move |g: &[f64]| {
            let m = mean(g);
            g.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (g.len() as f64 - c as f64)
        };
        for_each_step(Family::Reduce, |step| {
            let what = |op: &str| format!("{op}({dims:?}, keepdim {keepdim}) of {shape:?} at step {}", step.name);
            let mag = want.iter().map(|g| g.iter().map(|v| v.abs()).sum::<f64>()).fold(0.0, f64::max);
            let sums: Vec<f64> = want.iter().map(|g| sum(g)).collect();
            check(&what("sum_dims"), &out_shape, &sums, sum_tol(mag), |d| t(&x, &shape, d).sum_dims(&dims, keepdim));
            let means: Vec<f64> = want.iter().map(|g| mean(g)).collect();
            let n = want[0].len() as f64;
            check(&what("mean_dims"), &out_shape, &means, sum_tol(mag / n), |d| t(&x, &shape, d).mean_dims(&dims, keepdim));
            for c in [0usize, 1] {
                if n as usize <= c { continue; }
                let vars: Vec<f64> = want.iter().map(|g| var(c)(g)).collect();
                check(&what(&format!("var_dims(correction {c})")), &out_shape, &vars, VAR, |d| {
                    t(&x, &shape, d).var_dims(&dims, c, keepdim)
                });
            }
        });
    }
}

#[test]
fn sum_to_reverses_broadcasting() {
    // [2, 3, 4] → [3, 1]: sum over dim 0 and dim 2
    let x: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let mut want = vec![0.0f64; 3];
    for (i, &v) in x.iter().enumerate() {
        want[(i / 4) % 3] += v as f64;
    }
    check("sum_to [2,3,4]->[3,1]", &[3, 1], &want, EXACT, |d| {
        t(&x, &[2, 3, 4], d).sum_to(&[3, 1])
    });
    check("sum_to same shape", &[2, 3, 4], &f64s(&x), EXACT, |d| {
        t(&x, &[2, 3, 4], d).sum_to(&[2, 3, 4])
    });
    for d in devices() {
        assert!(t(&x, &[2, 3, 4], d).sum_to(&[2, 4]).is_err());
        assert!(t(&x, &[24], d).sum_to(&[2, 12]).is_err());
    }
}

#[test]
fn argmax_ties_pick_the_first() {
    let x = [1.0f32, 3.0, 3.0, -1.0, -1.0, -1.0];
    check_i64("argmax ties", &[2], &[1, 0], |d| {
        t(&x, &[2, 3], d).argmax_last()
    });
}

#[test]
fn max_of_all_negative_and_rank0() {
    check("max of negatives", &[], &[-0.5], EXACT, |d| {
        t(&[-3.0, -0.5, -7.0], &[3], d).max()
    });
    check("sum of rank-0", &[], &[4.0], EXACT, |d| {
        t(&[4.0], &[], d).sum()
    });
    check("sum_dim(0) of rank-0", &[], &[4.0], EXACT, |d| {
        t(&[4.0], &[], d).sum_dim(0, false)
    });
    check("max_dim(-1) on [1]", &[1], &[2.5], EXACT, |d| {
        t(&[2.5], &[1], d).max_dim(-1, true)
    });
}

#[test]
fn large_sum_is_accurate() {
    // 100 003 ones: a naive f32 running sum is exact here, so any blocking must be too.
    let n = 100_003;
    check("sum of ones", &[], &[n as f64], EXACT, |d| {
        Tensor::ones(&[n], d)?.sum()
    });
    check("mean of ones", &[], &[1.0], ELEM, |d| {
        Tensor::ones(&[7, n / 7 + 1], d)?.mean()
    });
}

#[test]
fn min_nan_and_argmin_ties() {
    check_i64("argmin ties", &[2], &[1, 0], |d| {
        t(&[3.0f32, 1.0, 1.0, 2.0, 2.0, 2.0], &[2, 3], d).argmin_last()
    });
    check_i64("argmin picks the first NaN", &[1], &[2], |d| {
        t(&[3.0f32, -1.0, f32::NAN, -5.0, f32::NAN], &[1, 5], d).argmin_last()
    });
    for d in devices() {
        let x = t(&[3.0f32, f32::NAN, -1.0, 2.0, 0.0, 1.0], &[2, 3], d);
        let m = x.min_dim(1, false).unwrap().to_vec().unwrap();
        assert!(
            m[0].is_nan() && m[1] == 0.0,
            "min_dim with a NaN on {d}: {m:?}"
        );
        assert!(x.min().unwrap().item().unwrap().is_nan());
        let e = t(&[], &[2, 0], d)
            .min_dim(1, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("min") && e.contains("[2, 0]"), "{e}");
        let e = t(&[], &[2, 0], d).argmin_last().unwrap_err().to_string();
        assert!(e.contains("argmin") && e.contains("[2, 0]"), "{e}");
    }
}

#[test]
fn min_and_multi_dim_gradcheck() {
    let x = rand_distinct(42, 0.05, 3);
    gradcheck_all(
        "min_dim(1)",
        |x: &[Tensor]| x[0].min_dim(1, false),
        &[hf(x.clone(), &[2, 3, 7])],
    );
    gradcheck_all(
        "sum_dims([0, 2])",
        |x: &[Tensor]| x[0].sum_dims(&[0, 2], false),
        &[hf(x.clone(), &[2, 3, 7])],
    );
    gradcheck_all(
        "mean_dims([-1, -2], keepdim)",
        |x: &[Tensor]| x[0].mean_dims(&[-1, -2], true),
        &[hf(x.clone(), &[2, 3, 7])],
    );
    for c in [0, 1] {
        gradcheck_all(
            &format!("var_dims([0, 2], {c})"),
            move |x: &[Tensor]| x[0].var_dims(&[0, 2], c, false),
            &[hf(x.clone(), &[2, 3, 7])],
        );
        gradcheck_all(
            &format!("var_dims([1], {c}) of a transpose"),
            move |x: &[Tensor]| x[0].transpose(0, 1)?.var_dims(&[1], c, true),
            &[hf(x.clone(), &[6, 7])],
        );
    }
}

#[test]
fn multi_dim_edge_cases_and_errors() {
    for d in devices() {
        let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], d);
        // empty dims reduce every dim, as torch.sum(x, dim=[])
        assert_eq!(x.sum_dims(&[], false).unwrap().to_vec().unwrap(), [21.0]);
        assert_eq!(x.sum_dims(&[0, 1], true).unwrap().shape(), &[1, 1]);
        // one element with correction 1 is NaN, as torch.var
        assert!(x.var_dims(&[0, 1], 0, false).unwrap().item().unwrap() > 0.0);
        let v = t(&[4.0], &[1], d)
            .var_dims(&[0], 1, false)
            .unwrap()
            .item()
            .unwrap();
        assert!(v.is_nan(), "var of one element, correction 1, on {d}: {v}");
        // the mean over an empty dim is NaN
        let m = t(&[], &[2, 0], d)
            .mean_dims(&[1], false)
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(m.iter().all(|v| v.is_nan()) && m.len() == 2);
        // a rank-0 tensor accepts dim 0 and reduces nothing
        assert_eq!(
            t(&[4.0], &[], d)
                .sum_dims(&[0], false)
                .unwrap()
                .item()
                .unwrap(),
            4.0
        );
        for (r, parts) in [
            (
                x.sum_dims(&[0, -2], false),
                vec!["sum_dims", "more than once"],
            ),
            (x.mean_dims(&[2], false), vec!["mean_dims", "2"]),
            (x.var_dims(&[-3], 1, false), vec!["var_dims", "-3"]),
            (
                ti(&[1, 2], &[2], d).sum_dims(&[0], false),
                vec!["sum_dims", "i64"],
            ),
        ] {
            let e = r.unwrap_err().to_string();
            for p in parts {
                assert!(e.contains(p), "{e:?} does not name {p:?}");
            }
        }
        // the output is a fresh tensor, never the input's storage
        // a strided view reads through its layout: [[1, 4], [2, 5], [3, 6]]
        let xt = x.transpose(0, 1).unwrap();
        assert_eq!(
            xt.sum_dims(&[0], false).unwrap().to_vec().unwrap(),
            [6.0, 15.0]
        );
        assert_eq!(
            xt.mean_dims(&[1], true).unwrap().to_vec().unwrap(),
            [2.5, 3.5, 4.5]
        );
        assert_eq!(
            xt.var_dims(&[1], 0, false).unwrap().to_vec().unwrap(),
            [2.25; 3]
        );
        let x0 = t(&[4.0], &[], d);
        assert!(!x0.sum_dims(&[0], false).unwrap().shares_storage(&x0));
    }
}

#[test]
fn long_middle_dim_with_few_outputs() {
    // A long reduced middle dim with few outputs (a bias gradient's shape) runs split into
    // chunks on the GPU; sizes miss the 32-column and 8-row blocking, and the chunk length.
    for (k, shape) in [
        [1usize, 16_384, 384],
        [1, 1_000, 37],
        [3, 517, 45],
        [2, 4_099, 301],
        [5, 64, 1_025],
    ]
    .into_iter()
    .enumerate()
    {
        let x = rand_vec(numel(&shape), -2.0, 2.0, 7 + k as u64);
        let mut out_shape = shape.to_vec();
        out_shape.remove(1);
        for (name, f, exact) in [
            ("sum", sum as fn(&[f64]) -> f64, false),
            ("max", max, true),
            ("min", min, true),
        ] {
            let (_, want, mag) = ref_reduce(&x, &shape, 1, f);
            let mag = mag.iter().cloned().fold(0.0, f64::max);
            let tol = if exact { EXACT } else { sum_tol(mag) };
            check(
                &format!("{name}(dim 1) of {shape:?}"),
                &out_shape,
                &want,
                tol,
                |dev| {
                    let x = t(&x, &shape, dev);
                    match name {
                        "sum" => x.sum_dim(1, false),
                        "min" => x.min_dim(1, false),
                        _ => x.max_dim(1, false),
                    }
                },
            );
        }
    }
}

#[test]
fn long_middle_dim_propagates_nan() {
    let shape = [2usize, 1_000, 37];
    let mut x = rand_vec(numel(&shape), -2.0, 2.0, 3);
    x[1_000 * 37 + 500 * 37 + 11] = f32::NAN; // outer 1, row 500, column 11
    for d in devices() {
        for op in ["sum", "max", "min"] {
            let xt = t(&x, &shape, d);
            let y = match op {
                "sum" => xt.sum_dim(1, false),
                "min" => xt.min_dim(1, false),
                _ => xt.max_dim(1, false),
            }
            .unwrap()
            .to_vec()
            .unwrap();
            for (j, v) in y.iter().enumerate() {
                assert_eq!(v.is_nan(), j == 37 + 11, "{op} on {d}: output {j} = {v}");
            }
        }
    }
}
