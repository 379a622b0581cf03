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
//! | `elementwise/` | add, sub, mul, div (broadcasting), neg, scalar ops, relu, sigmoid, tanh, gelu, exp, log, sqrt, square, abs, clamp, minimum, maximum |
//! | `elementwise/mask.rs` | comparisons eq, ne, lt, le, gt, ge (tensor and `*_scalar`) giving a 0/1 f32 mask, where_cond, masked_fill, triu, tril, the i64 arange |
//! | `reduce/` | sum, mean, max, min (all or along a dim, keepdim), argmax, argmin, sum_to; sum_dims, mean_dims, var_dims over several dims |
//! | `matmul/` | matmul (2-D and batched, transpose flags), linear (bias and activation fused) |
//! | `shape/` | views (reshape, permute, transpose, narrow, split, chunk, squeeze, unsqueeze, expand), contiguous, cat, stack, pad, to_dtype |
//! | `embedding/` | embedding (gather rows by index) |
//! | `index/` | select, index_select (built on narrow/squeeze and the embedding gather) |
//! | `arith.rs` | `std::ops` operators (`+ - * /`, unary `-`) on tensors and `f32` scalars |
//! | `random/` | rand, randn, bernoulli, multinomial, dropout (Philox, the same stream on every device) |
//! | `softmax/` | softmax, log_softmax (last dim) |
//! | `attention/` | attention, attention_dropout (fused: scores, causal mask, softmax, dropout and the sum of values without the score matrix; backward from the log-sum-exp) |
//! | `masked_softmax/` | scaled_masked_softmax (attention scores: scale, causal mask, softmax in one pass) |
//! | `filter/` | filter2d, filter2d_separable (2-D image filter, zero padding) |
//! | `layer_norm/` | layer_norm |
//! | `batch_norm/` | batch_norm (training, with the batch statistics), batch_norm_eval |
//! | `loss.rs` | cross_entropy, mse |
//! | `update/` | apply_updates (optimizer step of many parameters), clip_grad_norm, unscale_grads, apply_updates_guarded, update_loss_scale (dynamic loss scaling) |
//! | `conv2d/` | conv2d, conv2d_relu (NCHW; stride, padding, dilation, groups) |
//! | `pool/` | max_pool2d (saves the argmax), avg_pool2d, adaptive_avg_pool2d_1x1 |
//!
//! ## Dtypes
//!
//! Every op takes f32 (and the index ops i64). Most also take f16 and bf16:
//! - natively: the elementwise ops (each element widened to f32, computed, rounded once), the
//!   shape ops and `to_dtype`, the embedding's gather, `matmul` and `linear` (products summed in
//!   f32, on the tensor cores on the GPU, rounded once), `attention` (the tensor-core steps on the
//!   GPU) and `conv2d` (rows of patches times the weight on the 16-bit GEMM); the reductions,
//!   the softmaxes, the norms, the losses, dropout, the masking ops and pooling (kernels
//!   templated over the element type: each element widens as it loads, the op computes in f32,
//!   each output rounds once);
//! - where a 16-bit kernel does not reach (rows longer than its registers hold, a lower ladder
//!   step), the op's storage-level code widens the input, runs the f32 kernel and rounds the
//!   output once, so the op computes the same function.
//!
//! `filter2d` and `bernoulli` given a 16-bit tensor return [`crate::Error::DTypeMismatch`] naming
//! themselves, and a binary op refuses operands of two dtypes outside an autocast scope.
//!
//! ## NaN, infinities and edge cases
//!
//! Every op follows IEEE arithmetic and PyTorch, on every device, so a NaN is never hidden:
//! `relu(NaN)` is NaN (the fused ReLU of `linear` too) and its gradient at a NaN input is the
//! upstream gradient; the max of a slice holding a NaN is NaN; `argmax_last` returns the index of
//! a row's first NaN; softmax, log-softmax, cross-entropy and layer norm give NaN in the rows
//! that hold one. The mean of an empty tensor (or along an empty dim) is NaN; the max or argmax
//! along an empty dim is an error. `min`, `min_dim` and `argmin_last` mirror them (a NaN wins).
//! Comparisons are IEEE: every comparison with a NaN gives 0 except `ne`, which gives 1;
//! `minimum`/`maximum` give NaN where either side is NaN; `clamp` and `abs` keep a NaN (a NaN
//! clamp bound is an error); `where_cond`/`masked_fill` select, so a NaN or inf in the branch not
//! taken never reaches the output, and `triu`/`tril` write 0 over a NaN outside the triangle. The
//! variance over fewer elements than `correction` + 1 is NaN (or inf), as `torch.var`. Shapes whose element count overflows `usize` are errors, and a
//! host allocation that cannot be satisfied is [`crate::Error::OutOfMemory`].

pub mod arith;
pub mod attention;
pub mod batch_norm;
pub mod conv2d;
pub mod elementwise;
pub mod embedding;
pub mod filter;
pub mod index;
pub mod layer_norm;
pub mod loss;
pub mod masked_softmax;
pub mod matmul;
pub mod pool;
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

/// Error unless `t` holds floats (f32, f16 or bf16).
pub(crate) fn expect_float(op: &'static str, t: &Tensor) -> Result<()> {
    if !t.dtype().is_float() {
        return Err(Error::DTypeMismatch {
            op,
            expected: DType::F32,
            got: t.dtype(),
        });
    }
    Ok(())
}

/// Error unless `a` and `b` hold one dtype: a binary op never mixes them without a cast.
pub(crate) fn same_dtype(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            expected: a.dtype(),
            got: b.dtype(),
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
