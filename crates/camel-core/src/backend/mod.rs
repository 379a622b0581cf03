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
pub use crate::ops::update::UpdateRule;

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
