//! NaN and infinity propagate as in PyTorch, on every device and at every ladder step: relu keeps
//! NaN (and its gradient passes through at a NaN input), the fused ReLU of `linear` does the
//! same, max of a slice with a NaN is NaN, argmax returns the first NaN's index, and softmax,
//! log-softmax, cross-entropy and layer norm give NaN in the rows that hold one and nowhere else.

mod common;
use camel_core::backend::ladder::Family;
use camel_core::{Activation, Device, Tensor};
use camel_cuda::kernels::matmul::SgemmKernel;
use common::*;

const NAN: f32 = f32::NAN;
const INF: f32 = f32::INFINITY;

/// Runs `body` once (CPU only) or at every step of each family (with a GPU).
fn every_step(families: &[Family], body: fn()) {
    if camel_core::testing::gpu().is_none() {
        body();
        return;
    }
    for &family in families {
        camel_core::testing::for_each_step(family, |_| body());
    }
}

/// Equal element by element, NaN equal to NaN.
fn same(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g.is_nan() && w.is_nan()) || g == w,
            "{what}: element {i} is {g}, expected {w} (got {got:?})"
        );
    }
}

/// A `[rows, cols]` input of finite values with a NaN at `(nan_row, nan_col)`.
fn with_nan(rows: usize, cols: usize, nan_row: usize, nan_col: usize) -> Vec<f32> {
    let mut x = rand_vec(rows * cols, -2.0, 2.0, 7);
    x[nan_row * cols + nan_col] = NAN;
    x
}

/// Asserts that row `bad` of a `[rows, cols]` result is all NaN and every other row finite.
fn only_row_nan(y: &[f32], rows: usize, cols: usize, bad: usize, what: &str) {
    for r in 0..rows {
        let row = &y[r * cols..(r + 1) * cols];
        if r == bad {
            assert!(row.iter().all(|v| v.is_nan()), "{what}: row {r} not NaN");
        } else {
            assert!(
                row.iter().all(|v| v.is_finite()),
                "{what}: NaN leaked into row {r}"
            );
        }
    }
}

#[test]
fn relu_keeps_nan_and_infinities() {
    every_step(&[Family::Elementwise], || {
        // long enough for the vectorised kernels' body and tail
        let base = [NAN, -1.0, -0.0, 0.0, 2.0, INF, -INF, 1e-30];
        let want = [NAN, 0.0, 0.0, 0.0, 2.0, INF, 0.0, 1e-30];
        let x: Vec<f32> = base.iter().copied().cycle().take(8 * 131 + 3).collect();
        let w: Vec<f32> = want.iter().copied().cycle().take(x.len()).collect();
        for d in devices() {
            let y = t(&x, &[x.len()], d).relu().unwrap().to_vec().unwrap();
            same(&y, &w, &format!("{d}: relu"));
        }
    });
}

#[test]
fn relu_gradient_passes_at_nan() {
    every_step(&[Family::Elementwise], || {
        for d in devices() {
            let x = t(&[NAN, -1.0, 0.0, 3.0, INF, -INF], &[6], d)
                .requires_grad_(true)
                .unwrap();
            x.relu().unwrap().sum().unwrap().backward().unwrap();
            let g = x.grad().unwrap().to_vec().unwrap();
            // PyTorch: threshold_backward masks where x <= 0; NaN is not <= 0
            same(
                &g,
                &[1.0, 0.0, 0.0, 1.0, 1.0, 0.0],
                &format!("{d}: relu grad"),
            );
        }
    });
}

#[test]
fn linear_fused_relu_keeps_nan() {
    // every SGEMM step (the ReLU is fused into each one's epilogue), with a GPU
    if camel_core::testing::gpu().is_none() {
        linear_fused_relu_keeps_nan_at_one_step();
        return;
    }
    let all = SgemmKernel::ALL.iter().chain(&SgemmKernel::TF32);
    for &k in all {
        camel_core::config::with_sgemm_kernel(k, linear_fused_relu_keeps_nan_at_one_step);
    }
}

