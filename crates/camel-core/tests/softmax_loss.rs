//! softmax, log_softmax, cross_entropy and mse against plain-f64 references, and their stability
//! for huge logits. Tolerance `ELEM` (|got − ref| ≤ 1e-5 + 1e-4·|ref|) unless stated.

mod common;
use camel_core::Tensor;
use common::*;
use proptest::prelude::*;

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

fn ref_cross_entropy(x: &[f32], targets: &[i64], cols: usize) -> f64 {
    let lsm = ref_softmax_rows(x, cols, true);
    let n = targets.len();
    (0..n)
        .map(|r| -lsm[r * cols + targets[r] as usize])
        .sum::<f64>()
        / n as f64
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn softmax_and_log_softmax(shape in awkward_shape(), seed in any::<u64>(), scale in prop::sample::select(vec![1.0f32, 10.0, 50.0])) {
        let x = rand_vec(numel(&shape), -scale, scale, seed);
        let cols = *shape.last().unwrap();
        check(&format!("softmax {shape:?}"), &shape, &ref_softmax_rows(&x, cols, false), ELEM, |d| t(&x, &shape, d).softmax());
        check(&format!("log_softmax {shape:?}"), &shape, &ref_softmax_rows(&x, cols, true), ELEM, |d| {
            t(&x, &shape, d).log_softmax()
        });
    }

    #[test]
    fn cross_entropy(n in dim(), c in dim(), seed in any::<u64>()) {
        let x = rand_vec(n * c, -5.0, 5.0, seed);
        let tg = rand_idx(n, c, seed ^ 3);
        let want = ref_cross_entropy(&x, &tg, c);
        check(&format!("cross_entropy [{n},{c}]"), &[], &[want], ELEM, |d| {
            t(&x, &[n, c], d).cross_entropy(&ti(&tg, &[n], d))
        });
    }

    #[test]
    fn mse(shape in awkward_shape(), seed in any::<u64>()) {
        let a = rand_vec(numel(&shape), -2.0, 2.0, seed);
        let b = rand_vec(numel(&shape), -2.0, 2.0, seed ^ 5);
        let want = a.iter().zip(&b).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum::<f64>() / a.len() as f64;
        check(&format!("mse {shape:?}"), &[], &[want], ELEM, |d| t(&a, &shape, d).mse(&t(&b, &shape, d)));
    }
}

#[test]
fn cross_entropy_large_batch() {
    // 1031 rows × 7 classes (≥ 1000 per-row losses averaged).
    let (n, c) = (1031, 7);
    let x = rand_vec(n * c, -5.0, 5.0, 99);
    let tg = rand_idx(n, c, 98);
    check(
        "cross_entropy [1031,7]",
        &[],
        &[ref_cross_entropy(&x, &tg, c)],
        ELEM,
        |d| t(&x, &[n, c], d).cross_entropy(&ti(&tg, &[n], d)),
    );
}

/// Values and gradients stay finite and right for logits of ±1e4.
#[test]
fn huge_logits_are_stable() {
    for d in devices() {
        let x = || t(&[1e4, -1e4], &[1, 2], d).requires_grad_(true).unwrap();
        // CE([1e4, -1e4], 0) = log(1 + e^-2e4) ≈ 0; with target 1 it is 2e4.
        for (target, want, grad) in [(0i64, 0.0f32, [0.0f32, 0.0]), (1, 2e4, [1.0, -1.0])] {
            let xl = x();
            let loss = xl.cross_entropy(&ti(&[target], &[1], d)).unwrap();
            let v = loss.item().unwrap();
            assert!(
                v.is_finite() && (v - want).abs() <= 1e-5 + 1e-5 * want,
                "{d}: CE target {target} = {v}, want {want}"
            );
            loss.backward().unwrap();
            let g = xl.grad().unwrap().to_vec().unwrap();
            assert!(g.iter().all(|v| v.is_finite()), "{d}: CE grad {g:?}");
            assert_close(
                &format!("{d}: CE grad target {target}"),
                &g,
                &f64s(&grad),
                ELEM,
            );
        }
        // Equal huge logits: CE = ln(3) whatever the target.
        let l = t(&[1e4; 6], &[2, 3], d)
            .cross_entropy(&ti(&[0, 2], &[2], d))
            .unwrap()
            .item()
            .unwrap();
        assert!(
            (l as f64 - 3f64.ln()).abs() < 1e-5,
            "{d}: CE of equal huge logits {l}"
        );

        // log_softmax([1e4, -1e4, 0]) = [0, -2e4, -1e4]; gradient of its sum = 1 − 3·softmax.
        let xl = t(&[1e4, -1e4, 0.0, -1e4, -1e4, -1e4], &[2, 3], d)
            .requires_grad_(true)
            .unwrap();
        let y = xl.log_softmax().unwrap();
        let lnf3 = -(3f64.ln());
        assert_close(
            &format!("{d}: log_softmax huge"),
            &y.to_vec().unwrap(),
            &[0.0, -2e4, -1e4, lnf3, lnf3, lnf3],
            ELEM,
        );
        y.sum().unwrap().backward().unwrap();
        let g = xl.grad().unwrap().to_vec().unwrap();
        assert_close(
            &format!("{d}: log_softmax huge grad"),
            &g,
            &[-2.0, 1.0, 1.0, 0.0, 0.0, 0.0],
            ELEM,
        );
        // softmax too
        let s = t(&[1e4, -1e4, 0.0], &[3], d)
            .softmax()
            .unwrap()
            .to_vec()
            .unwrap();
        assert_close(&format!("{d}: softmax huge"), &s, &[1.0, 0.0, 0.0], ELEM);
    }
}

#[test]
fn cross_entropy_known_value() {
    // logits [0, 0] → ln 2 for any target; mean over rows.
    check("CE uniform", &[], &[2f64.ln()], ELEM, |d| {
        Tensor::zeros(&[3, 2], d)?.cross_entropy(&ti(&[0, 1, 1], &[3], d))
    });
}
