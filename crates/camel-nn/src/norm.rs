//! LayerNorm.

use crate::{Module, Parameter, TrainingFlag};
use camel_core::{Device, Error, Result, Tensor};
use std::fmt;

/// Options of [`LayerNorm::with_options`].
#[derive(Clone, Copy, Debug)]
pub struct LayerNormOptions {
    /// Added to the variance (1e-5 by default, as PyTorch's).
    pub eps: f32,
    /// Device of the parameters.
    pub device: Device,
}

impl Default for LayerNormOptions {
    fn default() -> Self {
        LayerNormOptions {
            eps: 1e-5,
            device: Device::Cpu,
        }
    }
}

/// LayerNorm over the last dim: `(x − mean)/√(var + eps) · weight + bias`, with `weight`
/// initialized to ones and `bias` to zeros (PyTorch's `nn.LayerNorm` with affine parameters).
#[derive(Clone)]
pub struct LayerNorm {
    /// Gain γ, `[features]`.
    pub weight: Parameter,
    /// Bias β, `[features]`.
    pub bias: Parameter,
    /// Added to the variance (1e-5 by default).
    pub eps: f32,
    features: usize,
    training: TrainingFlag,
}

impl fmt::Debug for LayerNorm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LayerNorm(({},), eps={:e})", self.features, self.eps)
    }
}

impl LayerNorm {
    /// A LayerNorm over `features` on the CPU, eps 1e-5 (PyTorch's `nn.LayerNorm(features)`).
    ///
    /// ```
    /// use camel_nn::{LayerNorm, LayerNormOptions, Device};
    /// let ln = LayerNorm::new(8)?;
    /// let ln_eps = LayerNorm::with_options(8, LayerNormOptions { eps: 1e-6, device: Device::Cpu })?;
    /// assert_eq!(ln.features(), ln_eps.features());
    /// # Ok::<(), camel_nn::Error>(())
    /// ```
    pub fn new(features: usize) -> Result<LayerNorm> {
        LayerNorm::with_options(features, LayerNormOptions::default())
    }

    /// A LayerNorm with explicit options (eps, device).
    pub fn with_options(features: usize, o: LayerNormOptions) -> Result<LayerNorm> {
        if features == 0 {
            return Err(Error::InvalidArgument {
                op: "LayerNorm",
                msg: "features must be ≥ 1".into(),
            });
        }
        if !(o.eps.is_finite() && o.eps > 0.0) {
            return Err(Error::InvalidArgument {
                op: "LayerNorm",
                msg: format!("eps must be finite and > 0, got {}", o.eps),
            });
        }
        let device = o.device;
        Ok(LayerNorm {
            weight: Parameter::new(Tensor::ones(&[features], device)?)?,
            bias: Parameter::new(Tensor::zeros(&[features], device)?)?,
            eps: o.eps,
            features,
            training: TrainingFlag::new(),
        })
    }

    /// Normalized width.
    pub fn features(&self) -> usize {
        self.features
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.layer_norm(&self.weight.tensor(), &self.bias.tensor(), self.eps)
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        vec![
            ("weight".to_string(), self.weight.clone()),
            ("bias".to_string(), self.bias.clone()),
        ]
    }

    fn set_training(&self, on: bool) {
        self.training.set(on)
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}
