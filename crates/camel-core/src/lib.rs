//! camel-core: tensors, devices, ops with forward and backward, reverse-mode autograd, gradcheck.
//!
//! ```
//! use camel_core::{Device, Tensor};
//! camel_core::manual_seed(0);
//! let x = Tensor::randn(&[4, 3], Device::Cpu)?.requires_grad_(true)?;
//! let w = Tensor::randn(&[3, 2], Device::Cpu)?.requires_grad_(true)?;
//! let loss = x.matmul(&w)?.relu()?.sum()?;
//! loss.backward()?;
//! assert_eq!(w.grad().unwrap().shape(), &[3, 2]);
//! # Ok::<(), camel_core::Error>(())
//! ```
//!
//! Where things live: `tensor.rs` (the `Tensor` handle, creation, reading, autograd entry points),
//! `autograd.rs` (graph and backward), `ops/` (every op's forward and backward),
//! `storage.rs` (device dispatch), `backend/cpu.rs` (CPU reference), `backend/cuda.rs` (CUDA).

#![warn(missing_docs)]

pub mod autocast;
pub mod autograd;
pub mod backend;
mod device;
pub mod display;
mod error;
pub mod gradcheck;
pub mod layout;
pub mod ops;
pub mod rng;
pub mod shape;
pub mod storage;
mod tensor;
pub mod testing;

pub use autocast::{autocast, autocast_dtype, autocast_guard, AutocastGuard};
pub use autograd::{is_grad_enabled, no_grad, no_grad_guard, GradModeGuard};
/// The guard [`no_grad_guard`] returns: autograd records nothing until it is dropped (PyTorch's
/// `torch.no_grad()` context).
pub type NoGradGuard = GradModeGuard;
pub use backend::{check_loss_scale_options, Activation, StepGuard, UpdateRule};
/// Every `CAMEL_*` environment variable, read in one place (see its table).
pub use camel_cuda::config;
pub use device::{cuda_available, DType, Device};
pub use error::{Error, Result};
pub use gradcheck::{gradcheck, GradcheckOptions};
pub use half::{bf16, f16};
pub use layout::Layout;
pub use ops::attention::HEAD_DIMS as ATTENTION_HEAD_DIMS;
pub use ops::conv2d::Conv2dOptions;
pub use rng::{initial_seed, manual_seed, Generator};
pub use tensor::Tensor;
