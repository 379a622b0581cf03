//! The device backends: each one's storage type and what its ops share. [`cpu`] holds
//! `CpuStorage`; [`cuda`] holds `CudaStorage` (device memory from the caching allocator, the
//! poison switch, deferred index errors, transfers). The ops themselves live in `ops/<op>/`,
//! one `cpu.rs` and one `cuda.rs` each; [`ladder`] says which step of each kernel ladder runs.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod ladder;

pub use crate::ops::elementwise::{BinaryOp, UnaryOp, GELU_C};
pub use crate::ops::reduce::ReduceOp;

/// The activation fused into a linear layer's GEMM epilogue ([`crate::Tensor::linear`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// No activation.
    #[default]
    Identity,
    /// max(x, 0).
    Relu,
    /// GELU, tanh approximation (as [`UnaryOp::Gelu`]).
    Gelu,
}

impl Activation {
    /// The CPU reference of the activation.
    pub fn apply(&self, x: f32) -> f32 {
        match self {
            Activation::Identity => x,
            Activation::Relu => UnaryOp::Relu.apply(x),
            Activation::Gelu => UnaryOp::Gelu.apply(x),
        }
    }
}

/// Hyper-parameters of one optimizer update, shared by the CPU and CUDA implementations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UpdateRule {
    /// SGD: `buf = momentum*buf + (g + wd*p); p -= lr*buf` (buf = g + wd*p when momentum is 0).
    Sgd {
        lr: f32,
        momentum: f32,
        weight_decay: f32,
    },
    /// Adam (L2 weight decay added to the gradient) or AdamW (decoupled decay), with bias correction.
    Adam {
        lr: f32,
        beta1: f32,
        beta2: f32,
        eps: f32,
        weight_decay: f32,
        decoupled: bool,
        /// 1 - beta1^t
        bc1: f32,
        /// 1 - beta2^t
        bc2: f32,
    },
}
