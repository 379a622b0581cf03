//! Learning-rate schedules: the learning rate as a function of the step, set on any optimizer
//! through [`Optimizer::set_lr`].

use crate::Optimizer;
use camel_nn::{Error, Result};

/// A learning rate for every step (0-based), as nanoGPT's `get_lr` and PyTorch's `StepLR`.
///
/// ```
/// use camel_optim::LrSchedule;
/// let s = LrSchedule::WarmupCosine { max_lr: 1e-3, min_lr: 1e-4, warmup: 100, total: 5000 };
/// assert!(s.lr(0) < s.lr(99));
/// assert_eq!(s.lr(100), 1e-3);
/// assert_eq!(s.lr(5000), 1e-4);
/// assert_eq!(s.lr(9999), 1e-4);
/// # Ok::<(), camel_nn::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LrSchedule {
    /// The same rate at every step.
    Constant {
        /// The learning rate.
        lr: f32,
    },
    /// nanoGPT's schedule: linear warmup `max_lr · (step + 1) / (warmup + 1)` for the first
    /// `warmup` steps, then a cosine from `max_lr` (at step `warmup`) down to `min_lr` (at step
    /// `total`), then `min_lr`.
    WarmupCosine {
        /// The rate at the end of the warmup.
        max_lr: f32,
        /// The floor, reached at `total` and kept after it.
        min_lr: f32,
        /// Steps of linear warmup.
        warmup: usize,
        /// The step at which the cosine reaches `min_lr` (nanoGPT's `lr_decay_iters`).
        total: usize,
    },
    /// `lr · gamma^(step / step_size)` (PyTorch's `StepLR`): multiplied by `gamma` every
    /// `step_size` steps.
    StepDecay {
        /// The initial rate.
        lr: f32,
        /// Steps between decays, > 0.
        step_size: usize,
        /// Factor applied at each decay, in (0, 1].
        gamma: f32,
    },
}

impl LrSchedule {
    /// The learning rate at `step` (0-based).
    pub fn lr(&self, step: usize) -> f32 {
        match *self {
            LrSchedule::Constant { lr } => lr,
            LrSchedule::WarmupCosine {
                max_lr,
                min_lr,
                warmup,
                total,
            } => {
                if step < warmup {
                    return (f64::from(max_lr) * (step as f64 + 1.0) / (warmup as f64 + 1.0))
                        as f32;
                }
                if step >= total {
                    return min_lr;
                }
                let ratio = (step - warmup) as f64 / (total - warmup) as f64;
                let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
                (f64::from(min_lr) + coeff * (f64::from(max_lr) - f64::from(min_lr))) as f32
            }
            LrSchedule::StepDecay {
                lr,
                step_size,
                gamma,
            } => {
                let k = step.checked_div(step_size).unwrap_or(0);
                (f64::from(lr) * f64::from(gamma).powf(k as f64)) as f32
            }
        }
    }

    /// Checks the schedule: rates finite and ≥ 0, `min_lr ≤ max_lr`, `step_size > 0`, `gamma`
    /// in (0, 1].
    pub fn check(&self) -> Result<()> {
        let bad = |msg: String| {
            Err(Error::InvalidArgument {
                op: "LrSchedule",
                msg,
            })
        };
        let rate = |name: &str, v: f32| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                bad(format!("{name} must be finite and ≥ 0, got {v}"))
            }
        };
        match *self {
            LrSchedule::Constant { lr } => rate("lr", lr),
            LrSchedule::WarmupCosine { max_lr, min_lr, .. } => {
                rate("max_lr", max_lr)?;
                rate("min_lr", min_lr)?;
                if min_lr > max_lr {
                    return bad(format!("min_lr {min_lr} exceeds max_lr {max_lr}"));
                }
                Ok(())
            }
            LrSchedule::StepDecay {
                lr,
                step_size,
                gamma,
            } => {
                rate("lr", lr)?;
                if step_size == 0 {
                    return bad("step_size must be > 0".into());
                }
                if !(gamma > 0.0 && gamma <= 1.0) {
                    return bad(format!("gamma must be in (0, 1], got {gamma}"));
                }
                Ok(())
            }
        }
    }

    /// Sets `opt`'s learning rate to the rate at `step` and returns it (call before
    /// `opt.step()`).
    pub fn apply<O: Optimizer + ?Sized>(&self, opt: &mut O, step: usize) -> Result<f32> {
        self.check()?;
        let lr = self.lr(step);
        opt.set_lr(lr)?;
        Ok(lr)
    }
}
