//! Reductions against plain-f64 references: sum/mean/max over everything or one dim (keepdim
//! both ways, negative dims) and argmax_last. Tolerance for sums and means: |got − ref| ≤
//! 1e-5·(Σ|x| over the reduced elements) + 1e-5 (f32 accumulation); max and argmax are exact.

mod common;
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
        for (name, f, exact) in [("sum", sum as fn(&[f64]) -> f64, false), ("mean", mean, false), ("max", max, true)] {
            let (_, want, mag) = ref_reduce(&x, &shape, d, f);
            let mag = mag.iter().cloned().fold(0.0, f64::max) / if name == "mean" { shape[d] as f64 } else { 1.0 };
            let tol = if exact { EXACT } else { sum_tol(mag) };
            check(&what(name), &out_shape, &want, tol, |dev| {
                let x = t(&x, &shape, dev);
                match name {
                    "sum" => x.sum_dim(dim, keepdim),
                    "mean" => x.mean_dim(dim, keepdim),
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
