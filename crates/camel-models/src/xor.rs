//! XOR: the smallest problem a linear model cannot solve and an MLP can.

use crate::{Mlp, Result};
use camel_nn::{Device, Module, Tensor};
use camel_optim::{Adam, Optimizer};

/// Train a 2-8-2 MLP on the four XOR points for `steps` Adam steps; returns the loss per step.
pub fn train_xor(steps: usize, seed: u64, device: Device) -> Result<Vec<f32>> {
    let x = Tensor::from_vec(vec![0., 0., 0., 1., 1., 0., 1., 1.], &[4, 2], device)?;
    let y = Tensor::from_vec_i64(vec![0, 1, 1, 0], &[4], device)?;
    let model = Mlp::new(&[2, 8, 2], seed, device)?;
    let mut opt = Adam::new(model.parameters(), 0.05)?;
    let mut losses = Vec::with_capacity(steps);
    for step in 1..=steps {
        opt.zero_grad();
        let loss = model.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        let l = loss.item()?;
        crate::train::check_finite(l, || format!("step {step}"), opt.lr())?;
        losses.push(l);
    }
    Ok(losses)
}
