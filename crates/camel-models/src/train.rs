//! Training and evaluation loops for image classifiers (MNIST-style sets and CIFAR-10), with
//! optional augmentation of the training batches.

use crate::data::{Augment, DataLoader, Split};
use crate::{Error, Result};
use camel_nn::{no_grad, Device, Module, Parameter, Tensor};
use camel_optim::{GradScaler, Optimizer};
use std::time::Instant;

/// The precision a model trains in. Parameters, their gradients, the optimizer's state and the
/// losses stay f32 in every mode: `Bf16` and `F16` run the matrix products in that dtype inside
/// an autocast scope ([`camel_nn::core::autocast`]) on the f32 master weights, and `F16` scales
/// the loss ([`Precision::loss_scaler`]).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// Matrix products in bf16 (f32's range: no loss scaling needed).
    Bf16,
    /// Matrix products in f16, with dynamic loss scaling (f16's range is too narrow for small
    /// gradients without it).
    F16,
}

impl Precision {
    /// The autocast dtype of this precision (`None` for f32).
    pub fn autocast(&self) -> Option<camel_nn::DType> {
        match self {
            Precision::F32 => None,
            Precision::Bf16 => Some(camel_nn::DType::BF16),
            Precision::F16 => Some(camel_nn::DType::F16),
        }
    }

    /// The loss scaler this precision trains with on `device`: a [`GradScaler`] for f16, none
    /// for f32 and bf16.
    pub fn loss_scaler(&self, device: Device) -> Result<Option<GradScaler>> {
        match self {
            Precision::F16 => Ok(Some(GradScaler::new(device)?)),
            Precision::F32 | Precision::Bf16 => Ok(None),
        }
    }

    /// The precision's name: `f32`, `bf16`, `f16`.
    pub fn name(&self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        }
    }
}

/// The backward pass and optimizer step of one batch: `loss.backward()` and `opt.step()`, or
/// with a loss `scaler`, the scaled loss's backward and the scaler's guarded step and update.
/// With `clip` (the parameters and a maximum norm) the gradients are clipped by their global
/// norm first, after the scaler has unscaled them. Nothing is read on the host.
pub fn backward_step(
    loss: &Tensor,
    opt: &mut dyn Optimizer,
    scaler: Option<&mut GradScaler>,
    clip: Option<(&[Parameter], f32)>,
) -> Result<()> {
    let clip_grads = || -> Result<()> {
        if let Some((params, max_norm)) = clip {
            camel_optim::clip_grad_norm(params, max_norm)?;
        }
        Ok(())
    };
    match scaler {
        Some(s) => {
            s.scale(loss)?.backward()?;
            if clip.is_some() {
                s.unscale(opt)?;
            }
            clip_grads()?;
            s.step(opt)?;
            s.update()?;
        }
        None => {
            loss.backward()?;
            clip_grads()?;
            opt.step()?;
        }
    }
    Ok(())
}

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

/// One batch of a split as tensors on `device`: features `[b, channels·rows·cols]` (each row an
/// NCHW image, flattened) and i64 labels `[b]`.
pub fn batch(split: &Split, idx: &[usize], device: Device) -> Result<(Tensor, Tensor)> {
    train_batch(split, idx, device, None)
}

/// One training batch: as [`batch`], with each image cropped and flipped by `augment` when one
/// is given (the images are augmented on the host, before they go to `device`).
pub fn train_batch(
    split: &Split,
    idx: &[usize],
    device: Device,
    augment: Option<&mut Augment>,
) -> Result<(Tensor, Tensor)> {
    let (mut x, y) = split.gather(idx);
    if let Some(aug) = augment {
        let [c, h, w] = split.image_shape();
        x = aug.apply(&x, [idx.len(), c, h, w])?;
    }
    Ok((
        Tensor::from_vec(x, &[idx.len(), split.image_len()], device)?,
        Tensor::from_vec_i64(y, &[idx.len()], device)?,
    ))
}

