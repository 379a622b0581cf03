//! BatchNorm1d / BatchNorm2d: training vs eval, the running statistics after two steps against a
//! hand-computed example, the state-dict round trip with buffers, options, and bad input.
//!
//! Device policy: every test body loops over [`devices`] (CPU always, CUDA when a GPU answers).

use camel_nn::testing::devices;
use camel_nn::{
    BatchNorm1d, BatchNorm2d, BatchNormOptions, Device, Error, Module, Sequential, Tensor,
};

fn close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

fn on(d: Device) -> BatchNormOptions {
    BatchNormOptions {
        device: d,
        ..BatchNormOptions::default()
    }
}

fn t(v: &[f32], s: &[usize], d: Device) -> Tensor {
    Tensor::from_vec(v.to_vec(), s, d).unwrap()
}

fn buf(b: Option<&camel_nn::Buffer>) -> Vec<f32> {
    b.expect("running statistics").tensor().to_vec().unwrap()
}

/// Two training steps of BatchNorm1d(2), momentum 0.1, worked by hand:
/// step 1, x = [[1, 2], [3, 6]]: means [2, 4], unbiased variances [2, 8] →
///   running_mean = 0.1·[2, 4] = [0.2, 0.4], running_var = 0.9·1 + 0.1·[2, 8] = [1.1, 1.7];
/// step 2, x = [[0, 0], [2, 4]]: means [1, 2], unbiased variances [2, 8] →
///   running_mean = 0.9·[0.2, 0.4] + 0.1·[1, 2] = [0.28, 0.56],
///   running_var = 0.9·[1.1, 1.7] + 0.1·[2, 8] = [1.19, 2.33].
#[test]
fn running_statistics_after_two_steps_match_the_hand_computed_example() {
    for d in devices() {
        let bn = BatchNorm1d::with_options(2, on(d)).unwrap();
        assert!(bn.is_training());
        let y = bn.forward(&t(&[1.0, 2.0, 3.0, 6.0], &[2, 2], d)).unwrap();
        // each channel's two values are its mean ± one biased standard deviation: −1 and 1
        let s = |v: f64| v / (v * v + 1e-5).sqrt();
        close(
            &y.to_vec().unwrap(),
            &[-s(1.0), -s(2.0), s(1.0), s(2.0)],
            &format!("{d}: y"),
        );
        close(
            &buf(bn.running_mean()),
            &[0.2, 0.4],
            &format!("{d}: mean after 1"),
        );
        close(
            &buf(bn.running_var()),
            &[1.1, 1.7],
            &format!("{d}: var after 1"),
        );
        bn.forward(&t(&[0.0, 0.0, 2.0, 4.0], &[2, 2], d)).unwrap();
        close(
            &buf(bn.running_mean()),
            &[0.28, 0.56],
            &format!("{d}: mean after 2"),
        );
        close(
            &buf(bn.running_var()),
            &[1.19, 2.33],
            &format!("{d}: var after 2"),
        );
        let state = bn.state_dict();
        assert_eq!(
            state["num_batches_tracked"].to_vec().unwrap(),
            vec![2.0],
            "{d}"
        );

        // eval: the running statistics, and no update
        bn.eval();
        let y = bn.forward(&t(&[1.0, 2.0], &[1, 2], d)).unwrap();
        let want = [
            (1.0 - 0.28) / (1.19f64 + 1e-5).sqrt(),
            (2.0 - 0.56) / (2.33f64 + 1e-5).sqrt(),
        ];
        close(&y.to_vec().unwrap(), &want, &format!("{d}: eval"));
        close(
            &buf(bn.running_mean()),
            &[0.28, 0.56],
            &format!("{d}: eval changes nothing"),
        );
        // the running statistics get no gradient, the parameters do
        let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2], d)
            .requires_grad_(true)
            .unwrap();
        bn.forward(&x).unwrap().sum().unwrap().backward().unwrap();
        let g = bn
            .weight()
            .unwrap()
            .grad()
            .expect("weight grad")
            .to_vec()
            .unwrap();
        assert_eq!(g.len(), 2, "{d}");
        assert!(x.grad().is_some(), "{d}");
    }
}

/// Training normalizes with the batch (the same input twice gives the same output whatever the
/// running statistics), eval with the running statistics.
#[test]
fn train_and_eval_differ() {
    for d in devices() {
        let bn = BatchNorm2d::with_options(3, on(d)).unwrap();
        let x: Vec<f32> = (0..2 * 3 * 4 * 5)
            .map(|i| ((i * 37) % 23) as f32 * 0.5 + 3.0)
            .collect();
        let x = t(&x, &[2, 3, 4, 5], d);
        let a = bn.forward(&x).unwrap().to_vec().unwrap();
        let b = bn.forward(&x).unwrap().to_vec().unwrap();
        assert_eq!(a, b, "{d}: training uses the batch's statistics");
        // batch output: mean 0 and biased variance 1 per channel
        for c in 0..3 {
            let v: Vec<f64> = (0..2)
                .flat_map(|n| (0..20).map(move |i| (n * 3 + c) * 20 + i))
                .map(|o| a[o] as f64)
                .collect();
            let mean = v.iter().sum::<f64>() / 40.0;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 40.0;
            assert!(
                mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-3,
                "{d}: channel {c}: {mean} {var}"
            );
        }
        bn.eval();
        assert!(!bn.is_training());
        let e = bn.forward(&x).unwrap().to_vec().unwrap();
        assert_ne!(a, e, "{d}: eval uses the running statistics");
        bn.train();
        assert_eq!(bn.forward(&x).unwrap().to_vec().unwrap(), a, "{d}");
    }
}

