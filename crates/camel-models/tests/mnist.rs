//! CI's MNIST check: a short training run on a subset must reach a meaningful accuracy on the
//! full 10,000-image test set. (The full 5-epoch run is `camel train mlp`, see README.)

use camel_models::data::{data_dir, DataLoader, Mnist};
use camel_models::train::{evaluate, train_epoch};
use camel_models::Mlp;
use camel_nn::{Device, Module};
use camel_optim::Adam;

#[test]
fn mlp_learns_mnist_subset() {
    let dir = data_dir();
    let mut ds = match Mnist::load(&dir, "mnist") {
        Ok(ds) => ds,
        Err(e) => {
            if camel_nn::core::config::require_data() {
                panic!("MNIST required (CAMEL_REQUIRE_DATA=1) but not loadable: {e}");
            }
            eprintln!("skipped: MNIST not found at {} ({e})", dir.display());
            return;
        }
    };
    ds.train = ds.train.subset(20_000);
    let device = Device::Cpu;
    let model = Mlp::new(&[784, 256, 256, 10], 0, device).unwrap();
    let mut opt = Adam::new(model.parameters(), 1e-3).unwrap();
    let loader = DataLoader::new(ds.train.n, 64).unwrap().shuffle(Some(0));
    let (before_loss, before_acc) = evaluate(&model, &ds.test, 1000, device).unwrap();
    for epoch in 0..2 {
        train_epoch(
            &model,
            &mut opt,
            &ds.train,
            &loader,
            epoch,
            device,
            100,
            |_, _, _| {},
        )
        .unwrap();
    }
    let (loss, acc) = evaluate(&model, &ds.test, 1000, device).unwrap();
    eprintln!("MNIST subset: test loss {before_loss:.3} -> {loss:.3}, accuracy {before_acc:.3} -> {acc:.4}");
    assert!(
        acc >= 0.95,
        "test accuracy {acc} after 2 epochs on 20k images (expected ≥ 0.95)"
    );
    assert!(
        loss < before_loss / 5.0,
        "test loss fell only from {before_loss} to {loss}"
    );
}

/// Mixed precision: the MLP trained with its matrix products in bf16, or in f16 with dynamic
/// loss scaling (f32 master weights), reaches the f32 run's accuracy within noise, on every
/// device. The logits are 16-bit and every parameter stays f32.
#[test]
fn mlp_in_16_bit_matches_f32_on_a_subset() {
    use camel_models::train::{train_epoch_augmented, Precision};
    use camel_nn::DType;
    let dir = data_dir();
    let Ok(mut ds) = Mnist::load(&dir, "mnist") else {
        assert!(!camel_nn::core::config::require_data(), "MNIST required");
        return;
    };
    ds.train = ds.train.subset(6_000);
    let mut devices = vec![Device::Cpu];
    if camel_nn::cuda_available() {
        devices.push(Device::Cuda(0));
    }
    for device in devices {
        let mut acc = Vec::new();
        let precisions = [Precision::F32, Precision::Bf16, Precision::F16];
        for precision in precisions {
            let model = Mlp::new(&[784, 128, 10], 0, device).unwrap();
            let mut opt = Adam::new(model.parameters(), 1e-3).unwrap();
            let loader = DataLoader::new(ds.train.n, 64).unwrap().shuffle(Some(0));
            let _scope = camel_nn::autocast_guard(precision.autocast()).unwrap();
            let mut scaler = precision.loss_scaler(device).unwrap();
            train_epoch_augmented(
                &model,
                &mut opt,
                scaler.as_mut(),
                &ds.train,
                &loader,
                0,
                device,
                100,
                None,
                |_, _, _| {},
            )
            .unwrap();
            if let Some(s) = &scaler {
                // the default scale (2^16) overflows none of this model's gradients
                assert_eq!(s.skipped_steps().unwrap(), 0, "{device}");
            }
            let x = camel_nn::Tensor::zeros(&[2, 784], device).unwrap();
            let want = precision.autocast().unwrap_or(DType::F32);
            assert_eq!(model.forward(&x).unwrap().dtype(), want, "{device} logits");
            for (name, p) in model.named_parameters() {
                assert_eq!(p.tensor().dtype(), DType::F32, "{device} {name}");
            }
            acc.push(evaluate(&model, &ds.test, 1000, device).unwrap().1);
        }
        eprintln!(
            "{device}: accuracy f32 {:.4}, bf16 {:.4}, f16 {:.4}",
            acc[0], acc[1], acc[2]
        );
        assert!(acc[0] >= 0.85, "{device} f32 accuracy {}", acc[0]);
        for (p, a) in precisions.iter().zip(&acc).skip(1) {
            assert!(
                (acc[0] - a).abs() <= 0.015,
                "{device}: {} accuracy {a} against f32's {}",
                p.name(),
                acc[0]
            );
        }
    }
}
