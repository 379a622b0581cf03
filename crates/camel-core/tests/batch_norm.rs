//! batch_norm (training: batch statistics) and batch_norm_eval (given statistics) against plain
//! f64 references on awkward shapes, on every device and every step of the BatchNorm ladder;
//! gradcheck of both backwards; NaN; bad input.

mod common;
use camel_core::backend::ladder::Family;
use camel_core::testing::for_each_step;
use camel_core::{Error, Tensor};
use common::*;

/// Channel `ch`'s offsets in `[n, c, hw]`.
fn channel(shape: &[usize], ch: usize) -> Vec<usize> {
    let (n, c, hw) = (shape[0], shape[1], shape[2..].iter().product::<usize>());
    (0..n)
        .flat_map(|s| ((s * c + ch) * hw)..((s * c + ch) * hw + hw))
        .collect()
}

/// `(y, mean, biased var)` of training-mode BatchNorm in f64.
fn ref_train(
    x: &[f32],
    shape: &[usize],
    w: &[f32],
    b: &[f32],
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let c = shape[1];
    let mut y = vec![0.0; x.len()];
    let (mut mean, mut var) = (vec![], vec![]);
    for ch in 0..c {
        let idx = channel(shape, ch);
        let m = idx.len() as f64;
        let mu = idx.iter().map(|&o| x[o] as f64).sum::<f64>() / m;
        let v = idx.iter().map(|&o| (x[o] as f64 - mu).powi(2)).sum::<f64>() / m;
        for &o in &idx {
            y[o] = (x[o] as f64 - mu) / (v + eps).sqrt() * w[ch] as f64 + b[ch] as f64;
        }
        mean.push(mu);
        var.push(v);
    }
    (y, mean, var)
}

/// Eval-mode BatchNorm in f64.
#[allow(clippy::too_many_arguments)]
fn ref_eval(
    x: &[f32],
    shape: &[usize],
    rm: &[f32],
    rv: &[f32],
    w: &[f32],
    b: &[f32],
    eps: f64,
) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for ch in 0..shape[1] {
        for o in channel(shape, ch) {
            y[o] = (x[o] as f64 - rm[ch] as f64) / (rv[ch] as f64 + eps).sqrt() * w[ch] as f64
                + b[ch] as f64;
        }
    }
    y
}

/// Shapes that miss every tile: `[N, C]`, `[N, C, L]` and `[N, C, H, W]` with N 1..7, C 1..5,
/// H 1..9, W 1..11, and a few with ≥ 1000 values a channel.
fn shapes() -> Vec<Vec<usize>> {
    let mut v: Vec<Vec<usize>> = vec![
        vec![2, 1],
        vec![7, 5],
        vec![1031, 3],
        vec![3, 4, 1],
        vec![5, 2, 33],
        vec![1, 1, 1, 2],
        vec![1, 3, 9, 11],
        vec![2, 5, 1, 7],
        vec![7, 1, 9, 1],
        vec![7, 5, 9, 11],
        vec![3, 2, 7, 3],
        vec![7, 3, 33, 35],
    ];
    // eval also takes one value a channel
    v.push(vec![1, 4, 1, 1]);
    v
}

const TOL: Tol = Tol {
    atol: 2e-4,
    rtol: 1e-3,
};

#[test]
fn batch_norm_matches_reference() {
    for_each_step(Family::BatchNorm, |step| {
        for shape in shapes() {
            let (n, c, hw) = (shape[0], shape[1], shape[2..].iter().product::<usize>());
            let seed = (n * 1000 + c * 100 + hw) as u64;
            // an offset mean checks the variance is computed about the mean (Welford)
            let x: Vec<f32> = rand_vec(n * c * hw, -2.0, 2.0, seed)
                .iter()
                .map(|v| v + 100.0)
                .collect();
            let w = rand_vec(c, 0.5, 1.5, seed ^ 1);
            let b = rand_vec(c, -1.0, 1.0, seed ^ 2);
            let what = format!("batch_norm {shape:?} at {}", step.name);
            if n * hw > 1 {
                let (y, mean, var) = ref_train(&x, &shape, &w, &b, 1e-5);
                let run = |d, k: usize| -> camel_core::Result<Tensor> {
                    let (wt, bt) = (t(&w, &[c], d), t(&b, &[c], d));
                    let out = t(&x, &shape, d).batch_norm(Some(&wt), Some(&bt), 1e-5)?;
                    Ok([out.0, out.1, out.2][k].clone())
                };
                check(&format!("{what}: y"), &shape, &y, TOL, |d| run(d, 0));
                check(&format!("{what}: mean"), &[c], &mean, ELEM, |d| run(d, 1));
                check(&format!("{what}: var"), &[c], &var, TOL, |d| run(d, 2));
                // without weight and bias: 1 and 0
                let (y1, _, _) = ref_train(&x, &shape, &vec![1.0; c], &vec![0.0; c], 1e-5);
                check(&format!("{what}: y, no affine"), &shape, &y1, TOL, |d| {
                    Ok(t(&x, &shape, d).batch_norm(None, None, 1e-5)?.0)
                });
            }
            let rm = rand_vec(c, 99.0, 101.0, seed ^ 3);
            let rv = rand_vec(c, 0.5, 2.0, seed ^ 4);
            let want = ref_eval(&x, &shape, &rm, &rv, &w, &b, 1e-3);
            check(&format!("{what}: eval"), &shape, &want, TOL, |d| {
                t(&x, &shape, d).batch_norm_eval(
                    &t(&rm, &[c], d),
                    &t(&rv, &[c], d),
                    Some(&t(&w, &[c], d)),
                    Some(&t(&b, &[c], d)),
                    1e-3,
                )
            });
        }
    });
}

