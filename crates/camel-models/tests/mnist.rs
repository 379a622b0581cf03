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
