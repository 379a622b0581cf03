//! Training and evaluation loops for classifiers on MNIST-style data.

use crate::data::{DataLoader, Split};
use crate::{Error, Result};
use camel_nn::{no_grad, Device, Module, Tensor};
use camel_optim::Optimizer;
use std::time::Instant;

/// What one epoch achieved.
#[derive(Clone, Debug)]
pub struct EpochStats {
    /// 1-based epoch number.
    pub epoch: usize,
    /// Mean training loss over the epoch's batches.
    pub train_loss: f32,
    /// Mean test loss.
    pub test_loss: f32,
    /// Test accuracy in [0, 1].
    pub test_acc: f32,
    /// Wall time of the training part of the epoch, seconds.
    pub train_seconds: f64,
    /// Number of optimizer steps.
    pub steps: usize,
}

/// One batch of a split as tensors on `device`: features `[b, rows·cols]` and i64 labels `[b]`.
pub fn batch(split: &Split, idx: &[usize], device: Device) -> Result<(Tensor, Tensor)> {
    let (x, y) = split.gather(idx);
    let d = split.rows * split.cols;
    Ok((
        Tensor::from_vec(x, &[idx.len(), d], device)?,
        Tensor::from_vec_i64(y, &[idx.len()], device)?,
    ))
}

/// `Ok` when `loss` (read from the device where the loop already reads it) is finite, else
/// [`Error::Diverged`] naming `at` (epoch and step) and the learning rate `lr`.
pub fn check_finite(loss: f32, at: impl FnOnce() -> String, lr: f32) -> Result<()> {
    if loss.is_finite() {
        Ok(())
    } else {
        Err(Error::Diverged { loss, at: at(), lr })
    }
}

/// Mean loss and accuracy of `model` on `split`, in batches of `batch_size`, without autograd,
/// in eval mode (BatchNorm's running statistics, no dropout); the model's mode is restored
/// afterwards. An empty split is an error (its mean would be NaN).
pub fn evaluate(
    model: &dyn Module,
    split: &Split,
    batch_size: usize,
    device: Device,
) -> Result<(f32, f32)> {
    if split.n == 0 {
        return Err(Error::Invalid(
            "evaluate: the split holds 0 examples".into(),
        ));
    }
    let was_training = model.is_training();
    model.eval();
    let result = no_grad(|| {
        let loader = DataLoader::new(split.n, batch_size)?;
        let mut loss_sum = Tensor::zeros(&[], device)?;
        let mut correct = 0usize;
        for idx in loader.epoch(0) {
            let (x, y) = batch(split, &idx, device)?;
            let logits = model.forward(&x)?;
            loss_sum = loss_sum.add(&logits.cross_entropy(&y)?.mul_scalar(idx.len() as f32)?)?;
            let pred = logits.argmax_last()?.to_vec_i64()?;
            correct += pred
                .iter()
                .zip(&idx)
                .filter(|(&p, &i)| p == split.labels[i] as i64)
                .count();
        }
        Ok((
            loss_sum.item()? / split.n as f32,
            correct as f32 / split.n as f32,
        ))
    });
    model.set_training(was_training);
    result
}

/// Train for one epoch; `on_step(step, steps, running_loss)` is called every `report_every` steps
/// (reading the loss is the only host sync of the loop) and after the last step. A running loss
/// that is NaN or infinite at one of those reads stops training with [`Error::Diverged`], naming
/// the epoch and step; an epoch with no batches is an error. The model runs in training mode.
#[allow(clippy::too_many_arguments)]
pub fn train_epoch(
    model: &dyn Module,
    opt: &mut dyn Optimizer,
    train: &Split,
    loader: &DataLoader,
    epoch: u64,
    device: Device,
    report_every: usize,
    mut on_step: impl FnMut(usize, usize, f32),
) -> Result<(f32, usize, f64)> {
    let start = Instant::now();
    model.train();
    let total = loader.num_batches();
    let mut loss_sum = Tensor::zeros(&[], device)?;
    let mut steps = 0usize;
    for idx in loader.epoch(epoch) {
        let (x, y) = batch(train, &idx, device)?;
        opt.zero_grad();
        let loss = model.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        loss_sum = no_grad(|| loss_sum.add(&loss.detach()))?;
        steps += 1;
        if steps.is_multiple_of(report_every.max(1)) || steps == total {
            let running = loss_sum.item()? / steps as f32;
            // The sum is non-finite from the first non-finite batch loss on (losses are ≥ 0).
            check_finite(
                running,
                || format!("epoch {epoch}, by step {steps} of {total}"),
                opt.lr(),
            )?;
            on_step(steps, total, running);
        }
    }
    if steps == 0 {
        return Err(Error::Invalid(format!(
            "train_epoch: epoch {epoch} has no batches (the training split holds {} examples)",
            train.n
        )));
    }
    let mean = loss_sum.item()? / steps as f32;
    check_finite(mean, || format!("the end of epoch {epoch}"), opt.lr())?;
    Ok((mean, steps, start.elapsed().as_secs_f64()))
}
