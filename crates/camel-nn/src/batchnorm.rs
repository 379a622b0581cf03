//! BatchNorm1d and BatchNorm2d: per-channel normalization with batch statistics in training and
//! running statistics in eval, as PyTorch's `nn.BatchNorm1d` / `nn.BatchNorm2d`.

use crate::{Buffer, Module, Parameter, TrainingFlag};
use camel_core::{no_grad, Device, Error, Result, Tensor};
use std::fmt;

/// Options of [`BatchNorm1d::with_options`] and [`BatchNorm2d::with_options`] (PyTorch's
/// defaults).
#[derive(Clone, Copy, Debug)]
pub struct BatchNormOptions {
    /// Added to the variance (1e-5).
    pub eps: f32,
    /// Weight of the new batch in the running statistics:
    /// `running = (1 − momentum)·running + momentum·batch` (0.1).
    pub momentum: f32,
    /// Learned per-channel `weight` (ones) and `bias` (zeros) (true).
    pub affine: bool,
    /// Keep running statistics and normalize with them in eval mode (true); without, eval mode
    /// also normalizes with the batch's statistics.
    pub track_running_stats: bool,
    /// Device of the parameters and buffers.
    pub device: Device,
}

impl Default for BatchNormOptions {
    fn default() -> Self {
        BatchNormOptions {
            eps: 1e-5,
            momentum: 0.1,
            affine: true,
            track_running_stats: true,
            device: Device::Cpu,
        }
    }
}

/// The running statistics of a BatchNorm layer.
#[derive(Clone)]
struct Running {
    mean: Buffer,
    var: Buffer,
    batches: Buffer,
}

/// What BatchNorm1d and BatchNorm2d share: the parameters, buffers and the forward.
#[derive(Clone)]
struct BatchNorm {
    op: &'static str,
    features: usize,
    eps: f32,
    momentum: f32,
    weight: Option<Parameter>,
    bias: Option<Parameter>,
    running: Option<Running>,
    training: TrainingFlag,
}

impl BatchNorm {
    fn new(op: &'static str, features: usize, o: BatchNormOptions) -> Result<BatchNorm> {
        if features == 0 {
            return Err(Error::InvalidArgument {
                op,
                msg: "num_features must be ≥ 1".into(),
            });
        }
        if !(o.eps.is_finite() && o.eps > 0.0) {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("eps must be finite and > 0, got {}", o.eps),
            });
        }
        if !(0.0..=1.0).contains(&o.momentum) {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("momentum must be in [0, 1], got {}", o.momentum),
            });
        }
        let d = o.device;
        let param = |v: f32| Parameter::new(Tensor::full(&[features], v, d)?);
        let (weight, bias) = if o.affine {
            (Some(param(1.0)?), Some(param(0.0)?))
        } else {
            (None, None)
        };
        let running = if o.track_running_stats {
            Some(Running {
                mean: Buffer::new(Tensor::zeros(&[features], d)?),
                var: Buffer::new(Tensor::ones(&[features], d)?),
                batches: Buffer::new(Tensor::zeros(&[], d)?),
            })
        } else {
            None
        };
        Ok(BatchNorm {
            op,
            features,
            eps: o.eps,
            momentum: o.momentum,
            weight,
            bias,
            running,
            training: TrainingFlag::new(),
        })
    }

    /// Checks `x`'s rank (`ranks`, described by `expected`) and channels, then normalizes.
    fn forward(&self, x: &Tensor, ranks: &[usize], expected: &str) -> Result<Tensor> {
        let op = self.op;
        if !ranks.contains(&x.rank()) {
            return Err(Error::BadShape {
                op,
                shape: x.shape().to_vec(),
                expected: expected.into(),
            });
        }
        if x.shape()[1] != self.features {
            return Err(Error::BadShape {
                op,
                shape: x.shape().to_vec(),
                expected: format!(
                    "{} channels (dim 1), as the layer was made with",
                    self.features
                ),
            });
        }
        let (w, b) = (
            self.weight.as_ref().map(|p| p.tensor()),
            self.bias.as_ref().map(|p| p.tensor()),
        );
        match (&self.running, self.training.get()) {
            (Some(r), false) => x.batch_norm_eval(
                &r.mean.tensor(),
                &r.var.tensor(),
                w.as_ref(),
                b.as_ref(),
                self.eps,
            ),
            (running, _) => {
                let (y, mean, var) = x.batch_norm(w.as_ref(), b.as_ref(), self.eps)?;
                if let (Some(r), true) = (running, self.training.get()) {
                    let m = x.numel() / self.features;
                    no_grad(|| self.update(r, &mean, &var, m))?;
                }
                Ok(y)
            }
        }
    }

    /// Running statistics from a batch of `m` values a channel, in place on their device:
    /// `running = (1 − momentum)·running + momentum·batch`, with the batch's unbiased variance
    /// (`var·m/(m − 1)`), as PyTorch; one more batch tracked.
    fn update(&self, r: &Running, mean: &Tensor, var: &Tensor, m: usize) -> Result<()> {
        let k = self.momentum;
        let unbiased = var.mul_scalar(m as f32 / (m - 1) as f32)?;
        for (buf, batch) in [(&r.mean, mean), (&r.var, &unbiased)] {
            let old = buf.tensor();
            let new = old.mul_scalar(1.0 - k)?.add(&batch.mul_scalar(k)?)?;
            old.copy_from(&new)?;
        }
        let n = r.batches.tensor();
        n.copy_from(&n.add_scalar(1.0)?)
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        let mut v = Vec::new();
        if let Some(w) = &self.weight {
            v.push(("weight".to_string(), w.clone()));
        }
        if let Some(b) = &self.bias {
            v.push(("bias".to_string(), b.clone()));
        }
        v
    }

    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        match &self.running {
            Some(r) => vec![
                ("running_mean".to_string(), r.mean.clone()),
                ("running_var".to_string(), r.var.clone()),
                ("num_batches_tracked".to_string(), r.batches.clone()),
            ],
            None => Vec::new(),
        }
    }

    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}({}, eps={:e}, momentum={}, affine={}, track_running_stats={})",
            self.op,
            self.features,
            self.eps,
            self.momentum,
            self.weight.is_some(),
            self.running.is_some()
        )
    }
}

