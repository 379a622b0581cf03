//! Every op, forward and backward, defined once for all devices. An op with device code is a
//! folder:
//!
//! - `mod.rs`: the public `Tensor` method (shape, dtype and device checks, its doc with the
//!   PyTorch equivalent), its backward beside it, the trait of device primitives it needs
//!   (`SoftmaxKernels`, …) and the one-line `Storage` methods that dispatch them;
//! - `cpu.rs`: the trait for `CpuStorage`, the reference every kernel is tested against;
//! - `cuda.rs`: the trait for `CudaStorage`, which queues the kernels (`kernels/<family>`).
//!
//! | folder | ops |
//! |---|---|
//! | `elementwise/` | add, sub, mul, div (broadcasting), neg, scalar ops, relu, sigmoid, tanh, gelu, exp, log, sqrt, square |
//! | `reduce/` | sum, mean, max (all or along a dim, keepdim), argmax, sum_to |
//! | `matmul/` | matmul (2-D and batched, transpose flags), linear (bias and activation fused) |
//! | `shape/` | views (reshape, permute, transpose, narrow, split, chunk, squeeze, unsqueeze, expand), contiguous, cat, stack, pad, to_dtype |
//! | `embedding/` | embedding (gather rows by index) |
//! | `index/` | select, index_select (built on narrow/squeeze and the embedding gather) |
//! | `arith.rs` | `std::ops` operators (`+ - * /`, unary `-`) on tensors and `f32` scalars |
//! | `random/` | rand, randn, bernoulli, multinomial, dropout (Philox, the same stream on every device) |
//! | `softmax/` | softmax, log_softmax (last dim) |
//! | `masked_softmax/` | scaled_masked_softmax (attention scores: scale, causal mask, softmax in one pass) |
//! | `layer_norm/` | layer_norm |
//! | `loss.rs` | cross_entropy, mse |
//! | `update.rs` | apply_updates (optimizer step of many parameters) |
//!
//! ## NaN, infinities and edge cases
//!
//! Every op follows IEEE arithmetic and PyTorch, on every device, so a NaN is never hidden:
//! `relu(NaN)` is NaN (the fused ReLU of `linear` too) and its gradient at a NaN input is the
//! upstream gradient; the max of a slice holding a NaN is NaN; `argmax_last` returns the index of
//! a row's first NaN; softmax, log-softmax, cross-entropy and layer norm give NaN in the rows
//! that hold one. The mean of an empty tensor (or along an empty dim) is NaN; the max or argmax
//! along an empty dim is an error. Shapes whose element count overflows `usize` are errors, and a
//! host allocation that cannot be satisfied is [`crate::Error::OutOfMemory`].

pub mod arith;
pub mod elementwise;
pub mod embedding;
pub mod index;
pub mod layer_norm;
pub mod loss;
pub mod masked_softmax;
pub mod matmul;
pub mod random;
pub mod reduce;
pub mod shape;
pub mod softmax;
pub mod update;

use crate::{DType, Error, Result, Tensor};

/// Error unless `t` is f32.
pub(crate) fn expect_f32(op: &'static str, t: &Tensor) -> Result<()> {
    if t.dtype() != DType::F32 {
        return Err(Error::DTypeMismatch {
            op,
            expected: DType::F32,
            got: t.dtype(),
        });
    }
    Ok(())
}

/// Error unless both tensors are on one device.
pub(crate) fn same_device(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.device() != b.device() {
        return Err(Error::DeviceMismatch {
            op,
            lhs: a.device(),
            rhs: b.device(),
        });
    }
    Ok(())
}