#[test]
fn batch_norm_gradcheck() {
    for_each_step(Family::BatchNorm, |step| {
        for shape in [
            vec![2, 3],
            vec![7, 1],
            vec![3, 2, 3],
            vec![2, 3, 2, 3],
            vec![1, 2, 1, 5],
        ] {
            let (n, c, hw) = (shape[0], shape[1], shape[2..].iter().product::<usize>());
            let seed = (n * 100 + c * 10 + hw) as u64;
            let ins = [
                hf(rand_vec(n * c * hw, -2.0, 2.0, seed), &shape),
                hf(rand_vec(c, 0.5, 1.5, seed ^ 1), &[c]),
                hf(rand_vec(c, -1.0, 1.0, seed ^ 2), &[c]),
            ];
            let what = format!("batch_norm {shape:?} at {}", step.name);
            gradcheck_all(
                &format!("{what}: training"),
                |a| Ok(a[0].batch_norm(Some(&a[1]), Some(&a[2]), 1e-5)?.0),
                &ins,
            );
            gradcheck_all(
                &format!("{what}: training, no affine"),
                |a| Ok(a[0].batch_norm(None, None, 1e-5)?.0),
                &ins[..1],
            );
            // the running statistics are constants (no gradient): made inside, on the input's device
            let rm = rand_vec(c, -0.5, 0.5, seed ^ 3);
            let rv = rand_vec(c, 0.5, 2.0, seed ^ 4);
            gradcheck_all(
                &format!("{what}: eval"),
                |a| {
                    let d = a[0].device();
                    a[0].batch_norm_eval(
                        &t(&rm, &[c], d),
                        &t(&rv, &[c], d),
                        Some(&a[1]),
                        Some(&a[2]),
                        1e-5,
                    )
                },
                &ins,
            );
        }
    });
}

/// The batch statistics carry no gradient, and the running statistics of eval mode get none.
#[test]
fn statistics_are_constants() {
    for d in devices() {
        let x = t(&rand_vec(12, -1.0, 1.0, 5), &[4, 3], d)
            .requires_grad_(true)
            .unwrap();
        let (_, mean, var) = x.batch_norm(None, None, 1e-5).unwrap();
        assert!(!mean.requires_grad() && !var.requires_grad(), "{d}");
        let rm = t(&[0.0; 3], &[3], d).requires_grad_(true).unwrap();
        let rv = t(&[1.0; 3], &[3], d);
        let y = x.batch_norm_eval(&rm, &rv, None, None, 0.0).unwrap();
        // eval with mean 0, var 1, eps 0 and no affine is the identity
        assert_eq!(y.to_vec().unwrap(), x.to_vec().unwrap(), "{d}");
        y.sum().unwrap().backward().unwrap();
        assert!(rm.grad().is_none(), "{d}: running mean got a gradient");
        assert_eq!(x.grad().unwrap().to_vec().unwrap(), vec![1.0; 12], "{d}");
    }
}

/// A NaN makes its channel NaN in training (its statistics are NaN) and only its own element
/// NaN in eval; the other channels stay finite.
#[test]
fn nan_propagates() {
    for_each_step(Family::BatchNorm, |_| {
        for d in devices() {
            let shape = [3, 2, 5];
            let mut x = rand_vec(30, -1.0, 1.0, 11);
            x[5 * 2 + 3] = f32::NAN; // sample 1, channel 0
            let chan0 = channel(&shape, 0);
            let (y, mean, var) = t(&x, &shape, d).batch_norm(None, None, 1e-5).unwrap();
            let y = y.to_vec().unwrap();
            for (o, v) in y.iter().enumerate() {
                assert_eq!(v.is_nan(), chan0.contains(&o), "{d}: training y[{o}] = {v}");
            }
            let (m, v) = (mean.to_vec().unwrap(), var.to_vec().unwrap());
            assert!(
                m[0].is_nan() && v[0].is_nan() && m[1].is_finite() && v[1].is_finite(),
                "{d}: {m:?} {v:?}"
            );
            let y = t(&x, &shape, d)
                .batch_norm_eval(
                    &t(&[0.0; 2], &[2], d),
                    &t(&[1.0; 2], &[2], d),
                    None,
                    None,
                    1e-5,
                )
                .unwrap()
                .to_vec()
                .unwrap();
            for (o, v) in y.iter().enumerate() {
                assert_eq!(v.is_nan(), o == 13, "{d}: eval y[{o}] = {v}");
            }
        }
    });
}

