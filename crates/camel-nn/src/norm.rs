//! LayerNorm.

use crate::{Module, Parameter};
use camel_core::{Device, Error, Result, Tensor};

/// LayerNorm over the last dim: `(x − mean)/√(var + eps) · weight + bias`, with `weight`
/// initialized to ones and `bias` to zeros (PyTorch's `nn.LayerNorm` with affine parameters).
#[derive(Clone, Debug)]
pub struct LayerNorm {
    /// Gain γ, `[features]`.
    pub weight: Parameter,
    /// Bias β, `[features]`.
    pub bias: Parameter,
    /// Added to the variance (1e-5 by default).
    pub eps: f32,
    features: usize,
}

impl LayerNorm {
    /// A LayerNorm over `features` on `device`, eps 1e-5.
    pub fn new(features: usize, device: Device) -> Result<LayerNorm> {
        if features == 0 {
            return Err(Error::InvalidArgument {
                op: "LayerNorm",
                msg: "features must be ≥ 1".into(),
            });
        }
        Ok(LayerNorm {
            weight: Parameter::new(Tensor::ones(&[features], device)?)?,
            bias: Parameter::new(Tensor::zeros(&[features], device)?)?,
            eps: 1e-5,
            features,
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
}
