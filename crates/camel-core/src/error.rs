//! The one error type of camel-core. Every message names the op, the shapes or values involved,
//! and what was expected, so a user can fix the call without reading the source.

use crate::{DType, Device};

/// Errors returned by tensor operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Two shapes that had to agree did not.
    #[error("{op}: shape mismatch: {lhs:?} vs {rhs:?} ({expected})")]
    ShapeMismatch {
        op: &'static str,
        lhs: Vec<usize>,
        rhs: Vec<usize>,
        expected: String,
    },
    /// A single shape was invalid for the op.
    #[error("{op}: invalid shape {shape:?}: {expected}")]
    BadShape {
        op: &'static str,
        shape: Vec<usize>,
        expected: String,
    },
    /// Operands live on different devices; camel never copies between devices behind your back.
    #[error(
        "{op}: operands are on different devices ({lhs} and {rhs}); move one with .to(device)"
    )]
    DeviceMismatch {
        op: &'static str,
        lhs: Device,
        rhs: Device,
    },
    /// An operand has the wrong element type.
    #[error("{op}: expected dtype {expected:?}, got {got:?}")]
    DTypeMismatch {
        op: &'static str,
        expected: DType,
        got: DType,
    },
    /// An index (label, token id, dimension) was outside its valid range.
    #[error("{op}: index {index} out of range for size {size}")]
    IndexOutOfRange {
        op: &'static str,
        index: i64,
        size: usize,
    },
    /// An allocation the host could not satisfy, or one whose size in bytes overflows (on any
    /// device), with the size asked, instead of aborting the process.
    #[error("{op}: out of host memory allocating {bytes} bytes")]
    OutOfMemory { op: &'static str, bytes: u128 },
    /// Any other invalid argument.
    #[error("{op}: {msg}")]
    InvalidArgument { op: &'static str, msg: String },
    /// An autograd misuse, e.g. backward() on a non-scalar or on a tensor without a graph.
    #[error("autograd: {0}")]
    Autograd(String),
    /// The requested device is not available (no GPU, or built without the `cuda` feature).
    #[error("device {device} is not available: {reason}")]
    DeviceUnavailable { device: Device, reason: String },
    /// An error from the CUDA layer (driver call, kernel launch), naming the kernel.
    #[error(transparent)]
    Cuda(#[from] camel_cuda::Error),
}

/// Result alias used throughout camel-core.
pub type Result<T> = std::result::Result<T, Error>;
