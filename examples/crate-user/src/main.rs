//! Trains a small classifier with camel from a crate of its own: points in the plane, labelled
//! by whether they lie inside the unit circle. Exits with an error unless the model learns it.
//!
//! Run with `cargo run` in this folder (add `--features cuda` with a GPU; see the README).

use camel_nn::{manual_seed, no_grad, Device, Linear, Module, ReLU, Result, Sequential, Tensor};
use camel_optim::{Adam, Optimizer};

/// `n` points drawn uniformly from [-1.5, 1.5)², and their labels (1 inside the unit circle).
fn data(n: usize, device: Device) -> Result<(Tensor, Tensor)> {
    let x = Tensor::rand(&[n, 2], -1.5, 1.5, Device::Cpu)?;
    let labels: Vec<i64> = x
        .to_vec()?
        .chunks(2)
        .map(|p| i64::from(p[0] * p[0] + p[1] * p[1] < 1.0))
        .collect();
    Ok((x.to(device)?, Tensor::from_vec_i64(labels, &[n], device)?))
}

/// Fraction of `x`'s points the model classifies as `y` says.
fn accuracy(model: &dyn Module, x: &Tensor, y: &Tensor) -> Result<f32> {
    let pred = no_grad(|| model.forward(x))?.argmax_last()?.to_vec_i64()?;
    let hits = pred
        .iter()
        .zip(y.to_vec_i64()?)
        .filter(|(p, t)| **p == *t)
        .count();
    Ok(hits as f32 / pred.len() as f32)
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let device = if camel_nn::cuda_available() {
        Device::Cuda(0)
    } else {
        Device::Cpu
    };
    manual_seed(0); // the same weights and data on every run

    let (x, y) = data(512, device)?;
    let (x_test, y_test) = data(256, device)?;
    println!("first training points:\n{}", x.narrow(0, 0, 3)?);

    let model = Sequential::new()
        .add(Linear::new(2, 32)?)
        .add(ReLU)
        .add(Linear::new(32, 2)?);
    model.to(device)?;
    println!("model: {model:?}");
    let mut opt = Adam::new(model.parameters(), 0.02)?;

    for step in 1..=300 {
        opt.zero_grad();
        let loss = model.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        if step % 100 == 0 {
            println!("step {step}: loss {:.4}", loss.item()?);
        }
    }

    model.eval();
    let acc = accuracy(&model, &x_test, &y_test)?;
    println!("test accuracy {:.1}% on {device}", acc * 100.0);
    if acc < 0.9 {
        return Err(format!("the model did not learn the circle: accuracy {acc}").into());
    }
    Ok(())
}
