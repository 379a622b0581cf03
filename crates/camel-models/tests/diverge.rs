//! A training run whose loss becomes NaN or infinite stops with an error naming the epoch, the
//! step and the learning rate (before: it ran to the end and printed `train loss NaN`).

use camel_models::data::{DataLoader, Split};
use camel_models::train::{evaluate, train_epoch};
use camel_models::{Error, Mlp};
use camel_nn::testing::devices;
use camel_nn::Module;
use camel_optim::Sgd;

fn split(n: usize) -> Split {
    Split {
        images: (0..n * 16).map(|i| (i % 7) as f32 - 3.0).collect(),
        labels: (0..n).map(|i| (i % 10) as u8).collect(),
        n,
        channels: 1,
        rows: 4,
        cols: 4,
    }
}

#[test]
fn a_diverging_run_stops_naming_epoch_step_and_learning_rate() {
    for dev in devices() {
        let train = split(64);
        let model = Mlp::new(&[16, 32, 10], 0, dev).unwrap();
        let mut opt = Sgd::new(model.parameters(), 1e30).unwrap();
        let loader = DataLoader::new(train.n, 8).unwrap();
        let mut reported = Vec::new();
        let err = train_epoch(&model, &mut opt, &train, &loader, 3, dev, 1, |s, _, l| {
            reported.push((s, l))
        })
        .expect_err("a learning rate of 1e30 trained without error");
        assert!(matches!(err, Error::Diverged { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("epoch 3") && msg.contains("step") && msg.contains("learning rate (1e30)"),
            "{dev}: {msg}"
        );
        assert!(reported.iter().all(|(_, l)| l.is_finite()), "{reported:?}");
    }
}

#[test]
fn evaluating_or_training_on_nothing_is_an_error() {
    let empty = split(0);
    let model = Mlp::new(&[16, 10], 0, camel_nn::Device::Cpu).unwrap();
    assert!(evaluate(&model, &empty, 10, camel_nn::Device::Cpu).is_err());
}