fn linear_fused_relu_keeps_nan_at_one_step() {
    // x [3, 5] with a NaN in row 1; w [4, 5]: row 1 of relu(x·wᵀ + b) is NaN, rows 0 and 2 are
    // relu of finite values. Sizes that use the GEMM's tiled kernels and its edge tiles.
    for (rows, inp, out) in [(3usize, 5usize, 4usize), (70, 33, 65), (130, 257, 129)] {
        let x = with_nan(rows, inp, 1, inp - 1);
        let w = rand_vec(out * inp, -1.0, 1.0, 3);
        let b = rand_vec(out, -1.0, 1.0, 4);
        let mut results = Vec::new();
        for d in devices() {
            let y = t(&x, &[rows, inp], d)
                .linear(
                    &t(&w, &[out, inp], d),
                    Some(&t(&b, &[out], d)),
                    Activation::Relu,
                )
                .unwrap()
                .to_vec()
                .unwrap();
            only_row_nan(&y, rows, out, 1, &format!("{d}: linear relu"));
            assert!(y.iter().all(|v| v.is_nan() || *v >= 0.0));
            results.push(y);
        }
        // the devices agree on which elements are NaN
        if let [cpu, gpu] = &results[..] {
            for (a, b) in cpu.iter().zip(gpu) {
                assert_eq!(a.is_nan(), b.is_nan());
            }
        }
    }
}

#[test]
fn max_and_argmax_of_nan_rows() {
    every_step(&[Family::Reduce], || {
        // rows longer than a block of threads, so the NaN and the maximum are in different
        // threads' slices: the first NaN wins, wherever it is
        let cols = 1031;
        let rows = 5;
        let mut x = rand_vec(rows * cols, -1.0, 1.0, 11);
        x[700] = NAN; // row 0: one NaN late, after larger values
        x[cols + 5] = NAN; // row 1: two NaNs; the first is 5
        x[cols + 900] = NAN;
        x[2 * cols + 3] = INF; // row 2: inf before a NaN
        x[2 * cols + 1030] = NAN;
        x[3 * cols + 17] = INF; // row 3: no NaN, inf is the maximum
        for v in &mut x[4 * cols..5 * cols] {
            *v = -INF; // row 4: all -inf then a NaN in the middle
        }
        x[4 * cols + 600] = NAN;
        for d in devices() {
            let xt = t(&x, &[rows, cols], d);
            let am = xt.argmax_last().unwrap().to_vec_i64().unwrap();
            assert_eq!(am, vec![700, 5, 1030, 17, 600], "{d}: argmax");
            let m = xt.max_dim(-1, false).unwrap().to_vec().unwrap();
            same(&m, &[NAN, NAN, NAN, INF, NAN], &format!("{d}: max_dim"));
            assert!(xt.max().unwrap().item().unwrap().is_nan(), "{d}: max");
            // short rows (one thread each)
            let s = t(&[1.0, NAN, 3.0, NAN, 0.0, 2.0], &[2, 3], d);
            assert_eq!(s.argmax_last().unwrap().to_vec_i64().unwrap(), vec![1, 0]);
        }
    });
}

#[test]
fn sum_and_mean_follow_ieee() {
    every_step(&[Family::Reduce], || {
        for d in devices() {
            let s = |v: &[f32]| t(v, &[v.len()], d).sum().unwrap().item().unwrap();
            assert_eq!(s(&[INF, 1.0]), INF);
            assert!(s(&[INF, -INF]).is_nan());
            assert!(s(&[1.0, NAN]).is_nan());
            let m = t(&[1.0, NAN, 2.0, 3.0], &[2, 2], d)
                .mean_dim(-1, false)
                .unwrap();
            same(&m.to_vec().unwrap(), &[NAN, 2.5], &format!("{d}: mean_dim"));
        }
    });
}