/// Bad input: a typed error naming the op and the shapes.
#[test]
fn bad_input_is_an_error() {
    for d in devices() {
        let x = t(&[1.0; 24], &[4, 3, 2], d);
        let w2 = t(&[1.0; 2], &[2], d);
        let s3 = t(&[1.0; 3], &[3], d);
        let e = t(&[1.0; 4], &[4], d)
            .batch_norm(None, None, 1e-5)
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::BadShape {
                    op: "batch_norm",
                    ..
                }
            ),
            "{d}: rank 1: {e}"
        );
        let e = x.batch_norm(Some(&w2), None, 1e-5).unwrap_err();
        assert!(
            matches!(
                e,
                Error::ShapeMismatch {
                    op: "batch_norm",
                    ..
                }
            ),
            "{d}: weight [2]: {e}"
        );
        assert!(e.to_string().contains("[4, 3, 2]"), "{d}: {e}");
        let e = x.batch_norm(None, Some(&w2), 1e-5).unwrap_err();
        assert!(
            matches!(e, Error::ShapeMismatch { .. }),
            "{d}: bias [2]: {e}"
        );
        let e = x.batch_norm(None, None, -1.0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{d}: eps: {e}");
        let e = x.batch_norm(None, None, f32::NAN).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{d}: eps: {e}");
        // one value a channel in training, as PyTorch refuses
        for shape in [[1usize, 3, 1, 1].as_slice(), &[1, 3]] {
            let one = t(&[1.0; 3], shape, d);
            let e = one.batch_norm(None, None, 1e-5).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::BadShape {
                        op: "batch_norm",
                        ..
                    }
                ),
                "{d}: {shape:?}: {e}"
            );
            assert!(
                one.batch_norm_eval(&s3, &s3, None, None, 1e-5).is_ok(),
                "{d}: eval of {shape:?}"
            );
        }
        let e = x.batch_norm_eval(&w2, &s3, None, None, 1e-5).unwrap_err();
        assert!(
            matches!(
                e,
                Error::ShapeMismatch {
                    op: "batch_norm_eval",
                    ..
                }
            ),
            "{d}: running_mean [2]: {e}"
        );
        let e = x
            .batch_norm_eval(&s3, &s3, None, Some(&w2), 1e-5)
            .unwrap_err();
        assert!(
            matches!(e, Error::ShapeMismatch { .. }),
            "{d}: bias [2]: {e}"
        );
        let i = Tensor::from_vec_i64(vec![1; 24], &[4, 3, 2], d).unwrap();
        assert!(
            matches!(
                i.batch_norm(None, None, 1e-5).unwrap_err(),
                Error::DTypeMismatch { .. }
            ),
            "{d}"
        );
    }
    if let Some(g) = camel_core::testing::gpu() {
        let x = t(&[1.0; 24], &[4, 3, 2], g);
        let w = t(&[1.0; 3], &[3], camel_core::Device::Cpu);
        let e = x.batch_norm(Some(&w), None, 1e-5).unwrap_err();
        assert!(matches!(e, Error::DeviceMismatch { .. }), "{e}");
    }
}

proptest::proptest! {
    #![proptest_config(cfg())]

    /// Any shape (empty dims too), any eps, any per-channel lengths: `Ok` or a typed error,
    /// forward and backward, never a panic.
    #[test]
    fn never_panics(
        shape in proptest::collection::vec(0usize..4, 0..5),
        lens in proptest::collection::vec(0usize..4, 4),
        eps in proptest::sample::select(vec![1e-5f32, 0.0, -1.0, f32::NAN, f32::INFINITY]),
        affine in proptest::bool::ANY,
    ) {
        for d in devices() {
            let x = t(&vec![0.5; shape.iter().product()], &shape, d).requires_grad_(true).unwrap();
            let p: Vec<Tensor> = lens.iter().map(|&n| t(&vec![1.0; n], &[n], d)).collect();
            let (w, b) = if affine { (Some(&p[0]), Some(&p[1])) } else { (None, None) };
            if let Ok((y, _, _)) = x.batch_norm(w, b, eps) {
                let _ = y.sum().and_then(|s| s.backward());
            }
            if let Ok(y) = x.batch_norm_eval(&p[2], &p[3], w, b, eps) {
                let _ = y.sum().and_then(|s| s.backward());
            }
        }
    }
}
