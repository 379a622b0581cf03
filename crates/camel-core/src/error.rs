//! The one error type of camel-core. Every message names the op, the shapes or values involved,
//! and what was expected, so a user can fix the call without reading the source.

use crate::{DType, Device};

/// Errors returned by tensor operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Two shapes that had to agree did not.
    #[error("{op}: shape mismatch: {lhs:?} vs {rhs:?} ({expected})")]
    ShapeMismatch {
        /// The op that failed.
        op: &'static str,
        /// The first shape.
        lhs: Vec<usize>,
        /// The second shape.
        rhs: Vec<usize>,
        /// How the shapes had to agree.
        expected: String,
    },
    /// A single shape was invalid for the op.
    #[error("{op}: invalid shape {shape:?}: {expected}")]
    BadShape {
        /// The op that failed.
        op: &'static str,
        /// The shape given.
        shape: Vec<usize>,
        /// What the op accepts.
        expected: String,
    },
    /// Operands live on different devices; camel never copies between devices behind your back.
    #[error(
        "{op}: operands are on different devices ({lhs} and {rhs}); move one with .to(device)"
    )]
    DeviceMismatch {
        /// The op that failed.
        op: &'static str,
        /// The first operand's device.
        lhs: Device,
        /// The second operand's device.
        rhs: Device,
    },
    /// An operand has the wrong element type.
    #[error("{op}: expected dtype {expected}, got {got}")]
    DTypeMismatch {
        /// The op that failed.
        op: &'static str,
        /// The dtype the op accepts.
        expected: DType,
        /// The dtype given.
        got: DType,
    },
    /// An index (label, token id, dimension) was outside its valid range.
    #[error("{op}: index {index} out of range for size {size}")]
    IndexOutOfRange {
        /// The op that failed.
        op: &'static str,
        /// The index given.
        index: i64,
        /// The size of the dimension it indexes.
        size: usize,
    },
    /// An allocation the host could not satisfy, or one whose size in bytes overflows (on any
    /// device), with the size asked, instead of aborting the process.
    #[error("{op}: out of host memory allocating {bytes} bytes")]
    OutOfMemory {
        /// The op that failed.
        op: &'static str,
        /// The size asked, in bytes.
        bytes: u128,
    },
    /// Any other invalid argument.
    #[error("{op}: {msg}")]
    InvalidArgument {
        /// The op that failed.
        op: &'static str,
        /// What was wrong with the argument.
        msg: String,
    },
    /// An autograd misuse, e.g. backward() on a non-scalar or on a tensor without a graph.
    #[error("autograd: {0}")]
    Autograd(String),
    /// The requested device is not available (no GPU, or built without the `cuda` feature).
    #[error("device {device} is not available: {reason}")]
    DeviceUnavailable {
        /// The device asked for.
        device: Device,
        /// Why it is not available.
        reason: String,
    },
    /// An error from the CUDA layer (driver call, kernel launch), naming the kernel.
    #[error(transparent)]
    Cuda(#[from] camel_cuda::Error),
}

/// Result alias used throughout camel-core.
pub type Result<T> = std::result::Result<T, Error>;
