//! A multi-layer perceptron: Linear → ReLU → … → Linear (each ReLU fused into its Linear).

use camel_nn::init::Init;
use camel_nn::{
    Activation, Device, Linear, LinearOptions, Module, Parameter, Result, Sequential, Tensor,
};

/// An MLP with ReLU between its Linear layers (no activation after the last). `Debug` prints
/// its layers.
pub struct Mlp {
    net: Sequential,
    sizes: Vec<usize>,
}

impl Mlp {
    /// Layers of widths `sizes` (e.g. `[784, 256, 256, 10]`), Kaiming-initialized from `seed`.
    pub fn new(sizes: &[usize], seed: u64, device: Device) -> Result<Mlp> {
        if sizes.len() < 2 {
            return Err(camel_nn::Error::InvalidArgument {
                op: "Mlp",
                msg: format!("need at least input and output widths, got {sizes:?}"),
            });
        }
        let mut net = Sequential::new();
        for (i, w) in sizes.windows(2).enumerate() {
            let opts = LinearOptions {
                bias: true,
                init: Init::KaimingUniform,
                seed: Some(seed.wrapping_add(i as u64 * 7919)),
                device,
                // ReLU between layers, fused into the layer's GEMM epilogue on the GPU
                activation: if i + 2 < sizes.len() {
                    Activation::Relu
                } else {
                    Activation::Identity
                },
            };
            net.push(Linear::with_options(w[0], w[1], opts)?);
        }
        Ok(Mlp {
            net,
            sizes: sizes.to_vec(),
        })
    }

    /// Layer widths.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }
}

impl std::fmt::Debug for Mlp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mlp{:?}", self.net)
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.net.forward(x)
    }
    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        self.net.named_parameters()
    }
    fn set_training(&self, on: bool) {
        self.net.set_training(on)
    }
    fn is_training(&self) -> bool {
        self.net.is_training()
    }
}
