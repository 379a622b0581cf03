//! The device backends: each one's storage type and what its ops share. [`cpu`] holds
//! `CpuStorage`; `cuda` holds `CudaStorage` (device memory from the caching allocator, the
//! poison switch, deferred index errors, transfers). The ops themselves live in `ops/<op>/`,
//! one `cpu.rs` and one `cuda.rs` each; [`ladder`] says which step of each kernel ladder runs;
//! `vector` compiles the CPU's loops for the widest vector unit the CPU has; `threads` splits an
//! op's independent items over the CPU's cores.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod ladder;
pub(crate) mod threads;
pub(crate) mod vector;

pub use crate::ops::elementwise::{BinaryOp, UnaryOp, GELU_C};
pub use crate::ops::reduce::ReduceOp;
pub use crate::ops::update::{check_loss_scale_options, StepGuard, UpdateRule};
pub use camel_cuda::kernels::matmul::Activation;
