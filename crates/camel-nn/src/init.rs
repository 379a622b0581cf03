//! Weight initialization. Every initializer draws from a [`Generator`]: the process-wide one
//! (seeded by [`camel_core::manual_seed`]) unless a layer's options name a seed.

use camel_core::{Device, Generator, Result, Tensor};

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
    /// A tensor of `shape` drawn with this scheme from `generator`.
    pub fn tensor(
        &self,
        shape: &[usize],
        fan_in: usize,
        fan_out: usize,
        generator: &mut Generator,
        device: Device,
    ) -> Result<Tensor> {
        let fi = fan_in.max(1) as f32;
        let fo = fan_out.max(1) as f32;
        match self {
            Init::KaimingUniform => {
                let b = (6.0 / fi).sqrt();
                Tensor::rand_with(shape, -b, b, generator, device)
            }
            Init::KaimingNormal => {
                Tensor::randn_with(shape, generator, device)?.mul_scalar((2.0 / fi).sqrt())
            }
            Init::XavierUniform => {
                let b = (6.0 / (fi + fo)).sqrt();
                Tensor::rand_with(shape, -b, b, generator, device)
            }
            Init::TorchDefault => {
                let b = 1.0 / fi.sqrt();
                Tensor::rand_with(shape, -b, b, generator, device)
            }
            Init::Zeros => Tensor::zeros(shape, device),
        }
    }
}