/// Without running statistics eval normalizes with the batch too; without affine there are no
/// parameters.
#[test]
fn options() {
    for d in devices() {
        let o = BatchNormOptions {
            affine: false,
            track_running_stats: false,
            ..on(d)
        };
        let bn = BatchNorm1d::with_options(2, o).unwrap();
        assert!(bn.named_parameters().is_empty() && bn.named_buffers().is_empty());
        assert!(bn.running_mean().is_none() && bn.weight().is_none());
        let x = t(&[1.0, 2.0, 3.0, 6.0, 5.0, 1.0], &[3, 2], d);
        let a = bn.forward(&x).unwrap().to_vec().unwrap();
        bn.eval();
        assert_eq!(bn.forward(&x).unwrap().to_vec().unwrap(), a, "{d}");
        assert_eq!(
            format!("{bn:?}"),
            "BatchNorm1d(2, eps=1e-5, momentum=0.1, affine=false, track_running_stats=false)"
        );
        // [N, C, L]
        let bn = BatchNorm1d::with_options(2, on(d)).unwrap();
        assert_eq!(
            bn.forward(&t(&[1.0; 12], &[2, 2, 3], d)).unwrap().shape(),
            &[2, 2, 3]
        );
    }
    let bad = |o: BatchNormOptions| BatchNorm2d::with_options(3, o).unwrap_err();
    assert!(matches!(
        bad(BatchNormOptions {
            momentum: 1.5,
            ..Default::default()
        }),
        Error::InvalidArgument { .. }
    ));
    assert!(matches!(
        bad(BatchNormOptions {
            eps: 0.0,
            ..Default::default()
        }),
        Error::InvalidArgument { .. }
    ));
    assert!(matches!(
        BatchNorm2d::new(0).unwrap_err(),
        Error::InvalidArgument { .. }
    ));
}

/// The state dict names the parameters and the buffers; loading it into a fresh layer gives the
/// same eval output.
#[test]
fn state_dict_round_trip_includes_buffers() {
    for d in devices() {
        let model = Sequential::new().add(BatchNorm2d::with_options(2, on(d)).unwrap());
        let x: Vec<f32> = (0..3 * 2 * 3 * 3).map(|i| ((i * 13) % 11) as f32).collect();
        let x = t(&x, &[3, 2, 3, 3], d);
        model.forward(&x).unwrap();
        model.forward(&x.mul_scalar(2.0).unwrap()).unwrap();
        let state = model.state_dict();
        let mut names: Vec<&String> = state.keys().collect();
        names.sort();
        assert_eq!(
            names,
            [
                "0.bias",
                "0.num_batches_tracked",
                "0.running_mean",
                "0.running_var",
                "0.weight"
            ]
        );
        let fresh = Sequential::new().add(BatchNorm2d::with_options(2, on(d)).unwrap());
        fresh.eval();
        model.eval();
        let before = fresh.forward(&x).unwrap().to_vec().unwrap();
        fresh.load_state_dict(&state).unwrap();
        let want = model.forward(&x).unwrap().to_vec().unwrap();
        let got = fresh.forward(&x).unwrap().to_vec().unwrap();
        assert_eq!(got, want, "{d}");
        assert_ne!(before, want, "{d}: the loaded statistics matter");
        assert_eq!(
            fresh.state_dict()["0.num_batches_tracked"]
                .to_vec()
                .unwrap(),
            vec![2.0]
        );
    }
}

/// Bad input is a typed error naming the layer and the shape, and changes nothing.
#[test]
fn bad_input_is_an_error_and_changes_nothing() {
    for d in devices() {
        let bn = BatchNorm2d::with_options(3, on(d)).unwrap();
        let err = |x: Tensor| bn.forward(&x).unwrap_err();
        // wrong channel count
        let e = err(t(&[1.0; 2 * 4 * 9], &[2, 4, 3, 3], d));
        assert!(
            matches!(
                e,
                Error::BadShape {
                    op: "BatchNorm2d",
                    ..
                }
            ),
            "{d}: {e}"
        );
        assert!(
            e.to_string().contains("[2, 4, 3, 3]") && e.to_string().contains('3'),
            "{e}"
        );
        // not 4-D
        let e = err(t(&[1.0; 6], &[2, 3], d));
        assert!(
            matches!(
                e,
                Error::BadShape {
                    op: "BatchNorm2d",
                    ..
                }
            ),
            "{d}: {e}"
        );
        // one value a channel in training
        let e = err(t(&[1.0; 3], &[1, 3, 1, 1], d));
        assert!(matches!(e, Error::BadShape { .. }), "{d}: {e}");
        let bn1 = BatchNorm1d::with_options(3, on(d)).unwrap();
        for s in [&[3usize][..], &[1, 3, 1, 1], &[2, 4]] {
            let n = s.iter().product();
            assert!(
                bn1.forward(&t(&vec![1.0; n], s, d)).is_err(),
                "{d}: BatchNorm1d on {s:?}"
            );
        }
        assert!(
            bn1.forward(&t(&[1.0; 3], &[1, 3], d)).is_err(),
            "{d}: [1, 3] in training"
        );
        for b in [bn.running_mean(), bn1.running_mean()] {
            assert_eq!(
                buf(b),
                vec![0.0; 3],
                "{d}: an error changed the running mean"
            );
        }
        assert_eq!(
            bn.state_dict()["num_batches_tracked"].to_vec().unwrap(),
            vec![0.0]
        );
        // one value a channel is fine in eval
        bn.eval();
        assert!(bn.forward(&t(&[1.0; 3], &[1, 3, 1, 1], d)).is_ok(), "{d}");
    }
}