/// The augmentation of the training batches of epoch `epoch` of a run seeded with `seed`:
/// CIFAR-10's recipe ([`Augment::cifar`]: random crops of the image padded by 4, horizontal
/// flips) from a generator seeded with both, so every epoch draws different crops and a run is
/// repeatable.
pub fn epoch_augment(seed: u64, epoch: u64) -> Augment {
    Augment::cifar(seed ^ epoch.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
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
/// Returns the mean training loss, the number of steps and the seconds taken.
#[allow(clippy::too_many_arguments)]
pub fn train_epoch(
    model: &dyn Module,
    opt: &mut dyn Optimizer,
    train: &Split,
    loader: &DataLoader,
    epoch: u64,
    device: Device,
    report_every: usize,
    on_step: impl FnMut(usize, usize, f32),
) -> Result<(f32, usize, f64)> {
    train_epoch_augmented(
        model,
        opt,
        None,
        train,
        loader,
        epoch,
        device,
        report_every,
        None,
        on_step,
    )
}

/// [`train_epoch`], with the loss scaled by `scaler` when one is given (f16 training, see
/// [`backward_step`]) and every training batch augmented by `augment` when one is given (see
/// [`train_batch`] and [`epoch_augment`]); evaluation never augments.
#[allow(clippy::too_many_arguments)]
pub fn train_epoch_augmented(
    model: &dyn Module,
    opt: &mut dyn Optimizer,
    mut scaler: Option<&mut GradScaler>,
    train: &Split,
    loader: &DataLoader,
    epoch: u64,
    device: Device,
    report_every: usize,
    mut augment: Option<&mut Augment>,
    mut on_step: impl FnMut(usize, usize, f32),
) -> Result<(f32, usize, f64)> {
    let start = Instant::now();
    model.train();
    let total = loader.num_batches();
    let mut loss_sum = Tensor::zeros(&[], device)?;
    let mut steps = 0usize;
    for idx in loader.epoch(epoch) {
        let (x, y) = train_batch(train, &idx, device, augment.as_deref_mut())?;
        opt.zero_grad();
        let loss = model.forward(&x)?.cross_entropy(&y)?;
        backward_step(&loss, opt, scaler.as_deref_mut(), None)?;
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

/// Settings of a GPT-mini training run (nanoGPT's `train.py` loop).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GptTrainConfig {
    /// The model; its `vocab_size` is the data's.
    pub model: crate::gpt::GptConfig,
    /// Sequences per step.
    pub batch_size: usize,
    /// Peak learning rate (after warm-up).
    pub lr: f32,
    /// Floor of the cosine decay.
    pub min_lr: f32,
    /// Steps of linear warm-up.
    pub warmup: usize,
    /// Number of optimizer steps (nanoGPT's `max_iters`).
    pub iters: usize,
    /// Evaluate every this many steps (and at the last).
    pub eval_interval: usize,
    /// Batches averaged per evaluation of each split.
    pub eval_iters: usize,
    /// AdamW's decoupled weight decay, applied to matrices only.
    pub weight_decay: f32,
    /// Clip the gradients' global norm to this; 0 turns clipping off.
    pub grad_clip: f32,
    /// AdamW's β₁ and β₂.
    pub betas: [f32; 2],
    /// Seed of the initialisation, the batches and dropout.
    pub seed: u64,
    /// Precision of the matrix products (f32 master weights in every mode).
    #[serde(default)]
    pub precision: Precision,
}

/// An evaluation during [`train_gpt`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GptEval {
    /// Steps taken before this evaluation.
    pub iter: usize,
    /// Mean loss over `eval_iters` training batches.
    pub train_loss: f32,
    /// Mean loss over `eval_iters` validation batches.
    pub val_loss: f32,
    /// Learning rate of the step about to run.
    pub lr: f32,
    /// Milliseconds per training step since the previous evaluation (0 at the first).
    pub ms_per_step: f64,
    /// With loss scaling (f16): the scale and the steps skipped so far, read at the evaluation.
    pub loss_scale: Option<(f32, u64)>,
}

/// Mean loss of `model` over `iters` random batches of `split`, in evaluation mode and without
/// autograd; the losses are summed on the device and read once.
pub fn gpt_estimate_loss(
    model: &crate::gpt::GptMini,
    data: &crate::data::TextData,
    split: crate::data::TextSplit,
    batch_size: usize,
    iters: usize,
    g: &mut camel_nn::Generator,
    device: Device,
) -> Result<f32> {
    if iters == 0 {
        return Err(Error::Invalid(
            "gpt_estimate_loss: iters must be at least 1".into(),
        ));
    }
    let was = model.is_training();
    model.set_training(false);
    let block = model.config().block_size;
    let out = no_grad(|| {
        let mut sum = Tensor::zeros(&[], device)?;
        for _ in 0..iters {
            let (x, y) = data.batch(split, batch_size, block, g, device)?;
            let loss = crate::gpt::GptMini::loss(&model.logits(&x)?, &y)?;
            sum = sum.add(&loss)?;
        }
        Ok(sum.item()? / iters as f32)
    });
    model.set_training(was);
    out
}

/// Trains `model` on `data` for `cfg.iters` steps with AdamW (weight decay on matrices
/// only), the warm-up + cosine schedule and gradient clipping, as nanoGPT does. Before the
/// steps `0, eval_interval, 2·eval_interval, …` and after the last step, it estimates both splits'
/// losses and calls `on_eval` (which saves checkpoints, logs, prints); `on_step(iter)` is called
/// after every step without reading anything from the device. A non-finite loss at an
/// evaluation stops training with [`Error::Diverged`]. Returns the best validation loss.
pub fn train_gpt(
    model: &crate::gpt::GptMini,
    data: &crate::data::TextData,
    cfg: &GptTrainConfig,
    device: Device,
    mut on_step: impl FnMut(usize),
    mut on_eval: impl FnMut(&GptEval) -> Result<()>,
) -> Result<f32> {
    use camel_optim::{decay_groups, Adam, LrSchedule};
    let sched = LrSchedule::WarmupCosine {
        max_lr: cfg.lr,
        min_lr: cfg.min_lr,
        warmup: cfg.warmup,
        total: cfg.iters,
    };
    let groups = decay_groups(model.named_parameters(), cfg.weight_decay);
    let mut opt = Adam::adamw_groups(groups, cfg.lr)?.betas(cfg.betas[0], cfg.betas[1])?;
    let params = model.parameters();
    let mut scaler = cfg.precision.loss_scaler(device)?;
    let mut g_train = camel_nn::Generator::new(cfg.seed);
    let mut g_eval = camel_nn::Generator::new(cfg.seed ^ 0x5eed_e7a1);
    let block = model.config().block_size;
    let interval = cfg.eval_interval.max(1);
    let mut best = f32::INFINITY;
    let mut t_last = Instant::now();
    let mut steps_since = 0usize;
    // the evaluations run in the training precision too, so their losses compare
    let _precision = camel_nn::core::autocast_guard(cfg.precision.autocast())?;
    model.set_training(true);
    for iter in 0..=cfg.iters {
        let lr = sched.lr(iter);
        if iter % interval == 0 || iter == cfg.iters {
            let step_ms = if steps_since > 0 {
                t_last.elapsed().as_secs_f64() * 1e3 / steps_since as f64
            } else {
                0.0
            };
            let train_loss = gpt_estimate_loss(
                model,
                data,
                crate::data::TextSplit::Train,
                cfg.batch_size,
                cfg.eval_iters,
                &mut g_eval,
                device,
            )?;
            let val_loss = gpt_estimate_loss(
                model,
                data,
                crate::data::TextSplit::Val,
                cfg.batch_size,
                cfg.eval_iters,
                &mut g_eval,
                device,
            )?;
            check_finite(
                train_loss,
                || format!("the evaluation before step {iter}"),
                lr,
            )?;
            check_finite(
                val_loss,
                || format!("the evaluation before step {iter}"),
                lr,
            )?;
            best = best.min(val_loss);
            let loss_scale = match &scaler {
                Some(s) => Some((s.scale_value()?, s.skipped_steps()?)),
                None => None,
            };
            on_eval(&GptEval {
                iter,
                train_loss,
                val_loss,
                lr,
                ms_per_step: step_ms,
                loss_scale,
            })?;
            t_last = Instant::now();
            steps_since = 0;
        }
        if iter == cfg.iters {
            break;
        }
        let (x, y) = data.batch(
            crate::data::TextSplit::Train,
            cfg.batch_size,
            block,
            &mut g_train,
            device,
        )?;
        opt.set_lr(lr)?;
        opt.zero_grad();
        let loss = crate::gpt::GptMini::loss(&model.logits(&x)?, &y)?;
        let clip = (cfg.grad_clip > 0.0).then_some((&params[..], cfg.grad_clip));
        backward_step(&loss, &mut opt, scaler.as_mut(), clip)?;
        steps_since += 1;
        on_step(iter);
    }
    Ok(best)
}