#[test]
fn softmax_rows_with_nan_are_nan() {
    every_step(&[Family::Softmax], || {
        for cols in [7usize, 33, 1031, 4100] {
            let rows = 4;
            let x = with_nan(rows, cols, 2, cols / 2);
            for d in devices() {
                let xt = t(&x, &[rows, cols], d);
                let y = xt.softmax().unwrap().to_vec().unwrap();
                only_row_nan(&y, rows, cols, 2, &format!("{d}: softmax cols {cols}"));
                let y = xt.log_softmax().unwrap().to_vec().unwrap();
                only_row_nan(&y, rows, cols, 2, &format!("{d}: log_softmax cols {cols}"));
            }
        }
    });
}

#[test]
fn cross_entropy_with_nan_is_nan() {
    every_step(&[Family::CrossEntropy], || {
        for cols in [7usize, 1031] {
            let rows = 3;
            let x = with_nan(rows, cols, 1, 2);
            for d in devices() {
                let targets = Tensor::from_vec_i64(vec![0, 1, 2], &[rows], d).unwrap();
                let l = t(&x, &[rows, cols], d)
                    .cross_entropy(&targets)
                    .unwrap()
                    .item()
                    .unwrap();
                assert!(l.is_nan(), "{d}: cross_entropy over a NaN logit gave {l}");
                let fine = t(&x[..cols], &[1, cols], d)
                    .cross_entropy(&Tensor::from_vec_i64(vec![0], &[1], d).unwrap())
                    .unwrap()
                    .item()
                    .unwrap();
                assert!(fine.is_finite(), "{d}: a finite row gave {fine}");
            }
        }
    });
}

#[test]
fn layer_norm_rows_with_nan_are_nan() {
    every_step(&[Family::LayerNorm], || {
        for cols in [7usize, 33, 1031] {
            let rows = 3;
            let x = with_nan(rows, cols, 0, cols - 1);
            for d in devices() {
                let g = Tensor::ones(&[cols], d).unwrap();
                let b = Tensor::zeros(&[cols], d).unwrap();
                let y = t(&x, &[rows, cols], d)
                    .layer_norm(&g, &b, 1e-5)
                    .unwrap()
                    .to_vec()
                    .unwrap();
                only_row_nan(&y, rows, cols, 0, &format!("{d}: layer_norm cols {cols}"));
            }
        }
    });
}

#[test]
fn mse_with_nan_is_nan() {
    for d in devices() {
        let a = t(&[1.0, NAN], &[2], d);
        let b = t(&[1.0, 2.0], &[2], d);
        assert!(a.mse(&b).unwrap().item().unwrap().is_nan(), "{d}");
    }
}

#[test]
fn cpu_and_gpu_agree_on_special_values() {
    let Some(gpu) = camel_core::testing::gpu() else {
        eprintln!("skipped CPU/GPU comparison: no GPU");
        return;
    };
    let x = [
        NAN,
        -INF,
        -1.0,
        -0.0,
        0.0,
        0.5,
        INF,
        f32::MAX,
        f32::MIN_POSITIVE,
    ];
    let run = |d: Device| -> Vec<Vec<f32>> {
        let xt = t(&x, &[x.len()], d);
        vec![
            xt.relu().unwrap().to_vec().unwrap(),
            xt.sigmoid().unwrap().to_vec().unwrap(),
            xt.tanh().unwrap().to_vec().unwrap(),
            xt.exp().unwrap().to_vec().unwrap(),
            xt.mul_scalar(2.0).unwrap().to_vec().unwrap(),
            xt.add(&xt).unwrap().to_vec().unwrap(),
            vec![xt.max().unwrap().item().unwrap()],
        ]
    };
    let (c, g) = (run(Device::Cpu), run(gpu));
    for (i, (a, b)) in c.iter().zip(&g).enumerate() {
        for (u, v) in a.iter().zip(b) {
            assert!(
                (u.is_nan() && v.is_nan()) || u == v || (u - v).abs() <= 1e-4 * u.abs().max(1.0),
                "op {i}: CPU {a:?} vs GPU {b:?}"
            );
        }
    }
}