macro_rules! batch_norm_layer {
    ($name:ident, $ranks:expr, $expected:expr, $doc:literal, $new_doc:literal) => {
        #[doc = $doc]
        ///
        /// Parameters `weight` and `bias` (`[C]`, when affine); buffers `running_mean` (zeros),
        /// `running_var` (ones, the unbiased variance, as PyTorch) and `num_batches_tracked` (an
        /// f32 count, since camel's state dicts hold f32; exact to 2^24 batches), updated in
        /// training without recording autograd and saved with the state dict.
        #[derive(Clone)]
        pub struct $name(BatchNorm);

        impl $name {
            #[doc = $new_doc]
            pub fn new(num_features: usize) -> Result<$name> {
                $name::with_options(num_features, BatchNormOptions::default())
            }

            /// The layer with explicit options (eps, momentum, affine, running statistics,
            /// device).
            pub fn with_options(num_features: usize, o: BatchNormOptions) -> Result<$name> {
                Ok($name(BatchNorm::new(stringify!($name), num_features, o)?))
            }

            /// Channels normalized.
            pub fn num_features(&self) -> usize {
                self.0.features
            }

            /// The learned gain (`None` without affine).
            pub fn weight(&self) -> Option<&Parameter> {
                self.0.weight.as_ref()
            }

            /// The learned bias (`None` without affine).
            pub fn bias(&self) -> Option<&Parameter> {
                self.0.bias.as_ref()
            }

            /// The running mean (`None` without running statistics).
            pub fn running_mean(&self) -> Option<&Buffer> {
                self.0.running.as_ref().map(|r| &r.mean)
            }

            /// The running (unbiased) variance (`None` without running statistics).
            pub fn running_var(&self) -> Option<&Buffer> {
                self.0.running.as_ref().map(|r| &r.var)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                self.0.forward(x, &$ranks, $expected)
            }

            fn named_parameters(&self) -> Vec<(String, Parameter)> {
                self.0.named_parameters()
            }

            fn named_buffers(&self) -> Vec<(String, Buffer)> {
                self.0.named_buffers()
            }

            fn set_training(&self, on: bool) {
                self.0.training.set(on)
            }

            fn is_training(&self) -> bool {
                self.0.training.get()
            }
        }
    };
}

batch_norm_layer!(
    BatchNorm1d,
    [2, 3],
    "[N, C] or [N, C, L]",
    "BatchNorm over `[N, C]` or `[N, C, L]` (PyTorch's `nn.BatchNorm1d`): each channel \
     normalized with its batch mean and biased variance in training, with the running \
     statistics in eval, then `· weight + bias`.",
    "A BatchNorm1d of `num_features` channels on the CPU with PyTorch's defaults (eps 1e-5, \
     momentum 0.1, affine, running statistics)."
);

batch_norm_layer!(
    BatchNorm2d,
    [4],
    "[N, C, H, W]",
    "BatchNorm over `[N, C, H, W]` (PyTorch's `nn.BatchNorm2d`): each channel normalized with \
     the mean and biased variance of its N·H·W values in training, with the running statistics \
     in eval, then `· weight + bias`.",
    "A BatchNorm2d of `num_features` channels on the CPU with PyTorch's defaults (eps 1e-5, \
     momentum 0.1, affine, running statistics)."
);
