//! `Dropout` as a module: its Debug form and argument check, the identity in eval mode and at
//! p = 0, train/eval through a `Sequential`, the mask's statistics, the same mask on every device
//! for the same seed, and gradients through it.

use camel_nn::testing::devices;
use camel_nn::{manual_seed, Dropout, Error, Linear, Module, Sequential, Tensor};

#[test]
fn debug_and_bad_probabilities() {
    assert_eq!(
        format!("{:?}", Dropout::new(0.1).unwrap()),
        "Dropout(p=0.1)"
    );
    assert_eq!(Dropout::new(0.25).unwrap().p(), 0.25);
    for p in [-0.1f32, 1.5, f32::NAN] {
        match Dropout::new(p) {
            Err(e @ Error::InvalidArgument { .. }) => {
                assert!(e.to_string().starts_with("Dropout"), "{e}")
            }
            other => panic!("Dropout::new({p}): {other:?}"),
        }
    }
    assert!(Dropout::new(0.0).is_ok() && Dropout::new(1.0).is_ok());
}

/// Every use of the global generator is in this one test, so parallel tests do not interleave.
#[test]
fn train_eval_statistics_and_devices() {
    let n = 100_000;
    let mut cpu_mask: Option<Vec<f32>> = None;
    for dev in devices() {
        let drop = Dropout::new(0.2).unwrap();
        let x = Tensor::ones(&[n], dev).unwrap();

        // training: about 80 % kept, each kept value 1 / 0.8
        manual_seed(3);
        let y = drop.forward(&x).unwrap().to_vec().unwrap();
        assert!(y.iter().all(|&v| v == 0.0 || v == 1.0 / 0.8), "on {dev}");
        let kept = y.iter().filter(|&&v| v != 0.0).count() as f64 / n as f64;
        // σ = √(0.16 / n) ≈ 1.3e-3
        assert!((kept - 0.8).abs() < 8e-3, "kept {kept} on {dev}");
        // the same seed gives the same mask, on every device
        match &cpu_mask {
            None => cpu_mask = Some(y.clone()),
            Some(c) => assert_eq!(&y, c, "mask on {dev} vs cpu"),
        }
        // the stream moves on: the next call draws another mask
        let y2 = drop.forward(&x).unwrap().to_vec().unwrap();
        assert_ne!(y, y2, "on {dev}");

        // eval mode and p = 0: the identity
        drop.eval();
        assert!(!drop.is_training());
        assert_eq!(drop.forward(&x).unwrap().to_vec().unwrap(), vec![1.0; n]);
        drop.train();
        let none = Dropout::new(0.0).unwrap();
        assert!(none.forward(&x).unwrap().shares_storage(&x));
        assert_eq!(none.parameters().len(), 0);

        // inside a model: eval() reaches the Dropout, so eval outputs repeat
        manual_seed(4);
        let model = Sequential::new()
            .add(Linear::new(8, 16).unwrap())
            .add(Dropout::new(0.5).unwrap())
            .add(Linear::new(16, 3).unwrap());
        model.to(dev).unwrap();
        let xin = Tensor::randn_seeded(&[5, 8], 1, dev).unwrap();
        let a = model.forward(&xin).unwrap().to_vec().unwrap();
        let b = model.forward(&xin).unwrap().to_vec().unwrap();
        assert_ne!(a, b, "training draws a new mask each call on {dev}");
        model.eval();
        let c = model.forward(&xin).unwrap().to_vec().unwrap();
        let d = model.forward(&xin).unwrap().to_vec().unwrap();
        assert_eq!(c, d, "eval is deterministic on {dev}");

        // gradients flow through the kept elements only, scaled by 1 / (1 − p)
        model.train();
        manual_seed(5);
        let leaf = Tensor::ones(&[64], dev)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let y = Dropout::new(0.5).unwrap().forward(&leaf).unwrap();
        y.sum().unwrap().backward().unwrap();
        assert_eq!(
            leaf.grad().unwrap().to_vec().unwrap(),
            y.to_vec().unwrap(),
            "d Σ dropout(1) / dx is the mask · 2 on {dev}"
        );
    }
}
