//! Weight initialization. All initializers are seeded so runs are reproducible.

use camel_core::{Device, Result, Tensor};

/// How to draw a layer's initial weights, from its fan-in and fan-out.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Init {
    /// U(−b, b) with b = √(6 / fan_in) — He/Kaiming for ReLU networks.
    KaimingUniform,
    /// N(0, 2 / fan_in).
    KaimingNormal,
    /// U(−b, b) with b = √(6 / (fan_in + fan_out)) — Glorot/Xavier for tanh/sigmoid.
    XavierUniform,
    /// U(−b, b) with b = 1/√fan_in — PyTorch's default for `nn.Linear`.
    #[default]
    TorchDefault,
    /// All zeros.
    Zeros,
}

impl Init {
    /// A tensor of `shape` drawn with this scheme.
    pub fn tensor(
        &self,
        shape: &[usize],
        fan_in: usize,
        fan_out: usize,
        seed: u64,
        device: Device,
    ) -> Result<Tensor> {
        let fi = fan_in.max(1) as f32;
        let fo = fan_out.max(1) as f32;
        match self {
            Init::KaimingUniform => {
                let b = (6.0 / fi).sqrt();
                Tensor::rand_seeded(shape, -b, b, seed, device)
            }
            Init::KaimingNormal => {
                Tensor::randn_seeded(shape, seed, device)?.mul_scalar((2.0 / fi).sqrt())
            }
            Init::XavierUniform => {
                let b = (6.0 / (fi + fo)).sqrt();
                Tensor::rand_seeded(shape, -b, b, seed, device)
            }
            Init::TorchDefault => {
                let b = 1.0 / fi.sqrt();
                Tensor::rand_seeded(shape, -b, b, seed, device)
            }
            Init::Zeros => Tensor::zeros(shape, device),
        }
    }
}
