//! Every op, forward and backward, defined once for all devices. Each file holds one family:
//! the tensor-level function checks shapes, dtypes and devices, calls the device primitive
//! through [`crate::storage::Storage`], and records its backward right beside the forward.
//!
//! | file | ops |
//! |---|---|
//! | `elementwise.rs` | add, sub, mul, div (broadcasting), neg, scalar ops, relu, sigmoid, tanh, gelu, exp, log, sqrt, square |
//! | `reduce.rs` | sum, mean, max (all or along a dim, keepdim), argmax, sum_to |
//! | `matmul.rs` | matmul, 2-D and batched, with transpose flags |
//! | `shape.rs` | reshape, flatten, permute, transpose, pad, narrow, broadcast_to, embedding |
//! | `softmax.rs` | softmax, log_softmax (last dim) |
//! | `loss.rs` | cross_entropy, mse |
//! | `norm.rs` | layer_norm |
//! | `update.rs` | apply_updates (optimizer step of many parameters) |

pub mod elementwise;
pub mod loss;
pub mod matmul;
pub mod norm;
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
