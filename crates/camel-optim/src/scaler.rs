//! Dynamic loss scaling, for training with f16 matrix products (PyTorch's
//! `torch.amp.GradScaler`).
//!
//! f16 keeps 10 bits of mantissa but only 5 of exponent: gradients below about 6e-8 become 0.
//! The scaler multiplies the loss by a large factor before `backward`, so the 16-bit gradients
//! of the activations stay in range, and divides the parameters' f32 gradients by it before the
//! optimizer's update. When the scale is too large a gradient overflows to inf: that step is
//! skipped (no parameter or optimizer buffer changes) and the scale halves; after
//! `growth_interval` finite steps in a row it doubles again.
//!
//! Every one of those decisions is made on the device: the scale, the overflow flag, the
//! growth tracker and the count of skipped steps are `[1]` f32 tensors the kernels read and
//! write, and nothing is read on the host during training (PyTorch's `GradScaler.step` reads
//! the flag on every step). Adam's step count leaves the skipped steps out, as PyTorch's does.

use crate::Optimizer;
use camel_nn::core::check_loss_scale_options;
use camel_nn::{no_grad_guard, DType, Device, Error, Parameter, Result, Tensor};

/// Where a scaler is in its iteration: `unscale` and `step` at most once each between two
/// `update`s, as PyTorch requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Ready,
    Unscaled,
    Stepped,
}

/// Dynamic loss scaling (PyTorch's `torch.amp.GradScaler`) for one optimizer. An iteration is
/// `scale` → `backward` → (`unscale`, to clip or read the true gradients) → `step` →
/// `update`.
///
/// ```
/// use camel_nn::{Device, Linear, Module, Tensor};
/// use camel_optim::{Adam, GradScaler, Optimizer};
/// let model = Linear::new(3, 1)?;
/// let mut opt = Adam::new(model.parameters(), 1e-2)?;
/// let mut scaler = GradScaler::new(Device::Cpu)?;
/// let x = Tensor::ones(&[4, 3], Device::Cpu)?;
/// for _ in 0..3 {
///     opt.zero_grad();
///     let loss = model.forward(&x)?.square()?.mean()?;
///     scaler.scale(&loss)?.backward()?; // gradients × 65536
///     scaler.step(&mut opt)?; // unscaled, then the update (skipped on an overflow)
///     scaler.update()?; // the scale backs off or grows
/// }
/// assert_eq!(scaler.skipped_steps()?, 0);
/// # Ok::<(), camel_nn::Error>(())
/// ```
pub struct GradScaler {
    scale: Tensor,
    growth_tracker: Tensor,
    found_inf: Tensor,
    skipped: Tensor,
    growth_factor: f32,
    backoff_factor: f32,
    growth_interval: u32,
    stage: Stage,
}

impl GradScaler {
    /// A scaler on `device` with PyTorch's defaults: initial scale 2^16, growth factor 2,
    /// backoff factor 0.5, growth interval 2000 steps.
    pub fn new(device: Device) -> Result<GradScaler> {
        GradScaler::with_options(device, 65536.0, 2.0, 0.5, 2000)
    }

    /// A scaler with its own initial scale (finite and > 0), growth factor (finite and > 1),
    /// backoff factor (in (0, 1)) and growth interval (in [1, 2^24] steps).
    pub fn with_options(
        device: Device,
        init_scale: f32,
        growth_factor: f32,
        backoff_factor: f32,
        growth_interval: u32,
    ) -> Result<GradScaler> {
        if !(init_scale.is_finite() && init_scale > 0.0) {
            return Err(Error::InvalidArgument {
                op: "GradScaler",
                msg: format!("the initial scale must be finite and > 0, got {init_scale}"),
            });
        }
        check_loss_scale_options("GradScaler", growth_factor, backoff_factor, growth_interval)?;
        Ok(GradScaler {
            scale: Tensor::full(&[1], init_scale, device)?,
            growth_tracker: Tensor::zeros(&[1], device)?,
            found_inf: Tensor::zeros(&[1], device)?,
            skipped: Tensor::zeros(&[1], device)?,
            growth_factor,
            backoff_factor,
            growth_interval,
            stage: Stage::Ready,
        })
    }

    /// The device the scaler's state lives on.
    pub fn device(&self) -> Device {
        self.scale.device()
    }

    /// `loss × scale`, in f32 (a 16-bit loss is widened first), to call `backward` on. The
    /// multiplication is an op like any other, so every gradient comes back scaled. The loss
    /// must be on the scaler's device.
    pub fn scale(&self, loss: &Tensor) -> Result<Tensor> {
        if loss.device() != self.device() {
            return Err(Error::DeviceMismatch {
                op: "GradScaler::scale",
                lhs: self.device(),
                rhs: loss.device(),
            });
        }
        let s = self.scale.reshape(&vec![1; loss.rank()])?;
        loss.to_dtype(DType::F32)?.mul(&s)
    }

    /// Divides the gradients of `opt`'s parameters by the scale, in place, and records on the
    /// device whether any of them holds an inf or NaN (PyTorch's `unscale_`). Call it before
    /// reading or clipping the gradients; [`GradScaler::step`] calls it otherwise. Calling it
    /// twice in one iteration is an error (the gradients would be divided twice).
    pub fn unscale(&mut self, opt: &dyn Optimizer) -> Result<()> {
        match self.stage {
            Stage::Ready => {}
            Stage::Unscaled => {
                return self.misuse("unscale() has already been called since the last update()")
            }
            Stage::Stepped => return self.misuse("unscale() after step(): call update() first"),
        }
        let _ng = no_grad_guard();
        let params: Vec<Tensor> = opt.params().iter().map(Parameter::tensor).collect();
        Tensor::unscale_grads(&params, &self.scale, &self.found_inf)?;
        self.stage = Stage::Unscaled;
        Ok(())
    }

    /// Unscales the gradients (unless [`GradScaler::unscale`] already did) and runs `opt`'s
    /// update, which the device skips when a gradient overflowed: then no parameter and no
    /// optimizer buffer changes, and Adam's step count does not advance.
    pub fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        match self.stage {
            Stage::Ready => self.unscale(opt)?,
            Stage::Unscaled => {}
            Stage::Stepped => {
                return self.misuse("step() has already been called since the last update()")
            }
        }
        opt.step_guarded(&self.found_inf, &self.skipped)?;
        self.stage = Stage::Stepped;
        Ok(())
    }

    /// Adjusts the scale after [`GradScaler::step`] (PyTorch's `update`): an overflow
    /// multiplies it by the backoff factor and counts a skipped step; `growth_interval` finite
    /// steps in a row multiply it by the growth factor (unless that would overflow f32).
    pub fn update(&mut self) -> Result<()> {
        if self.stage != Stage::Stepped {
            return self.misuse("update() without a step() since the last update()");
        }
        Tensor::update_loss_scale(
            &self.scale,
            &self.growth_tracker,
            &self.found_inf,
            &self.skipped,
            self.growth_factor,
            self.backoff_factor,
            self.growth_interval,
        )?;
        self.stage = Stage::Ready;
        Ok(())
    }

    /// The current scale, read from the device (a host sync).
    pub fn scale_value(&self) -> Result<f32> {
        self.scale.item()
    }

    /// The number of steps skipped so far because a gradient overflowed, read from the device
    /// (a host sync).
    pub fn skipped_steps(&self) -> Result<u64> {
        Ok(self.skipped.item()? as u64)
    }

    fn misuse<T>(&self, msg: &str) -> Result<T> {
        Err(Error::InvalidArgument {
            op: "GradScaler",
            msg: msg.into(),
        })
    }
}
